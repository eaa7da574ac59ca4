"""The hidden checks of the task micro_adam, and the facts its public checks read."""

from __future__ import annotations

import random

from grader.checks._api import check
from grader.checks.ch00_micro.hidden.common import random_seed
from grader.checks.ch00_micro.hidden.oracles import adam_facts
from grader.checks.ch00_micro.micro_adam import hand_computation, judge_adam, probe_adam
from grader.checks.facts import facts_for


@facts_for(hand_computation)
def public_adam_facts(ref, inputs):
    return adam_facts(inputs["start"], inputs["grads"], inputs["settings"])


def _random_adam(g):
    seed = random_seed(g)
    rng = random.Random(seed)
    n, steps = rng.randint(2, 5), rng.randint(2, 4)
    scale = [10 ** rng.uniform(-3, 1.5) for _ in range(n)]
    return {"start": [rng.gauss(0, 1) for _ in range(n)],
            "grads": [[rng.gauss(0, s) for s in scale] for _ in range(steps)],
            "settings": {"lr": rng.uniform(0.005, 0.1), "beta1": rng.uniform(0.8, 0.95),
                         "beta2": rng.uniform(0.95, 0.999), "eps": 1e-8, "total_steps": steps + rng.randint(1, 5)}}


@check("random_steps", 2, "random parameters, gradients and settings: every step equals the hand computation",
       probe=probe_adam, inputs=_random_adam, hidden=True)
def random_steps(out, inputs, expected):
    return judge_adam(out, inputs, False, adam_facts(inputs["start"], inputs["grads"], inputs["settings"]))
