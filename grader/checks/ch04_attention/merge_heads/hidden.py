"""The hidden side of grader/checks/ch04_attention/merge_heads/__init__.py: what its public checks read, and
its check on inputs drawn for each grading."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.ch04_attention.hidden.oracles import merged
from grader.checks.ch04_attention.merge_heads import MISTAKES, head_features, merge_problem, probe_merge
from grader.checks.facts import facts_for


def merge_mistakes(y):
    """What each of MISTAKES gives, by its name."""
    B, h, T, dh = y.shape
    outputs = {"heads_axis_not_moved": y.reshape(B, T, h * dh),
               "interleaved": y.permute(0, 2, 3, 1).reshape(B, T, h * dh)}
    assert outputs.keys() == MISTAKES.keys(), "a merge_heads mistake has a sentence but no output"
    return outputs


def merge_facts(y):
    return {"right": merged(y), "mistakes": merge_mistakes(y)}


@facts_for(head_features)
def public_merge_facts(ref, inputs):
    return merge_facts(inputs["y"])


@check("matches_reference", 1, "random [B, h, T, d_h] inputs are merged like the reference (h=4, d_h=2)",
       task="merge_heads", probe=probe_merge,
       inputs=lambda g: {"y": torch.randn(3, 4, 7, 2, generator=g, dtype=torch.float64),
                         "sizes": {"d_model": 8, "n_heads": 4}}, hidden=True)
def matches_reference(out, inputs, expected):
    """The public head_features, for the hidden check above."""
    return merge_problem(out, inputs, merge_facts(inputs["y"]))
