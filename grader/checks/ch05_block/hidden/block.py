"""The hidden checks of grader/checks/ch05_block/block.py."""

from __future__ import annotations

import torch

from grader.checks._api import check, compare, first_diagnosis
from grader.checks.course import config, load_state
from grader.checks.ch05_block.block import BLOCK_FORMULA_MISTAKES, block_of, random_block_inputs, probe_block_forward
from grader.checks.ch05_block.common import SIZES


def _block_mistakes(ref, inputs):
    """Outputs of the classic wrong blocks, built from reference parts."""
    block = ref.model.TransformerBlock(config(ref, SIZES, **inputs["sizes"]))
    load_state(block, inputs["state"])
    x = inputs["x"]
    with torch.no_grad():
        attn = lambda h: block.attention(h)[0]  # noqa: E731
        ffn, ln1, ln2 = block.feedforward, block.ln_attention, block.ln_feedforward
        u = x + attn(ln1(x))
        right = u + ffn(ln2(u))
        post_u = ln1(x + attn(x))
        return {
            "right": right,
            "mistakes": [
                ("the block is post-LN (normalising after the residual add); this course's block is pre-LN: "
                 "U = X + A(LN1(X)), Y = U + F(LN2(U))", ln2(post_u + ffn(post_u))),
                ("the output is re-normalised: pre-LN adds the increments to the raw residual stream",
                 ln2(right)),
                ("the feed-forward branch reads X instead of U = X + A(LN1(X))", u + ffn(ln2(x))),
                (BLOCK_FORMULA_MISTAKES["branches_swapped_norms"],
                 (x + attn(ln2(x))) + ffn(ln1(x + attn(ln2(x))))),
                (BLOCK_FORMULA_MISTAKES["feedforward_first"],
                 (x + ffn(ln2(x))) + attn(ln1(x + ffn(ln2(x))))),
                ("one LayerNorm is used for both branches; each branch has its own", u + ffn(ln1(u))),
                ("the feed-forward residual is missing (Y = F(LN2(U)))", ffn(ln2(u))),
                ("the attention residual is missing (U = A(LN1(X)))", attn(ln1(x)) + ffn(ln2(attn(ln1(x))))),
                ("an increment is broadcast from [B, 1, d]: add each position's own increment",
                 x + attn(ln1(x))[:, -1:, :] + ffn(ln2(x + attn(ln1(x))[:, -1:, :]))),
            ],
        }


@check("matches_reference", 3, "random weights (distinct norms) and inputs match the reference pre-LN block",
       probe=probe_block_forward, inputs=random_block_inputs, expect=_block_mistakes, hidden=True)
def judge_block_reference(out, inputs, expected):
    if compare(out["y"], expected["right"], atol=1e-9, rtol=1e-7) is None:
        return None
    known = first_diagnosis(out["y"], expected["mistakes"], atol=1e-7, rtol=1e-6)
    return known or compare(out["y"], expected["right"], "the block output", atol=1e-9, rtol=1e-7)


def probe_block_cache(ns, x, sizes, state, split, part, earlier):
    block = block_of(ns, sizes, state)
    with torch.no_grad():
        if part == "full":
            return {"full": block(x.clone())[0]}
        first, present = block(x[:, :split].clone(), None, True)
        rest, _ = block(x[:, split:].clone(), present, True)
    return {"stepwise": torch.cat([first, rest], dim=1)}


@check("cache_consistent", 1, "two calls through the KV cache equal one full call",
       probe=probe_block_cache, inputs=lambda g: {**random_block_inputs(g), "split": 3}, hidden=True,
       parts=("full", "stepwise"), gated_by="formula")
def judge_block_cache(out, inputs, expected):
    if problem := compare(out["stepwise"], out["full"], "the cached block output", atol=1e-9, rtol=1e-7):
        return f"running the block in two calls through the KV cache differs from one call: {problem}"
    return None
