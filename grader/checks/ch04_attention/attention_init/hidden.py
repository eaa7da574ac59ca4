"""The hidden checks of grader/checks/ch04_attention/attention_init/__init__.py."""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.ch04_attention.attention_init import judge_projections, probe_projections


@check("parameter_ledger_wide", 1, "d=64: 4d² = 16,384 parameters, for h=4 and for h=8 alike",
       probe=probe_projections, inputs=lambda g: {"sizes": {"d_model": 64, "n_heads": 4}, "more_heads": 8}, hidden=True)
def judge_projections_wide(out, inputs, expected):
    """The public judge_projections, for the hidden check above."""
    return judge_projections(out, inputs, expected)
