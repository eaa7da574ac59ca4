"""The hidden checks of grader/checks/ch01_tokens/windows/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check, hidden
from grader.checks.ch01_tokens.windows import MISTAKES, ana, positions, probe_windows, windows_problem
from grader.checks.facts import facts_for


def window_facts(ids, block_size):
    """The right (inputs, targets) of a document, and each classic mistake's (None where
    it is the right one)."""
    L = len(ids)
    p = min(block_size, L - 1)
    wrong = {
        "counts_last": [ids[: min(block_size, L)], ids[1 : min(block_size, L) + 1]],
        "ignores_block_size": [ids[: L - 1], ids[1:]],
        "one_short": [ids[: p - 1], ids[1:p]],
        "not_shifted": [ids[:p], ids[:p]],
        "swapped": [ids[1 : p + 1], ids[:p]],
        "from_the_end": [ids[L - 1 - p : L - 1], ids[L - p :]],
    }
    assert wrong.keys() == MISTAKES.keys(), "a windows mistake has a sentence but no output"
    right = [ids[:p], ids[1 : p + 1]]
    return {"right": right, "mistakes": {label: None if wrong[label] == right else wrong[label]
                                         for label in MISTAKES}}


@facts_for(ana, positions)
def public_window_facts(ref, inputs):
    return [window_facts(ids, block_size) for ids, block_size in inputs["cases"]]


# ------------------------------------------------------------------ reference


def _random_windows_inputs(g):
    cases = []
    for _ in range(8):
        length = int(torch.randint(2, 40, (1,), generator=g))
        block_size = int(torch.randint(1, 24, (1,), generator=g))
        ids = torch.randint(0, 30, (length,), generator=g).tolist()
        cases.append([ids, block_size])
    return {"cases": cases}


def _expect_windows(ref, inputs):
    return [[list(part) for part in ref.tokenizer.training_windows(list(ids), bs)] for ids, bs in inputs["cases"]]


@check("matches_reference", 2, "random documents and block sizes give the reference windows",
       probe=probe_windows, inputs=_random_windows_inputs, expect=_expect_windows, hidden=True)
def matches_reference(out, inputs, expected):
    for number, ((ids, block_size), result, right) in enumerate(zip(inputs["cases"], out, expected)):
        if problem := windows_problem(result, ids, block_size, window_facts(ids, block_size), hidden=True):
            return f"{hidden(f'random document {number + 1}: ', '')}{problem}"
        if result["value"] != right:
            return f"{hidden(f'random document {number + 1}: ', '')}the windows differ from the reference"
    return None
