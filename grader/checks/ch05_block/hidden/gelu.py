"""The hidden checks of grader/checks/ch05_block/gelu.py."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.ch05_block.gelu import judge_gelu_values, probe_gelu


@check("matches_reference", 2, "random tensors of any shape match the reference",
       probe=probe_gelu, inputs=lambda g: {"x": torch.randn(3, 4, 5, generator=g, dtype=torch.float64) * 2},
       hidden=True)
def judge_gelu_matches_reference(out, inputs, expected):
    """The public judge_gelu_values, for the hidden check above."""
    return judge_gelu_values(out, inputs, expected)
