"""Task evaluate: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch08_training.evaluate import eval_mode_restored, per_scored_character
from grader.checks.ch08_training.evaluate.hidden import matches_reference
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("evaluate_mean_of_batch_means", "evaluate", patch("""
        - total, count = 0.0, 0
        + means = []
        - n = int(mask.sum())
        - total += masked_loss(logits, targets, mask).item() * n
        - count += n
        + means.append(masked_loss(logits, targets, mask).item())
        - return total / count
        + return sum(means) / len(means)
    """), (per_scored_character, matches_reference), "batch means",
       "mean of per-batch means"),
    mutant("evaluate_padding_scored", "evaluate", patch("""
        - n = int(mask.sum())
        - total += masked_loss(logits, targets, mask).item() * n
        - count += n
        + total += cross_entropy(logits, targets).item() * targets.numel()
        + count += targets.numel()
    """), (per_scored_character, matches_reference), "padded",
       "padded positions scored"),
    mutant("evaluate_in_training_mode", "evaluate", patch("""
        - model.eval()
    """), eval_mode_restored, "model.eval()", "dropout left on while evaluating"),
    mutant("evaluate_always_back_to_train", "evaluate", patch("""
        - model.train(was_training)
        + model.train()
    """), eval_mode_restored, "restore the mode", "always returns to training mode"),
]

VARIANTS = [
    variant("evaluate_document_by_document", "evaluate", """
        was_training = model.training
        model.eval()
        total, count = 0.0, 0
        for ids in encode_documents(docs, tokenizer):
            x, y = training_windows(ids, model.cfg.block_size)
            logits = model(torch.tensor([x]))[0]
            total += cross_entropy(logits[0], torch.tensor(y)).item() * len(x)
            count += len(x)
        model.train(was_training)
        return total / count
    """, "one document at a time, no padding at all"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'letting padded positions into the loss or the count': ('evaluate_padding_scored',),
}
