"""The hidden checks of grader/checks/ch00_micro/rmsnorm_softmax.py."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.ch00_micro.hidden.common import uniform
from grader.checks.ch00_micro.hidden.oracles import rmsnorm_facts, softmax_facts
from grader.checks.ch00_micro.rmsnorm_softmax import judge_rmsnorm, judge_softmax, probe_rmsnorm, probe_softmax
from grader.checks.facts import facts_for


@facts_for("ch00.micro_rmsnorm.figure", "ch00.micro_rmsnorm.zero_vector", "ch00.micro_rmsnorm.gradient")
def public_rmsnorm_facts(ref, inputs):
    return rmsnorm_facts(inputs["x"], inputs.get("w"))


@facts_for("ch00.micro_softmax.stable", "ch00.micro_softmax.gradient")
def public_softmax_facts(ref, inputs):
    return softmax_facts(inputs["logits"], inputs.get("w"))


def _random_rmsnorm(g):
    n = 3 + int(torch.randint(0, 6, (1,), generator=g))
    return {"x": (torch.randn(n, generator=g, dtype=torch.float64) * 2).tolist(),
            "w": torch.randn(n, generator=g, dtype=torch.float64).tolist()}


@check("random_vectors", 1, "random vectors: values and gradients exact", task="micro_rmsnorm",
       probe=probe_rmsnorm, inputs=_random_rmsnorm, hidden=True)
def judge_rmsnorm_hidden(out, inputs, expected):
    return judge_rmsnorm(out, inputs["x"], inputs.get("w"), False, rmsnorm_facts(inputs["x"], inputs.get("w")))


def _random_softmax(g):
    n = 2 + int(torch.randint(0, 7, (1,), generator=g))
    shift = uniform(g, -800, 800)
    return {"logits": [shift + v for v in (torch.randn(n, generator=g, dtype=torch.float64) * 3).tolist()],
            "w": torch.randn(n, generator=g, dtype=torch.float64).tolist()}


@check("random_logits", 1, "random logits, shifted by up to ±800: values and gradients exact", task="micro_softmax",
       probe=probe_softmax, inputs=_random_softmax, hidden=True)
def judge_softmax_hidden(out, inputs, expected):
    return judge_softmax(out, inputs["logits"], inputs.get("w"), False,
                         softmax_facts(inputs["logits"], inputs.get("w")))
