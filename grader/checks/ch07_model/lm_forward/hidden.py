"""The hidden checks of grader/checks/ch07_model/lm_forward/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check, compare, first_diagnosis, matches_to_float32, named
from grader.checks.ch07_model.common import model_of, stable_cross_entropy
from grader.checks.ch07_model.lm_forward import (
    MISTAKES, cache_matches_full, formula, lm_cache_inputs, lm_inputs, probe_lm_cache, probe_lm_forward, triple,
)
from grader.checks.facts import facts_for, significant


def lm_composed(model, idx):
    """The model's own parts composed as the lesson's forward ("right"), and as each classic
    wrong one ("mistakes", by MISTAKES's names)."""
    with torch.no_grad():
        tokens = model.token_embedding(idx)
        hidden = model.position_embedding(tokens, 0)

        def through(h, blocks):
            for block in blocks:
                h = block(h)[0]
            return h

        head = lambda h: model.head(model.ln_final(h))  # noqa: E731
        blocks = list(model.blocks)
        mistakes = {
            "no_final_norm": model.head(through(hidden, blocks)),
            "no_positions": head(through(tokens, blocks)),
            "first_block_only": head(through(hidden, blocks[:1])),
            "last_block_only": head(through(hidden, blocks[-1:])),
            "no_blocks": head(hidden),
            "final_norm_twice": model.head(model.ln_final(model.ln_final(through(hidden, blocks)))),
            "blocks_reversed": head(through(hidden, blocks[::-1])),
            "tied_head": model.ln_final(through(hidden, blocks)) @ model.token_embedding.weight.T,
        }
        assert mistakes.keys() == MISTAKES.keys(), "a wrong forward has a sentence but no output"
        return {"right": head(through(hidden, blocks)), "mistakes": mistakes}


@facts_for(formula)
def formula_facts(ref, inputs):
    """The wrong forwards' logits are only ever matched to 1e-6 (first_diagnosis)."""
    composed = lm_composed(model_of(ref, inputs["sizes"], inputs["state"]), inputs["idx"].clone())
    return {"right": composed["right"],
            "mistakes": {name: significant(value) for name, value in composed["mistakes"].items()}}


HIDDEN_SIZES = dict(vocab_size=13, block_size=10, d_model=12, n_heads=3, n_layers=3, d_ff=20)


def _expect_lm(ref, inputs):
    """The reference logits and loss, and what the classic wrong forwards would output."""
    model = model_of(ref, inputs["sizes"], inputs["state"])
    composed = lm_composed(model, inputs["idx"])
    right = composed["right"]
    return {"logits": right, "loss": stable_cross_entropy(right, inputs["targets"]), "mistakes": composed["mistakes"]}


@check("matches_reference", 3, "random weights (the reference's state_dict) give the reference logits and loss",
       probe=probe_lm_forward, inputs=lm_inputs(HIDDEN_SIZES, B=3, T=9), expect=_expect_lm, hidden=True)
def matches_reference(out, inputs, expected):
    if problem := triple(out["scored"], "model(idx, targets)"):
        return problem
    logits, loss, _ = out["scored"]
    # Judged to float32's precision: ch07.lm_forward.formula, the precision check, names float32.
    if not matches_to_float32(logits, expected["logits"], atol=1e-9, rtol=1e-7):
        known = first_diagnosis(logits, named(MISTAKES, expected["mistakes"]), atol=1e-8, rtol=1e-6,
                                right=expected["logits"])
        return known or compare(logits, expected["logits"], "the logit tensor", atol=1e-9, rtol=1e-7)
    if not matches_to_float32(loss, expected["loss"], atol=1e-10, rtol=1e-9):
        return "the logits are right but the loss is not their mean cross-entropy against the targets"
    return None


@check("cache_chunks", 1, "uneven chunks through the cache give the logits of one full pass",
       probe=probe_lm_cache, inputs=lm_cache_inputs(HIDDEN_SIZES, (4, 2, 1, 3)), hidden=True,
       parts=("full", "stepwise"))
def cache_chunks(out, inputs, expected):
    return cache_matches_full(out, inputs, expected, hidden=True)
