"""The hidden side of grader/checks/ch04_attention/merge_heads/__init__.py: what its public checks read."""

from __future__ import annotations

from grader.checks.ch04_attention.hidden.oracles import merged
from grader.checks.ch04_attention.merge_heads import MISTAKES
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


@facts_for("ch04.merge_heads.head_features")
def public_merge_facts(ref, inputs):
    return merge_facts(inputs["y"])
