"""The hidden checks of grader/checks/ch05_block/feedforward/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.ch05_block.feedforward import feedforward_problem, probe_feedforward
from grader.checks.ch05_block.hidden.oracles import feedforward_facts
from grader.checks.facts import facts_for


@facts_for("ch05.feedforward.example_1")
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
def judge_feedforward_matches_reference(out, inputs, expected):
    """The public judge_feedforward, for the hidden check above."""
    return feedforward_problem(out, feedforward_facts(inputs["x"], inputs["state"]))
