"""The hidden side of grader/checks/ch04_attention/merge_heads/__init__.py: what its public checks read."""

from __future__ import annotations

from grader.checks.ch04_attention.hidden.oracles import merge_facts
from grader.checks.facts import facts_for


@facts_for("ch04.merge_heads.head_features")
def public_merge_facts(ref, inputs):
    return merge_facts(inputs["y"])
