"""Task make_batch: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch08_training.make_batch import lesson_example, padding_and_cropping
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("make_batch_targets_not_shifted", "make_batch", patch("""
        - return inputs, targets, mask
        + return inputs, inputs.clone(), mask
    """), (lesson_example, padding_and_cropping), "shift",
       "targets equal to the inputs"),
    mutant("make_batch_padding_scored", "make_batch", patch("""
        - mask = torch.zeros((len(windows), T), dtype=torch.bool)
        + mask = torch.ones((len(windows), T), dtype=torch.bool)
    """), (lesson_example, padding_and_cropping), "padded positions",
       "the mask is True on padding"),
    mutant("make_batch_padding_in_front", "make_batch", patch("""
        - inputs[row, : len(x)] = torch.tensor(x, dtype=torch.long)
        - targets[row, : len(y)] = torch.tensor(y, dtype=torch.long)
        - mask[row, : len(x)] = True
        + inputs[row, T - len(x):] = torch.tensor(x, dtype=torch.long)
        + targets[row, T - len(y):] = torch.tensor(y, dtype=torch.long)
        + mask[row, T - len(x):] = True
    """), (lesson_example, padding_and_cropping), "front",
       "padding at the front"),
    mutant("make_batch_always_block_size", "make_batch", patch("""
        - T = max(len(x) for x, _ in windows)
        + T = block_size
    """), lesson_example, "longest row", "T fixed at block_size"),
]

VARIANTS = [
    variant("make_batch_pad_sequence", "make_batch", """
        from torch.nn.utils.rnn import pad_sequence

        pairs = [training_windows(list(ids), block_size) for ids in documents]
        xs = [torch.tensor(x, dtype=torch.long) for x, _ in pairs]
        ys = [torch.tensor(y, dtype=torch.long) for _, y in pairs]
        inputs = pad_sequence(xs, batch_first=True, padding_value=pad_id)
        targets = pad_sequence(ys, batch_first=True, padding_value=pad_id)
        lengths = torch.tensor([len(x) for x in xs])
        mask = torch.arange(inputs.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)
        return inputs, targets, mask
    """, "torch's pad_sequence and a length comparison for the mask"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'Padding at the front': ('make_batch_padding_in_front',),
    'letting padded positions into the loss or the count': ('make_batch_padding_scored',),
}
