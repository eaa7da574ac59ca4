"""Chapter 04's head layout written out in plain torch, the kit's own: the heads of x and
their merge. The tasks' hidden.py judge with them and compute with them what the classic
wrong splits, merges and attention formulas give; on the public checks' fixed inputs the
kit writes what those give into facts.json (grader/generate/facts.py).
"""

from __future__ import annotations


def heads_of(x, h):
    """[B, T, d] -> [B, h, T, d_h], head i owning features i*d_h .. (i+1)*d_h - 1."""
    B, T, d = x.shape
    return x.reshape(B, T, h, d // h).transpose(1, 2)


def merged(y):
    """[B, h, T, d_h] -> [B, T, d], the inverse of heads_of."""
    B, h, T, dh = y.shape
    return y.transpose(1, 2).reshape(B, T, h * dh)
