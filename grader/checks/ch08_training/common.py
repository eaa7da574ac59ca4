"""What several of chapter 08's task modules share: the small model's sizes, building
it and its random weights, the clipping factor's epsilon, tolerant float comparisons and
fresh leaf copies of parameters for an optimizer to step.

These run on both sides: in the sandbox to build models and optimizers, and in the
grader to compute what torch, or a known mistake, would output.
"""

from __future__ import annotations

import torch

from grader.checks._api import float32_close
from grader.checks.course import config, load_state, random_lm_state

SIZES = dict(vocab_size=7, block_size=6, d_model=8, n_heads=2, n_layers=1, d_ff=16, dropout=0.0)
CLIP_EPS = 1e-6  # max_norm / (norm + 1e-6), as torch.nn.utils.clip_grad_norm_


def model_of(ns, sizes, state=None):
    """The student's (or the reference's) TransformerLM at SIZES with `sizes` on top, in
    float64, holding `state`; callers that run it set its mode."""
    return load_state(ns.model.TransformerLM(config(ns, SIZES, **sizes)), state)


def random_state(g, sizes, scale=1.0):
    """A state_dict for the contract's module names at SIZES with `sizes` on top, weights
    of a size that gives the model something to learn."""
    return random_lm_state(g, {**SIZES, **sizes}, scale)


def is_float(value) -> bool:
    return isinstance(value, (float, int)) and not isinstance(value, bool)


def close_enough(a: float, b: float, tol: float = 1e-9) -> bool:
    return abs(a - b) <= tol * max(1.0, abs(b))


def float32_near(a: float, b: float) -> bool:
    """Two numbers agree to float32's precision (_api.float32_close), as a float computed
    in float32 somewhere does."""
    return float32_close(torch.tensor(float(a), dtype=torch.float64), torch.tensor(float(b), dtype=torch.float64))


def close_to_float32(a: float, b: float, tol: float = 1e-9) -> bool:
    """close_enough, or float32_near: how a check that is not the task's precision check
    compares, so that float32 arithmetic is named once."""
    return close_enough(a, b, tol) or float32_near(a, b)


def leaves_of(initial):
    return [p.clone().requires_grad_(True) for p in initial]
