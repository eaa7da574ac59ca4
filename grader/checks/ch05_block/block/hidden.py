"""The hidden checks of grader/checks/ch05_block/block/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check, compare, diagnose, distinct_outputs, named
from grader.checks.course import config, load_state
from grader.checks.ch05_block.block import (
    MISTAKES, MISTAKES_REFERENCE, attention_pair_problem, block_compositions, block_of, composition_mistakes,
    example_1, formula, probe_block_forward, random_block_inputs, zero_branch_identity,
)
from grader.checks.ch05_block.common import SIZES
from grader.checks.ch05_block.hidden.oracles import layer_norm
from grader.checks.facts import facts_for, significant


@facts_for(formula)
def formula_facts(ref, inputs):
    """The reference block's own parts composed as the lesson's formula says, right and in
    the classic wrong orders (those only ever matched to 1e-6, by first_diagnosis)."""
    x, sizes, state = inputs["x"], inputs["sizes"], inputs["state"]
    block = block_of(ref, sizes, state)
    with torch.no_grad():
        attn = lambda h: block.attention(h)[0]  # noqa: E731
        ffn, ln1, ln2 = block.feedforward, block.ln_attention, block.ln_feedforward
        u = x + attn(ln1(x))
        right = u + ffn(ln2(u))
        first = x + ffn(ln2(x))
        post_u = ln1(x + attn(x))
        a_only = attn(ln1(x))
        swapped_u = x + attn(ln2(x))
        mistakes = {
            "feedforward_reads_x": u + ffn(ln2(x)),
            "one_norm": u + ffn(ln1(u)),
            "feedforward_first": first + attn(ln1(first)),
            "post_ln": ln2(post_u + ffn(post_u)),
            "renormalised": ln2(right),
            "no_ff_residual": ffn(ln2(u)),
            "no_attention_residual": a_only + ffn(ln2(a_only)),
            "branches_swapped_norms": swapped_u + ffn(ln1(swapped_u)),
            "broadcast": (x + a_only[:, -1:]) + ffn(ln2(x + a_only[:, -1:])),
            "attention_unnormalised": (x + attn(x)) + ffn(ln2(x + attn(x))),
            "feedforward_unnormalised": u + ffn(u),
        }
    assert mistakes.keys() == MISTAKES.keys(), "a block mistake has a sentence but no output"
    return {"right": right, "mistakes": {name: significant(value) for name, value in mistakes.items()},
            "compositions": [{"parts": parts, "y": significant(y, 8)}
                             for parts, y in distinct_compositions(block, x, right)]}


def composed_block(parts, block, x):
    """What the block outputs composed as `parts` says (block.py's grammar), from its own parts."""
    branch = {"attention": lambda h: block.attention(h)[0], "feedforward": block.feedforward}
    norm = {"ln_attention": block.ln_attention, "ln_feedforward": block.ln_feedforward, None: lambda h: h}
    first = parts["first"]
    second = "feedforward" if first == "attention" else "attention"
    with torch.no_grad():
        increment = branch[first](norm[parts[f"{first}_norm"]](x))
        u = x + increment if parts["first_residual"] == "X" else increment
        increment = branch[second](norm[parts[f"{second}_norm"]](u if parts["second_reads"] == "U" else x))
        return {"U": u, "X": x, None: 0}[parts["second_residual"]] + increment


def distinct_compositions(block, x, right):
    """(parts, output) of every wrong composition of the grammar, fewest slips first, leaving out
    those that output what the right block or a simpler composition already does."""
    return distinct_outputs(((parts, composed_block(parts, block, x)) for parts in block_compositions()), right)


@facts_for(zero_branch_identity)
def zero_branch_facts(ref, inputs):
    """With both branches zero: what a post-LN block, a re-normalised output and a plain
    LayerNorm of the input give (the norms' gammas and betas are _zeroed_branches')."""
    x = inputs["x"]
    ones, zeros = torch.ones(x.shape[-1], dtype=torch.float64), torch.zeros(x.shape[-1], dtype=torch.float64)
    post = layer_norm(layer_norm(x, torch.full_like(ones, 1.5), torch.full_like(zeros, 0.25)),
                      torch.full_like(ones, 0.5), torch.full_like(zeros, -0.25))
    return {"post": post, "renormalised": layer_norm(x, torch.full_like(ones, 0.5), torch.full_like(zeros, -0.25)),
            "normalised": layer_norm(x, ones, zeros)}


@facts_for(example_1)
def example_facts(ref, inputs):
    """Example 1's figure normalised: what a block that normalises its output gives."""
    figure = torch.tensor([[[0.9206722, 3.4206696]]], dtype=torch.float64)
    return {"normalised_figure": layer_norm(figure, torch.ones(2, dtype=torch.float64),
                                            torch.zeros(2, dtype=torch.float64))}


def _block_mistakes(ref, inputs):
    """Outputs of the classic wrong blocks, built from reference parts, by
    MISTAKES_REFERENCE's names, then of every wrong composition."""
    block = ref.model.TransformerBlock(config(ref, SIZES, **inputs["sizes"]))
    load_state(block, inputs["state"])
    x = inputs["x"]
    with torch.no_grad():
        attn = lambda h: block.attention(h)[0]  # noqa: E731
        ffn, ln1, ln2 = block.feedforward, block.ln_attention, block.ln_feedforward
        u = x + attn(ln1(x))
        right = u + ffn(ln2(u))
        post_u = ln1(x + attn(x))
        mistakes = {
            "post_ln": ln2(post_u + ffn(post_u)),
            "renormalised": ln2(right),
            "feedforward_reads_x": u + ffn(ln2(x)),
            "branches_swapped_norms": (x + attn(ln2(x))) + ffn(ln1(x + attn(ln2(x)))),
            "feedforward_first": (x + ffn(ln2(x))) + attn(ln1(x + ffn(ln2(x)))),
            "one_norm": u + ffn(ln1(u)),
            "no_ff_residual": ffn(ln2(u)),
            "no_attention_residual": attn(ln1(x)) + ffn(ln2(attn(ln1(x)))),
            "broadcast": x + attn(ln1(x))[:, -1:, :] + ffn(ln2(x + attn(ln1(x))[:, -1:, :])),
        }
        return {"right": right, "mistakes": mistakes,
                "compositions": [{"parts": parts, "y": y} for parts, y in distinct_compositions(block, x, right)]}


@check("matches_reference", 3, "random weights (distinct norms) and inputs match the reference pre-LN block",
       probe=probe_block_forward, inputs=random_block_inputs, expect=_block_mistakes, hidden=True)
def matches_reference(out, inputs, expected):
    if problem := attention_pair_problem(out):
        return problem
    mistakes = named(MISTAKES_REFERENCE, expected["mistakes"]) + composition_mistakes(expected["compositions"])
    return diagnose(out["y"], expected["right"], mistakes, "the block output", atol=1e-9, rtol=1e-7,
                    named_atol=1e-7, named_rtol=1e-6)


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
def cache_consistent(out, inputs, expected):
    if problem := compare(out["stepwise"], out["full"], "the cached block output", atol=1e-9, rtol=1e-7):
        return f"running the block in two calls through the KV cache differs from one call: {problem}"
    return None
