"""Chapter 05's formulas written out in plain torch, the kit's own: LayerNorm (with a
switch for each classic mistake) and the block's parameter count. The tasks' hidden.py
compute their checks' answers and their mistakes' outputs with them; on the public
checks' fixed inputs the kit writes what those give into facts.json
(grader/generate/facts.py), and chapter 06's kit code builds its forwards with this
LayerNorm.
"""

from __future__ import annotations

import math

import torch

from grader.checks.course import EPS


def layer_norm(x, gamma, beta, eps=EPS, divisor_offset=0, dims=(-1,), eps_outside=False):
    """LayerNorm over `dims`; the keyword arguments reproduce the classic mistakes
    (d - 1 divisor, eps outside the root, statistics over the wrong axes)."""
    mean = x.mean(dim=dims, keepdim=True)
    centred = x - mean
    count = math.prod(x.shape[d] for d in dims)
    variance = (centred * centred).sum(dim=dims, keepdim=True) / (count - divisor_offset)
    scale = torch.sqrt(variance) + eps if eps_outside else torch.sqrt(variance + eps)
    return centred / scale * gamma + beta


def block_parameters(d: int, f: int) -> int:
    """One pre-LN block: Q/K/V/O 4d², the feed-forward 2df + f + d, two LayerNorms 4d."""
    return 4 * d * d + 2 * d * f + f + 5 * d


def model_parameters(sizes: dict) -> int:
    V, C, N, d, f = (sizes[k] for k in ("vocab_size", "block_size", "n_layers", "d_model", "d_ff"))
    return 2 * V * d + C * d + N * block_parameters(d, f) + 2 * d
