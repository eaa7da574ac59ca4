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
    GELU_KERNELS, NORMAL_CDF, Task, check, compare, first_diagnosis, matches, torch_library_except,
)
from grader.checks.ch05_block.common import SIZES
from grader.checks.course import config, load_state
from grader.checks.facts import known_facts

TASKS = [
    Task("feedforward", "model", "FeedForward.forward", "the feed-forward network",
         forbidden=("torch.nn.functional.gelu", "torch.nn.GELU"),
         forbidden_ops=GELU_KERNELS + torch_library_except(NORMAL_CDF)),
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


FEEDFORWARD_MISTAKES = [
    "there is no nonlinearity between the two linear layers: apply gelu to x W1 + b1",
    "ReLU is used where the exact GELU belongs",
    "the tanh approximation of GELU is used; use the exact erf form",
    "the second bias b2 is missing",
    "the first bias b1 is missing",
]


def feedforward_problem(out, facts):
    """facts: the right output ("right") and each mistake's of FEEDFORWARD_MISTAKES
    ("mistakes", [(text, output)])."""
    right = facts["right"]
    if compare(out["y"], right, atol=1e-9, rtol=1e-7) is None:
        return None
    named = first_diagnosis(out["y"], facts["mistakes"], atol=1e-7, rtol=1e-6)
    return named or compare(out["y"], right, "the feed-forward output", atol=1e-9, rtol=1e-7)


@check("example_1", 2, "Example 1 (W1 = I, W2 = ½I) gives the increment (-0.0793278, 0.4206696)",
       probe=probe_feedforward, inputs=lambda g: _example_feedforward_inputs())
def judge_feedforward_example(out, inputs, expected):
    figure = torch.tensor([[[-0.0793278, 0.4206696]]], dtype=torch.float64)
    if problem := feedforward_problem(out, known_facts(inputs)):
        return f"Example 1 should give the increment (-0.0793278, 0.4206696): {problem}"
    if not matches(out["y"], figure, atol=5e-7, rtol=0):
        return "Example 1 should give the increment (-0.0793278, 0.4206696)"
    return None
