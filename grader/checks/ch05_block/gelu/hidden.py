"""The hidden checks of grader/checks/ch05_block/gelu/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.ch05_block.gelu import gelu_problem, probe_gelu
from grader.checks.ch05_block.hidden.oracles import gelu_mistakes
from grader.checks.facts import facts_for


@facts_for("ch05.gelu.exact_values")
def public_gelu_facts(ref, inputs):
    return {"mistakes": gelu_mistakes(inputs["x"])}


@check("matches_reference", 2, "random tensors of any shape match the reference",
       probe=probe_gelu, inputs=lambda g: {"x": torch.randn(3, 4, 5, generator=g, dtype=torch.float64) * 2},
       hidden=True)
def judge_gelu_matches_reference(out, inputs, expected):
    """The public judge_gelu_values, for the hidden check above."""
    return gelu_problem(out, inputs, gelu_mistakes(inputs["x"]))
