"""The hidden checks of the task micro_softmax, and the facts its public checks read."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.ch00_micro.hidden.common import uniform
from grader.checks.ch00_micro.hidden.oracles import softmax_facts
from grader.checks.ch00_micro.micro_softmax import gradient, judge_softmax, probe_softmax, stable
from grader.checks.facts import facts_for


@facts_for(stable, gradient)
def public_softmax_facts(ref, inputs):
    return softmax_facts(inputs["logits"], inputs.get("w"))


def _random_softmax(g):
    n = 2 + int(torch.randint(0, 7, (1,), generator=g))
    shift = uniform(g, -800, 800)
    return {"logits": [shift + v for v in (torch.randn(n, generator=g, dtype=torch.float64) * 3).tolist()],
            "w": torch.randn(n, generator=g, dtype=torch.float64).tolist()}


@check("random_logits", 1, "random logits, shifted by up to ±800: values and gradients exact",
       probe=probe_softmax, inputs=_random_softmax, hidden=True)
def random_logits(out, inputs, expected):
    return judge_softmax(out, inputs["logits"], inputs.get("w"), False,
                         softmax_facts(inputs["logits"], inputs.get("w")))
