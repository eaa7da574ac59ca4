"""The hidden checks of grader/checks/ch05_block/feedforward/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check, exact_gelu, tanh_gelu
from grader.checks.ch05_block.feedforward import MISTAKES, example_1, feedforward_problem, probe_feedforward
from grader.checks.facts import facts_for


def feedforward_facts(x, state):
    """The right output ("right") and each classic mistake's (MISTAKES) by its name ("mistakes")."""
    w1, b1, w2, b2 = state["fc1.weight"], state["fc1.bias"], state["fc2.weight"], state["fc2.bias"]
    pre = x @ w1.T + b1
    outputs = {"no_nonlinearity": pre @ w2.T + b2, "relu": torch.relu(pre) @ w2.T + b2,
               "tanh": tanh_gelu(pre) @ w2.T + b2, "no_b2": exact_gelu(pre) @ w2.T,
               "no_b1": exact_gelu(x @ w1.T) @ w2.T + b2}
    assert outputs.keys() == MISTAKES.keys(), "a feed-forward mistake has a sentence but no output"
    return {"right": exact_gelu(pre) @ w2.T + b2, "mistakes": outputs}


@facts_for(example_1)
def example_facts(ref, inputs):
    return feedforward_facts(inputs["x"], inputs["state"])


def _random_feedforward_inputs(g):
    d, f = 4, 8
    return {"x": torch.randn(2, 3, d, generator=g, dtype=torch.float64),
            "state": {"fc1.weight": torch.randn(f, d, generator=g, dtype=torch.float64) * 0.7,
                      "fc1.bias": torch.randn(f, generator=g, dtype=torch.float64) * 0.5,
                      "fc2.weight": torch.randn(d, f, generator=g, dtype=torch.float64) * 0.7,
                      "fc2.bias": torch.randn(d, generator=g, dtype=torch.float64) * 0.5},
            "sizes": {"d_model": d, "d_ff": f}}


@check("matches_reference", 3, "random weights and inputs give fc2(gelu(fc1(x)))",
       probe=probe_feedforward, inputs=_random_feedforward_inputs, hidden=True)
def matches_reference(out, inputs, expected):
    """The public judge_feedforward, for the hidden check above."""
    return feedforward_problem(out, feedforward_facts(inputs["x"], inputs["state"]))
