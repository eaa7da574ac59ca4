"""The (input, target) training windows of a BOS-framed document.

The contract the checks pin: a window holds positions = min(block_size, len(ids) - 1)
pairs from position 0 on, the targets being the inputs shifted by one; `ana` =
[BOS a n a BOS] gives 4 scored positions, the last target being the closing BOS; a
document with fewer than 2 ids is a ValueError. The right windows of the public checks'
documents, and the classic wrong ones, are data the kit computed (grader/checks/facts.py).
"""

from __future__ import annotations

from grader.checks._api import Task, check, exception_name, kind_of, naming, try_call
from grader.checks.ch01_tokens.common import plain_ints
from grader.checks.facts import known_facts

TASKS = [
    Task("windows", "tokenizer", "training_windows", "(input, target) training windows"),
]


def probe_windows(ns, cases):
    results = []
    for ids, block_size in cases:
        attempt = try_call(ns.tokenizer.training_windows, list(ids), block_size)
        if "value" in attempt:
            value = attempt["value"]
            if isinstance(value, (tuple, list)) and len(value) == 2:
                attempt["value"] = [plain_ints(value[0]), plain_ints(value[1])]
            else:
                attempt["value"] = {"unreadable": f"a {type(value).__name__}, not a pair (inputs, targets)"}
        results.append(attempt)
    return results


MISTAKES = {
    "counts_last": "positions = min(block_size, len(ids)) counts the last id, which has no next token: "
                   "positions = min(block_size, len(ids) - 1)",
    "ignores_block_size": "the window ignores block_size: a document longer than the context loses the pairs "
                          "past the window (positions = min(block_size, len(ids) - 1))",
    "one_short": "the window is one position short: positions = min(block_size, len(ids) - 1), not one less",
    "not_shifted": "the targets are not shifted: targets[p] must be the next id, ids[p + 1]",
    "swapped": "inputs and targets are swapped: inputs = ids[:positions], targets = ids[1:positions + 1]",
    "from_the_end": "the window takes the last positions of the document; it starts at position 0 (the opening "
                    "BOS)",
}


def windows_problem(result, ids, block_size, facts, hidden=False) -> "str | None":
    """facts: the right [inputs, targets] ("right") and each mistake's of MISTAKES
    ("mistakes", None where it is the right one)."""
    L, p = len(ids), min(block_size, len(ids) - 1)
    said = ("a random document" if hidden else f"len(ids)={L}, block_size={block_size}")
    if "raised" in result:
        return f"{said}: training_windows raised {exception_name(result['raised'])}"
    value = result["value"]
    if isinstance(value, dict):
        return "training_windows should return (inputs, targets), two lists of ids; got something else"
    inputs, targets = value
    for part, name in ((inputs, "inputs"), (targets, "targets")):
        if isinstance(part, dict):
            return f"{name} should be a list of ids, got something else"
    if [inputs, targets] == facts["right"]:
        return None
    for label, text in MISTAKES.items():
        if facts["mistakes"][label] is not None and [inputs, targets] == facts["mistakes"][label]:
            return naming(label, f"{said}: {text}")
    if len(inputs) != len(targets):
        return f"{said}: {len(inputs)} inputs but {len(targets)} targets; every input position has one target"
    if len(inputs) != p:
        return (f"{said}: {len(inputs)} positions, expected min(block_size, len(ids) - 1)"
                + ("" if hidden else f" = {p}"))
    return f"{said}: inputs should be ids[:{p}] and targets ids[1:{p + 1}]" if not hidden else \
        f"{said}: inputs should be ids[:positions] and targets ids[1:positions + 1]"


@check("ana", 2,
       "'ana' = [BOS a n a BOS] with block_size 16 gives 4 scored positions: inputs [BOS a n a], "
       "targets [a n a BOS] (the last target is the closing BOS)",
       probe=probe_windows, inputs={"cases": [[[6, 0, 4, 0, 6], 16]]})
def ana(out, inputs, expected):
    (ids, block_size), = inputs["cases"]
    if problem := windows_problem(out[0], ids, block_size, known_facts(inputs)[0]):
        return f"'ana' = [BOS a n a BOS]: {problem}"
    return None


def _document(length, bos=27, first=100):
    """BOS-framed ids whose inner ids are all distinct, so any shift shows."""
    return [bos] + list(range(first, first + length - 2)) + [bos] if length >= 2 else [bos] * length


POSITION_CASES = [(2, 8), (5, 3), (5, 4), (5, 5), (9, 8), (10, 8), (17, 16), (12, 4), (3, 1)]


@check("positions", 2,
       "positions = min(block_size, len(ids) - 1) from position 0 on, for short and long documents "
       "(a long one loses the pairs past the window)",
       probe=probe_windows,
       inputs={"cases": [[_document(length), block_size] for length, block_size in POSITION_CASES]})
def positions(out, inputs, expected):
    for (ids, block_size), result, facts in zip(inputs["cases"], out, known_facts(inputs)):
        if problem := windows_problem(result, ids, block_size, facts):
            return problem
    return None


# ------------------------------------------------------------------ too short


def probe_windows_short(ns, documents, block_size):
    return [try_call(ns.tokenizer.training_windows, list(ids), block_size) for ids in documents]


@check("too_short", 1, "a document with fewer than 2 ids ([] or [BOS]) raises a ValueError: it has no target",
       probe=probe_windows_short, inputs={"documents": [[6], []], "block_size": 4})
def too_short(out, inputs, expected):
    for ids, result in zip(inputs["documents"], out):
        if "raised" not in result:
            return (f"training_windows({ids}, {inputs['block_size']}) returned {kind_of(result['value'])}: a "
                    f"document with fewer than 2 ids has no (input, target) pair; raise a ValueError")
        if not result["raised"]["value_error"]:
            return (f"training_windows({ids}, {inputs['block_size']}) raised {exception_name(result['raised'])}: a "
                    f"document with fewer than 2 ids should raise a ValueError")
    return None
