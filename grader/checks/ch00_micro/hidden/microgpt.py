"""The hidden checks of grader/checks/ch00_micro/microgpt.py."""

from __future__ import annotations

import random

from grader.checks._api import check
from grader.checks.ch00_micro.common import NAMES, SMALL, TOL, all_close, shape_of, tables_fingerprint
from grader.checks.ch00_micro.hidden.common import random_seed
from grader.checks.ch00_micro.hidden.oracles import block_facts, forward_facts, rms_of
from grader.checks.ch00_micro.microgpt import (
    block_inputs, block_raised, judge_block, judge_forward, run_block, run_forward, probe_block,
    probe_forward,
)
from grader.checks.facts import facts_for


@facts_for("ch00.micro_block.zero_branch_identity")
def zero_branch_facts(ref, inputs):
    """What the known wrong layer gives with both branches zero: RMSNorm of each input."""
    return {"rms": [rms_of(x) for x in inputs["xs"]]}


@facts_for("ch00.micro_block.formula")
def block_formula_facts(ref, inputs):
    tables = run_block(ref.micro, inputs["sizes"], inputs["seed"], inputs["spread"], inputs["xs"], ())["tables"]
    return {**block_facts(tables, inputs["sizes"], inputs["xs"]), "tables": tables_fingerprint(tables)}


@facts_for("ch00.micro_forward.formula")
def forward_formula_facts(ref, inputs):
    tables = run_forward(ref.micro, inputs["sizes"], inputs["seed"], inputs.get("spread"), inputs["ids"])["tables"]
    return {**forward_facts(tables, inputs["sizes"], inputs["ids"]), "tables": tables_fingerprint(tables)}


def _expect_block(ref, inputs):
    return run_block(ref.micro, inputs["sizes"], inputs["seed"], inputs["spread"], inputs["xs"], ())


def _random_block(g):
    seed = random_seed(g)
    sizes = dict(SMALL, n_head=[1, 2, 4][seed % 3])
    return block_inputs(seed, 2 + seed % 4, spread=0.3 + (seed % 5) / 10, sizes=sizes)


@check("matches_reference", 2, "random weights, inputs and head counts: outputs and attention rows match the reference",
       task="micro_block", probe=probe_block, inputs=_random_block, expect=_expect_block, hidden=True)
def judge_block_hidden(out, inputs, expected):
    if problem := block_raised(out):
        return problem
    if shape_of(out["y"]) == shape_of(expected["y"]) and all_close(out["y"], expected["y"], TOL) \
            and all_close(out["rows"], expected["rows"], TOL) and out["cache"] == expected["cache"]:
        return None
    facts = block_facts(expected["tables"], inputs["sizes"], inputs["xs"])
    return judge_block(out, inputs, facts, False) or "the layer does not match the reference"


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
       task="micro_forward", probe=probe_forward, inputs=_random_forward, expect=_expect_forward, hidden=True)
def judge_forward_hidden(out, inputs, expected):
    if all_close(out["logits"], expected["logits"], TOL) and all_close(out["rows"], expected["rows"], TOL):
        return None
    return judge_forward(out, inputs, forward_facts(expected["tables"], inputs["sizes"], inputs["ids"]), False) or \
        "the attention rows kept by the layers do not match the reference"
