"""The hidden checks of grader/checks/ch05_block/block_init/__init__.py."""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.course import PUBLISHED
from grader.checks.ch05_block.block_init import block_parts_problem, probe_block_parts
from grader.checks.ch05_block.hidden.oracles import block_parameters
from grader.checks.facts import facts_for


@facts_for("ch05.block_init.parameter_ledger")
def ledger_facts(ref, inputs):
    return {"ledger": block_parameters(inputs["sizes"]["d_model"], inputs["sizes"]["d_ff"])}


@check("parameter_ledger_wide", 1, "the ledger holds for d=64, h=4, f=256 (49,728 per block)",
       probe=probe_block_parts,
       inputs=lambda g: {"sizes": {name: PUBLISHED[name] for name in ("d_model", "n_heads", "d_ff")}}, hidden=True)
def judge_block_parts_wide(out, inputs, expected):
    """The public judge_block_parts, for the hidden check above."""
    sizes = inputs["sizes"]
    return block_parts_problem(out, inputs, block_parameters(sizes["d_model"], sizes["d_ff"]))
