"""The hidden checks of grader/checks/ch05_block/gelu/__init__.py."""

from __future__ import annotations

import math

import torch

from grader.checks._api import check, tanh_gelu
from grader.checks.ch05_block.gelu import MISTAKES, exact_values, gelu_problem, probe_gelu
from grader.checks.facts import facts_for


def gelu_mistakes(x):
    """{name: output} of each classic mistake (MISTAKES) on x."""
    outputs = {"tanh": tanh_gelu(x), "relu": torch.relu(x), "sigmoid": x * torch.sigmoid(1.702 * x), "identity": x,
               "phi_alone": 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))}
    assert outputs.keys() == MISTAKES.keys(), "a GELU mistake has a sentence but no output"
    return outputs


@facts_for(exact_values)
def public_gelu_facts(ref, inputs):
    return {"mistakes": gelu_mistakes(inputs["x"])}


@check("matches_reference", 2, "random tensors of any shape match the reference",
       probe=probe_gelu, inputs=lambda g: {"x": torch.randn(3, 4, 5, generator=g, dtype=torch.float64) * 2},
       hidden=True)
def matches_reference(out, inputs, expected):
    """The public exact_values, for the hidden check above."""
    return gelu_problem(out, inputs, gelu_mistakes(inputs["x"]))
