"""The hidden checks of the task micro_loss, and the facts its public checks read."""

from __future__ import annotations

import random

from grader.checks._api import check
from grader.checks.ch00_micro.common import SMALL, TOL, all_close, close_enough, off_by
from grader.checks.ch00_micro.hidden.common import random_seed
from grader.checks.ch00_micro.hidden.oracles import loss_facts
from grader.checks.ch00_micro.micro_loss import ana_mean_nll, judge_loss, probe_loss, run_loss, window
from grader.checks.facts import facts_for


@facts_for(window, ana_mean_nll)
def public_loss_facts(ref, inputs):
    logits = run_loss(ref.micro, inputs["sizes"], inputs["seed"], inputs.get("spread"), inputs["ids"])["logits"]
    return {**loss_facts(logits, inputs["ids"], True), "logits": logits}


def _expect_loss(ref, inputs):
    return run_loss(ref.micro, inputs["sizes"], inputs["seed"], inputs.get("spread"), inputs["ids"])


def _random_loss(g):
    seed = random_seed(g)
    rng = random.Random(seed)
    n = rng.randint(2, 9)  # SMALL has block_size 6: some documents are longer than the window
    return {"sizes": dict(SMALL), "seed": seed, "spread": 0.4,
            "ids": [6] + [rng.randrange(6) for _ in range(n)] + [6]}


@check("matches_reference", 2,
       "random documents (some longer than the window): loss and every parameter gradient match the reference",
       probe=probe_loss, inputs=_random_loss, expect=_expect_loss, hidden=True)
def matches_reference(out, inputs, expected):
    if problem := judge_loss(out, inputs, False, lambda out: loss_facts(out["logits"], inputs["ids"], False)):
        return problem
    if not close_enough(out["loss"], expected["loss"], TOL):
        return "the loss does not match the reference"
    if not all_close(out["grads"], expected["grads"], 1e-8):
        return (f"the parameter gradients of the loss are off by up to {off_by(out['grads'], expected['grads']):.3g}: "
                f"keep every step of the loss in the graph")
    return None
