"""The hidden checks of the task micro_block, and the facts its public checks read."""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.ch00_micro.common import SMALL, TOL, all_close, shape_of, tables_fingerprint
from grader.checks.ch00_micro.hidden.common import random_seed
from grader.checks.ch00_micro.hidden.oracles import block_facts, rms_of
from grader.checks.ch00_micro.micro_block import (
    block_inputs, block_raised, formula, judge_block, probe_block, run_block, zero_branch_identity,
)
from grader.checks.facts import facts_for


@facts_for(zero_branch_identity)
def zero_branch_facts(ref, inputs):
    """What the known wrong layer gives with both branches zero: RMSNorm of each input."""
    return {"rms": [rms_of(x) for x in inputs["xs"]]}


@facts_for(formula)
def block_formula_facts(ref, inputs):
    tables = run_block(ref.micro, inputs["sizes"], inputs["seed"], inputs["spread"], inputs["xs"], ())["tables"]
    return {**block_facts(tables, inputs["sizes"], inputs["xs"]), "tables": tables_fingerprint(tables)}


def _expect_block(ref, inputs):
    return run_block(ref.micro, inputs["sizes"], inputs["seed"], inputs["spread"], inputs["xs"], ())


def _random_block(g):
    seed = random_seed(g)
    sizes = dict(SMALL, n_head=[1, 2, 4][seed % 3])
    return block_inputs(seed, 2 + seed % 4, spread=0.3 + (seed % 5) / 10, sizes=sizes)


@check("matches_reference", 2, "random weights, inputs and head counts: outputs and attention rows match the reference",
       probe=probe_block, inputs=_random_block, expect=_expect_block, hidden=True)
def matches_reference(out, inputs, expected):
    if problem := block_raised(out):
        return problem
    if shape_of(out["y"]) == shape_of(expected["y"]) and all_close(out["y"], expected["y"], TOL) \
            and all_close(out["rows"], expected["rows"], TOL) and out["cache"] == expected["cache"]:
        return None
    facts = block_facts(expected["tables"], inputs["sizes"], inputs["xs"])
    return judge_block(out, inputs, facts, False) or "the layer does not match the reference"
