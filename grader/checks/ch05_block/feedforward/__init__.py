"""The feed-forward network, fc2(gelu(fc1(x))).

Example 1 of the lesson (W1 = I, W2 = ½I, zero biases) pins the published increment;
random weights pin the formula, and the classic mistakes (no nonlinearity, ReLU, the
tanh GELU, a missing bias) are named: on Example 1 what each outputs is data the kit
computed (grader/checks/facts.py). torch's GELU scores 'forbidden' here too.
"""

from __future__ import annotations

import math

import torch

from grader.checks._api import (
    GELU_KERNELS, NORMAL_CDF, Task, check, diagnose, matches, named, torch_library_except,
)
from grader.checks.ch05_block.common import SIZES
from grader.checks.course import config, load_state
from grader.checks.facts import known_facts

TASKS = [
    Task("feedforward", "model", "FeedForward.forward", "the feed-forward network",
         forbidden=("torch.nn.functional.gelu", "torch.nn.GELU"),
         forbidden_ops=GELU_KERNELS + torch_library_except(NORMAL_CDF), takes=(("x", 3),)),
]


def probe_feedforward(ns, x, state, sizes):
    ffn = load_state(ns.model.FeedForward(config(ns, SIZES, **sizes)), state)
    return {"y": ffn(x.clone())}


def _example_feedforward_inputs():
    a = 1 / math.sqrt(1.00001)
    return {"x": torch.tensor([[[-a, a]]], dtype=torch.float64),
            "state": {"fc1.weight": torch.eye(2, dtype=torch.float64), "fc1.bias": torch.zeros(2, dtype=torch.float64),
                      "fc2.weight": 0.5 * torch.eye(2, dtype=torch.float64), "fc2.bias": torch.zeros(2, dtype=torch.float64)},
            "sizes": {"d_model": 2, "n_heads": 1, "d_ff": 2}}


# Each mistake by name; what it outputs is computed under the same name (hidden.py).
MISTAKES = {
    "no_nonlinearity": "there is no nonlinearity between the two linear layers: apply gelu to x W1 + b1",
    "relu": "ReLU is used where the exact GELU belongs",
    "tanh": "the tanh approximation of GELU is used; use the exact erf form",
    "no_b2": "the second bias b2 is missing",
    "no_b1": "the first bias b1 is missing",
}


def feedforward_problem(out, facts):
    """facts: the right output ("right") and each mistake's by its MISTAKES name
    ("mistakes", {name: output})."""
    return diagnose(out["y"], facts["right"], named(MISTAKES, facts["mistakes"]),
                    "the feed-forward output", rtol=1e-7)


@check("example_1", 2, "Example 1 (W1 = I, W2 = ½I) gives the increment (-0.0793278, 0.4206696)",
       probe=probe_feedforward, inputs=lambda g: _example_feedforward_inputs())
def example_1(out, inputs, expected):
    figure = torch.tensor([[[-0.0793278, 0.4206696]]], dtype=torch.float64)
    if problem := feedforward_problem(out, known_facts(inputs)):
        return f"Example 1 should give the increment (-0.0793278, 0.4206696): {problem}"
    if not matches(out["y"], figure, atol=5e-7, rtol=0):
        return "Example 1 should give the increment (-0.0793278, 0.4206696)"
    return None
