"""What the chapter's task modules share: the sizes they build attention with, the
module built from the student's (or the reference's) code, and random projection
weights. They run on both sides: in the sandbox to build modules, in the grader to
make inputs. The head layout and the attention formula, right and wrong, are the kit's
own (hidden/oracles.py, and each task's hidden.py); the public checks read what they give
as data (facts.json).
"""

from __future__ import annotations

import math

import torch

from grader.checks.course import F64, PROJECTIONS, WALK_THROUGH as COURSE_WALK_THROUGH, config, fit, load_state

WALK_THROUGH = {key: COURSE_WALK_THROUGH[key] for key in ("d_model", "n_heads")}
WIDE = {"d_model": 12, "n_heads": 3}  # d_h = 4: 1/sqrt(d_h), 1/d_h, 1/d, 1/sqrt(d) all differ
# The Config every attention here is built from, with the sizes a check gives on top.
DEFAULTS = {"vocab_size": 11, "block_size": 16, **WALK_THROUGH, "n_layers": 1, "d_ff": COURSE_WALK_THROUGH["d_ff"]}


def new_attention(ns, sizes):
    """A fresh CausalSelfAttention of the graded package, as its own __init__ makes it."""
    return fit(ns.model.CausalSelfAttention(config(ns, DEFAULTS, **sizes)))


def loaded_attention(ns, sizes, state):
    """The attention in float64 holding `state`, in eval mode."""
    return load_state(new_attention(ns, sizes), state)


def random_attention_state(g, sizes, scale=None):
    d = sizes["d_model"]
    scale = scale if scale is not None else 1.2 / math.sqrt(d)
    return {f"{name}.weight": torch.randn(d, d, generator=g, dtype=F64) * scale for name in PROJECTIONS}
