"""The hidden checks of grader/checks/ch05_block/block_init.py."""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.course import PUBLISHED
from grader.checks.ch05_block.block_init import judge_block_parts, probe_block_parts


@check("parameter_ledger_wide", 1, "the ledger holds for d=64, h=4, f=256 (49,728 per block)",
       probe=probe_block_parts,
       inputs=lambda g: {"sizes": {name: PUBLISHED[name] for name in ("d_model", "n_heads", "d_ff")}}, hidden=True)
def judge_block_parts_wide(out, inputs, expected):
    """The public judge_block_parts, for the hidden check above."""
    return judge_block_parts(out, inputs, expected)
