"""Splitting [B, T, d] into h heads [B, h, T, d_h] and merging them back.

Head i owns the contiguous features i*d_h .. (i+1)*d_h - 1 of every position; the
checks feed numbered features, so a head that takes every h-th feature, or axes
regrouped without being moved, is named, and merge_heads must undo split_heads exactly.
"""

from __future__ import annotations

import torch

from grader.checks._api import Task, check, compare, first_diagnosis, matches, shape_problem
from grader.checks.ch04_attention.common import WALK_THROUGH, WIDE, heads_of, merged, new_attention

TASKS = [
    Task("split_heads", "model", "CausalSelfAttention.split_heads", "splitting [B, T, d] into heads"),
    Task("merge_heads", "model", "CausalSelfAttention.merge_heads", "merging the heads back"),
]

# ---------------------------------------------------------------- split_heads


def probe_split(ns, x, sizes):
    module = new_attention(ns, sizes).double()
    return {"y": module.split_heads(x.clone())}


def _split_mistakes(x, h):
    B, T, d = x.shape
    dh = d // h
    return [
        ("the heads are split with the axes mixed up: view(B, h, T, d_h) regroups the numbers without moving "
         "them; view as [B, T, h, d_h] first, then swap T and h (transpose(1, 2))", x.reshape(B, h, T, dh)),
        ("head i takes every h-th feature (view(B, T, d_h, h)); head i must own the contiguous features "
         "i*d_h .. (i+1)*d_h - 1", x.reshape(B, T, dh, h).permute(0, 3, 1, 2)),
    ]


@check("shape", 1, "B=2, T=3, d=4, h=2: split_heads gives [2, 2, 3, 2] = [B, h, T, d_h]", task="split_heads",
       probe=probe_split,
       inputs=lambda g: {"x": torch.randn(2, 3, 4, generator=g, dtype=torch.float64), "sizes": WALK_THROUGH})
def judge_split_shape(out, inputs, expected):
    B, T, d = inputs["x"].shape
    h = inputs["sizes"]["n_heads"]
    y = out["y"]
    if isinstance(y, torch.Tensor) and list(y.shape) == [B, T, h, d // h]:
        return (f"split_heads returns [B, T, h, d_h] = {list(y.shape)}; the heads axis comes second: "
                f"[B, h, T, d_h] (transpose T and h)")
    return shape_problem(y, (B, h, T, d // h), "split_heads(x)")


@check("head_features", 2, "head i owns features i*d_h .. (i+1)*d_h - 1 of every position (d=12, h=3)",
       task="split_heads", probe=probe_split,
       inputs=lambda g: {"x": torch.arange(2 * 5 * 12, dtype=torch.float64).reshape(2, 5, 12), "sizes": WIDE})
def judge_split_values(out, inputs, expected):
    x, h = inputs["x"], inputs["sizes"]["n_heads"]
    if problem := judge_split_shape(out, inputs, expected):
        return problem
    right = heads_of(x, h)
    if matches(out["y"], right, atol=0, rtol=0):
        return None
    known = first_diagnosis(out["y"], _split_mistakes(x, h), atol=0, rtol=0)
    return known or (compare(out["y"], right, "split_heads(x)", atol=0, rtol=0)
                     + ": head i must own features i*d_h .. (i+1)*d_h - 1 of every position")


# ---------------------------------------------------------------- merge_heads


def probe_merge(ns, y, sizes):
    module = new_attention(ns, sizes).double()
    return {"x": module.merge_heads(y.clone())}


def _merge_mistakes(y):
    B, h, T, dh = y.shape
    return [
        ("merge_heads reshapes [B, h, T, d_h] straight to [B, T, d] without moving the heads axis back: "
         "transpose h and T first (transpose(1, 2)), then reshape", y.reshape(B, T, h * dh)),
        ("the heads' features are interleaved (feature j of head i lands at j*h + i); head i's features "
         "belong together at i*d_h .. (i+1)*d_h - 1", y.permute(0, 2, 3, 1).reshape(B, T, h * dh)),
    ]


@check("shape", 1, "B=2, h=2, T=3, d_h=2: merge_heads gives [2, 3, 4] = [B, T, d]", task="merge_heads",
       probe=probe_merge,
       inputs=lambda g: {"y": torch.randn(2, 2, 3, 2, generator=g, dtype=torch.float64), "sizes": WALK_THROUGH})
def judge_merge_shape(out, inputs, expected):
    B, h, T, dh = inputs["y"].shape
    return shape_problem(out["x"], (B, T, h * dh), "merge_heads(y)")


@check("head_features", 2, "head i's features land at i*d_h .. (i+1)*d_h - 1 of each position (d=12, h=3)",
       task="merge_heads", probe=probe_merge,
       inputs=lambda g: {"y": torch.arange(2 * 3 * 5 * 4, dtype=torch.float64).reshape(2, 3, 5, 4), "sizes": WIDE})
def judge_merge_values(out, inputs, expected):
    if problem := judge_merge_shape(out, inputs, expected):
        return problem
    y = inputs["y"]
    right = merged(y)
    if matches(out["x"], right, atol=0, rtol=0):
        return None
    known = first_diagnosis(out["x"], _merge_mistakes(y), atol=0, rtol=0)
    return known or (compare(out["x"], right, "merge_heads(y)", atol=0, rtol=0)
                     + ": head i's d_h features go to positions i*d_h .. (i+1)*d_h - 1")


def probe_merge_inverse(ns, x, sizes):
    module = new_attention(ns, sizes).double()
    heads = module.split_heads(x.clone())
    return {"round_trip": module.merge_heads(heads), "again": module.split_heads(module.merge_heads(heads.clone()))}


@check("inverse_of_split", 1, "merge_heads(split_heads(x)) == x and split_heads(merge_heads(y)) == y",
       task="merge_heads", probe=probe_merge_inverse,
       inputs=lambda g: {"x": torch.randn(2, 5, 12, generator=g, dtype=torch.float64), "sizes": WIDE})
def judge_merge_inverse(out, inputs, expected):
    x = inputs["x"]
    if problem := shape_problem(out["round_trip"], x.shape, "merge_heads(split_heads(x))"):
        return problem
    if not torch.equal(out["round_trip"], x):
        return ("merge_heads(split_heads(x)) is not x: merge_heads must undo split_heads exactly "
                "(transpose h and T back, then reshape to [B, T, d])")
    if not torch.equal(out["again"], heads_of(x, inputs["sizes"]["n_heads"])):
        return "split_heads(merge_heads(y)) is not y: merge_heads must be the exact inverse of split_heads"
    return None
