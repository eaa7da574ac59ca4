"""The hidden checks of grader/checks/ch07_model/cross_entropy/__init__.py."""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.ch07_model.cross_entropy import judge_loss, logits_inputs, probe_cross_entropy


@check("matches_reference", 2, "random logits of other shapes ([N, V] and [B, T, V]) match the reference",
       probe=probe_cross_entropy, inputs=logits_inputs((17, 9), scale=4.0), hidden=True)
def matches_reference(out, inputs, expected):
    return judge_loss(out["loss"], inputs["logits"], inputs["targets"], reveal=False)
