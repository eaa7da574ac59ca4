"""The hidden checks of grader/checks/ch04_attention/split_heads/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.ch04_attention.hidden.oracles import heads_of
from grader.checks.ch04_attention.split_heads import MISTAKES, head_features, probe_split, split_problem
from grader.checks.facts import facts_for


def split_mistakes(x, h):
    """What each of MISTAKES gives, by its name."""
    B, T, d = x.shape
    dh = d // h
    outputs = {"axes_regrouped": x.reshape(B, h, T, dh),
               "every_hth_feature": x.reshape(B, T, dh, h).permute(0, 3, 1, 2)}
    assert outputs.keys() == MISTAKES.keys(), "a split_heads mistake has a sentence but no output"
    return outputs


def split_facts(x, h):
    return {"right": heads_of(x, h), "mistakes": split_mistakes(x, h)}


@facts_for(head_features)
def public_split_facts(ref, inputs):
    return split_facts(inputs["x"], inputs["sizes"]["n_heads"])


@check("matches_reference", 1, "random [B, T, d] inputs are split like the reference (d=8, h=4)", task="split_heads",
       probe=probe_split, inputs=lambda g: {"x": torch.randn(3, 7, 8, generator=g, dtype=torch.float64),
                                            "sizes": {"d_model": 8, "n_heads": 4}}, hidden=True)
def matches_reference(out, inputs, expected):
    """The public head_features, for the hidden check above."""
    return split_problem(out, inputs, split_facts(inputs["x"], inputs["sizes"]["n_heads"]))
