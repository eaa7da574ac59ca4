"""The hidden checks of grader/checks/ch04_attention/attention_init/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.ch04_attention.attention_init import projections, probe_projections


def drawn_sizes(g):
    """A width drawn for each grading: h = 2 or 4 heads, and d a multiple of 2h up to 96, so
    that twice as many heads divide it too."""
    heads = 2 * (1 + int(torch.randint(2, (1,), generator=g)))
    d = 2 * heads * int(torch.randint(2, 13 if heads == 2 else 7, (1,), generator=g))
    return {"sizes": {"d_model": d, "n_heads": heads}, "more_heads": 2 * heads}


@check("parameter_ledger_wide", 1, "a width drawn for each grading: 4d² parameters, for h heads and for 2h alike",
       probe=probe_projections, inputs=drawn_sizes, hidden=True)
def parameter_ledger_wide(out, inputs, expected):
    """The public projections, for the hidden check above."""
    return projections(out, inputs, expected)
