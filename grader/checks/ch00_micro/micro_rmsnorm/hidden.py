"""The hidden checks of the task micro_rmsnorm, and the facts its public checks read."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.ch00_micro.hidden.oracles import rmsnorm_facts
from grader.checks.ch00_micro.micro_rmsnorm import figure, gradient, judge_rmsnorm, probe_rmsnorm, zero_vector
from grader.checks.facts import facts_for


@facts_for(figure, zero_vector, gradient)
def public_rmsnorm_facts(ref, inputs):
    return rmsnorm_facts(inputs["x"], inputs.get("w"))


def _random_rmsnorm(g):
    n = 3 + int(torch.randint(0, 6, (1,), generator=g))
    return {"x": (torch.randn(n, generator=g, dtype=torch.float64) * 2).tolist(),
            "w": torch.randn(n, generator=g, dtype=torch.float64).tolist()}


@check("random_vectors", 1, "random vectors: values and gradients exact",
       probe=probe_rmsnorm, inputs=_random_rmsnorm, hidden=True)
def random_vectors(out, inputs, expected):
    return judge_rmsnorm(out, inputs["x"], inputs.get("w"), False, rmsnorm_facts(inputs["x"], inputs.get("w")))
