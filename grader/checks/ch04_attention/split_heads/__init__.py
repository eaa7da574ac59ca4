"""Splitting [B, T, d] into h heads [B, h, T, d_h].

Head i owns the contiguous features i*d_h .. (i+1)*d_h - 1 of every position; the
checks feed numbered features, so a head that takes every h-th feature, or axes
regrouped without being moved, is named. The right layout of the numbered features, and
the wrong ones, are data the kit computed (grader/checks/facts.py; hidden.py).
"""

from __future__ import annotations

import torch

from grader.checks._api import Task, check, compare, first_diagnosis, matches, named, shape_problem
from grader.checks.ch04_attention.common import WALK_THROUGH, WIDE, new_attention
from grader.checks.facts import known_facts

TASKS = [
    Task("split_heads", "model", "CausalSelfAttention.split_heads", "splitting [B, T, d] into heads"),
]


# Each mistake by name; what it outputs is computed under the same name (hidden.py).
MISTAKES = {
    "axes_regrouped": "the heads are split with the axes mixed up: view(B, h, T, d_h) regroups the numbers without "
                      "moving them; view as [B, T, h, d_h] first, then swap T and h (transpose(1, 2))",
    "every_hth_feature": "head i takes every h-th feature (view(B, T, d_h, h)); head i must own the contiguous "
                         "features i*d_h .. (i+1)*d_h - 1",
}


def probe_split(ns, x, sizes):
    module = new_attention(ns, sizes).double()
    return {"y": module.split_heads(x.clone())}


@check("shape", 1, "B=2, T=3, d=4, h=2: split_heads gives [2, 2, 3, 2] = [B, h, T, d_h]", task="split_heads",
       probe=probe_split,
       inputs=lambda g: {"x": torch.randn(2, 3, 4, generator=g, dtype=torch.float64), "sizes": WALK_THROUGH})
def shape(out, inputs, expected):
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
def head_features(out, inputs, expected):
    return split_problem(out, inputs, known_facts(inputs))


def split_problem(out, inputs, facts):
    """facts: the heads of x ("right") and what each of MISTAKES gives ("mistakes", {name: y})."""
    if problem := shape(out, inputs, None):
        return problem
    right = facts["right"]
    if matches(out["y"], right, atol=0, rtol=0):
        return None
    known = first_diagnosis(out["y"], named(MISTAKES, facts["mistakes"]), atol=0, rtol=0)
    return known or (compare(out["y"], right, "split_heads(x)", atol=0, rtol=0)
                     + ": head i must own features i*d_h .. (i+1)*d_h - 1 of every position")
