"""Task windows: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch01_tokens.windows import ana, positions, too_short
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("windows_len_not_len_minus_1", "windows", """
        positions = min(block_size, len(ids))
        return ids[:positions], ids[1 : positions + 1]
    """, (ana, positions), "len(ids) - 1", "positions = min(block_size, len(ids))"),
    mutant("windows_ignore_block_size", "windows", """
        return ids[:-1], ids[1:]
    """, positions, "ignores block_size", "long documents not cut to the context"),
    mutant("windows_one_short", "windows", """
        positions = min(block_size, len(ids) - 1) - 1
        return ids[:positions], ids[1 : positions + 1]
    """, (ana, positions), "one position short", "one position too few"),
    mutant("windows_targets_not_shifted", "windows", """
        positions = min(block_size, len(ids) - 1)
        return ids[:positions], ids[:positions]
    """, ana, "not shifted", "targets equal the inputs"),
    mutant("windows_last_positions", "windows", """
        positions = min(block_size, len(ids) - 1)
        return ids[len(ids) - 1 - positions : -1], ids[len(ids) - positions :]
    """, positions, "last positions", "window cut from the end of the document"),
    mutant("windows_short_document_silent", "windows", """
        positions = min(block_size, len(ids) - 1)
        return list(ids[:max(positions, 0)]), list(ids[1:max(positions, 0) + 1])
    """, too_short, "fewer than 2", "a document with fewer than 2 ids gives empty windows"),
    mutant("windows_inputs_targets_swapped", "windows", patch("""
        - return list(ids[:positions]), list(ids[1 : positions + 1])
        + return list(ids[1 : positions + 1]), list(ids[:positions])
    """), (ana, positions), "swapped", "inputs and targets swapped"),
]

VARIANTS = [
    variant("windows_loop_tuples", "windows", """
        n = min(block_size, len(ids) - 1)
        if n < 1:
            raise ValueError("too short")
        xs, ys = [], []
        for p in range(n):
            xs.append(ids[p])
            ys.append(ids[p + 1])
        return tuple(xs), tuple(ys)
    """, "a loop over positions, returning tuples"),
    variant("windows_chunk_then_shift", "windows", """
        chunk = list(ids[: block_size + 1])
        if block_size < 1 or len(chunk) < 2:
            raise ValueError("a window needs at least two ids")
        return chunk[:-1], chunk[1:]
    """, "a chunk of block_size + 1 ids, then inputs chunk[:-1] and targets chunk[1:]"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'P = min(block_size, len(ids))': ('windows_len_not_len_minus_1',),
    'Targets equal to the inputs': ('windows_targets_not_shifted',),
    'inputs and targets swapped': ('windows_inputs_targets_swapped',),
    'Taking the *last* block_size positions': ('windows_last_positions',),
    'a document with fewer than 2 ids': ('windows_short_document_silent',),
}
