"""The hidden checks of the task micro_forward, and the facts its public checks read."""

from __future__ import annotations

import random

from grader.checks._api import check
from grader.checks.ch00_micro.common import NAMES, TOL, all_close, tables_fingerprint
from grader.checks.ch00_micro.hidden.common import random_seed
from grader.checks.ch00_micro.hidden.oracles import forward_facts
from grader.checks.ch00_micro.micro_forward import formula, judge_forward, probe_forward, run_forward
from grader.checks.facts import facts_for


@facts_for(formula)
def forward_formula_facts(ref, inputs):
    tables = run_forward(ref.micro, inputs["sizes"], inputs["seed"], inputs.get("spread"), inputs["ids"])["tables"]
    return {**forward_facts(tables, inputs["sizes"], inputs["ids"]), "tables": tables_fingerprint(tables)}


def _expect_forward(ref, inputs):
    return run_forward(ref.micro, inputs["sizes"], inputs["seed"], inputs.get("spread"), inputs["ids"])


def _random_forward(g):
    seed = random_seed(g)
    rng = random.Random(seed)
    sizes = dict(NAMES, n_layer=1 + seed % 2)
    n = rng.randint(2, 6)
    return {"sizes": sizes, "seed": seed, "spread": 0.3, "ids": [26] + [rng.randrange(27) for _ in range(n - 1)]}


@check("matches_reference", 2,
       "the names-sized model, 1 or 2 layers, random ids: logits and attention rows match the reference",
       probe=probe_forward, inputs=_random_forward, expect=_expect_forward, hidden=True)
def matches_reference(out, inputs, expected):
    if all_close(out["logits"], expected["logits"], TOL) and all_close(out["rows"], expected["rows"], TOL):
        return None
    return judge_forward(out, inputs, forward_facts(expected["tables"], inputs["sizes"], inputs["ids"]), False) or \
        "the attention rows kept by the layers do not match the reference"
