"""The hidden checks of grader/checks/ch01_tokens/windows/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.ch01_tokens.hidden.common import window_facts
from grader.checks.ch01_tokens.windows import windows_problem, probe_windows
from grader.checks.facts import facts_for


@facts_for("ch01.windows.ana", "ch01.windows.positions")
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
def judge_windows_reference(out, inputs, expected):
    for number, ((ids, block_size), result, right) in enumerate(zip(inputs["cases"], out, expected)):
        if problem := windows_problem(result, ids, block_size, window_facts(ids, block_size), hidden=True):
            return f"random document {number + 1}: {problem}"
        if result["value"] != right:
            return f"random document {number + 1}: the windows differ from the reference"
    return None
