"""Merging the heads [B, h, T, d_h] back into [B, T, d].

Head i's features go back to the contiguous positions i*d_h .. (i+1)*d_h - 1; the checks
feed numbered features, so a merge that interleaves the heads, or regroups the axes
without moving them, is named, and merge_heads must undo split_heads exactly. The right
layout of the numbered features, and the wrong ones, are data the kit computed
(grader/checks/facts.py; hidden.py).
"""

from __future__ import annotations

import torch

from grader.checks._api import Task, check, compare, first_diagnosis, matches, named, shape_problem
from grader.checks.ch04_attention.common import WALK_THROUGH, WIDE, new_attention
from grader.checks.facts import known_facts

TASKS = [
    Task("merge_heads", "model", "CausalSelfAttention.merge_heads", "merging the heads back"),
]


# Each mistake by name; what it outputs is computed under the same name (hidden.py).
MISTAKES = {
    "heads_axis_not_moved": "merge_heads reshapes [B, h, T, d_h] straight to [B, T, d] without moving the heads "
                            "axis back: transpose h and T first (transpose(1, 2)), then reshape",
    "interleaved": "the heads' features are interleaved (feature j of head i lands at j*h + i); head i's features "
                   "belong together at i*d_h .. (i+1)*d_h - 1",
}


def probe_merge(ns, y, sizes):
    module = new_attention(ns, sizes).double()
    return {"x": module.merge_heads(y.clone())}


@check("shape", 1, "B=2, h=2, T=3, d_h=2: merge_heads gives [2, 3, 4] = [B, T, d]", task="merge_heads",
       probe=probe_merge,
       inputs=lambda g: {"y": torch.randn(2, 2, 3, 2, generator=g, dtype=torch.float64), "sizes": WALK_THROUGH})
def shape(out, inputs, expected):
    B, h, T, dh = inputs["y"].shape
    return shape_problem(out["x"], (B, T, h * dh), "merge_heads(y)")


@check("head_features", 2, "head i's features land at i*d_h .. (i+1)*d_h - 1 of each position (d=12, h=3)",
       task="merge_heads", probe=probe_merge,
       inputs=lambda g: {"y": torch.arange(2 * 3 * 5 * 4, dtype=torch.float64).reshape(2, 3, 5, 4), "sizes": WIDE})
def head_features(out, inputs, expected):
    return merge_problem(out, inputs, known_facts(inputs))


def merge_problem(out, inputs, facts):
    """facts: {"right": the merged heads, "mistakes": what each of MISTAKES gives} on inputs["y"]."""
    if problem := shape(out, inputs, None):
        return problem
    right = facts["right"]
    if matches(out["x"], right, atol=0, rtol=0):
        return None
    known = first_diagnosis(out["x"], named(MISTAKES, facts["mistakes"]), atol=0, rtol=0)
    return known or (compare(out["x"], right, "merge_heads(y)", atol=0, rtol=0)
                     + ": head i's d_h features go to positions i*d_h .. (i+1)*d_h - 1")


def probe_merge_inverse(ns, x, sizes):
    module = new_attention(ns, sizes).double()
    heads = module.split_heads(x.clone())
    split = heads.clone() if isinstance(heads, torch.Tensor) else heads
    return {"round_trip": module.merge_heads(heads), "again": module.split_heads(module.merge_heads(heads.clone())),
            "heads": split}


@check("inverse_of_split", 1, "merge_heads(split_heads(x)) == x and split_heads(merge_heads(y)) == y",
       task="merge_heads", probe=probe_merge_inverse,
       inputs=lambda g: {"x": torch.randn(2, 5, 12, generator=g, dtype=torch.float64), "sizes": WIDE})
def inverse_of_split(out, inputs, expected):
    x = inputs["x"]
    if problem := shape_problem(out["round_trip"], x.shape, "merge_heads(split_heads(x))"):
        return problem
    if not torch.equal(out["round_trip"], x):
        return ("merge_heads(split_heads(x)) is not x: merge_heads must undo split_heads exactly "
                "(transpose h and T back, then reshape to [B, T, d])")
    if not torch.equal(out["again"], out["heads"]):
        return "split_heads(merge_heads(y)) is not y: merge_heads must be the exact inverse of split_heads"
    return None
