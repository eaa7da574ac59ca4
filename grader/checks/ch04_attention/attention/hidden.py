"""The hidden checks of grader/checks/ch04_attention/attention/__init__.py."""

from __future__ import annotations

import math

import torch

from grader.checks._api import check, distinct_outputs
from grader.checks.ch04_attention.attention import (
    MISTAKES, float64_precision, formula, formula_with_cache, judge_attention_reference, probe_attention,
    reference_inputs, role_compositions,
)
from grader.checks.ch04_attention.common import loaded_attention
from grader.checks.ch04_attention.hidden.oracles import merged
from grader.checks.facts import facts_for, significant


def formula_variants(d, dh):
    """label -> (scale, mask, softmax axis, cache arrangement, output projection)."""
    root = 1 / math.sqrt(dh)
    return {
        "right": (root, "causal", -1, "before", True),
        "scale_d": (1 / d, "causal", -1, "before", True),
        "scale_dh": (1 / dh, "causal", -1, "before", True),
        "no_scale": (1.0, "causal", -1, "before", True),
        "scale_sqrt_d": (1 / math.sqrt(d), "causal", -1, "before", True),
        "times_sqrt_dh": (math.sqrt(dh), "causal", -1, "before", True),
        "no_mask": (root, "none", -1, "before", True),
        "next": (root, "next", -1, "before", True),
        "diagonal": (root, "diagonal", -1, "before", True),
        "dim_queries": (root, "causal", -2, "before", True),
        "no_output_projection": (root, "causal", -1, "before", False),
        "cache_ignored": (root, "causal", -1, "ignored", True),
        "unshifted": (root, "unshifted", -1, "before", True),
        "cache_after": (root, "causal", -1, "after", True),
        "keys_values_mixed": (root, "causal", -1, "mixed", True),
    }


def formula_facts(ref, inputs):
    """The reference's projections, split_heads and merge_heads composed as the lesson
    writes attention, right (with its weights) and with each classic mistake."""
    x, sizes, state, past = inputs["x"], inputs["sizes"], inputs["state"], inputs.get("past")
    module = loaded_attention(ref, sizes, state)
    cache = lambda: None if past is None else tuple(t.clone() for t in past)  # noqa: E731
    d, h = sizes["d_model"], sizes["n_heads"]
    variants = formula_variants(d, d // h)
    assert variants.keys() - {"right"} == MISTAKES.keys(), "an attention mistake has a sentence but no output"
    with torch.no_grad():
        q, k, v = (module.split_heads(getattr(module, p)(x.clone())) for p in ("q_proj", "k_proj", "v_proj"))
        composed = {}
        for label, (scale, mask, axis, arrangement, project) in variants.items():
            if past is None and label in ("cache_ignored", "unshifted", "cache_after", "keys_values_mixed"):
                continue
            keys, values = k, v
            if past is not None and arrangement != "ignored":
                old_k, old_v = cache()
                keys, values = {"before": (torch.cat([old_k, k], 2), torch.cat([old_v, v], 2)),
                                "after": (torch.cat([k, old_k], 2), torch.cat([v, old_v], 2)),
                                "mixed": (torch.cat([old_v, k], 2), torch.cat([old_k, v], 2))}[arrangement]
            T, S = q.shape[2], keys.shape[2]
            query_pos = torch.arange(S - T, S).unsqueeze(1)
            key_pos = torch.arange(S).unsqueeze(0)
            hide = {"causal": key_pos > query_pos, "none": torch.zeros(T, S, dtype=torch.bool),
                    "next": key_pos > query_pos + 1, "unshifted": key_pos > torch.arange(T).unsqueeze(1),
                    "diagonal": key_pos >= query_pos}[mask]
            w = torch.softmax((q @ keys.transpose(-2, -1) * scale).masked_fill(hide, float("-inf")), dim=axis)
            merged_heads = module.merge_heads(w @ values)
            composed[label] = module.o_proj(merged_heads) if project else merged_heads
            if label == "right":
                composed["right_weights"] = w
        composed["compositions"] = [{"parts": parts, "y": significant(y, 8)} for parts, y in
                                    distinct_role_compositions(module, q, k, v, cache(), composed["right"])]
    return composed


def role_output(module, q, k, v, past, parts):
    """The attention output with the tensors playing the parts `parts` says (attention.py's
    grammar of roles), the right scale, mask and softmax; None where their shapes do not fit."""
    tensors = {"q": q, "k": k, "v": v}
    if past is not None:
        tensors.update(past_k=past[0], past_v=past[1])

    def joined(role):
        new, old = tensors[parts[role]], parts.get(f"{role}_past")
        if old is None:
            return new
        pair = [tensors[old], new] if parts[f"{role}_order"] == "past first" else [new, tensors[old]]
        return torch.cat(pair, 2)

    query, keys, values = tensors[parts["query"]], joined("key"), joined("value")
    T, S = query.shape[2], keys.shape[2]
    if values.shape[2] != S:
        return None
    hide = torch.arange(S).unsqueeze(0) > torch.arange(S - T, S).unsqueeze(1)
    scores = (query @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(hide, float("-inf"))
    with torch.no_grad():
        return module.o_proj(module.merge_heads(torch.softmax(scores, dim=-1) @ values))


def distinct_role_compositions(module, q, k, v, past, right):
    """(parts, output) of every wrong composition of roles, fewest slips first, leaving out those
    that cannot be computed and those that output what the right one or a simpler one does."""
    return distinct_outputs(((parts, role_output(module, q, k, v, past, parts))
                             for parts in role_compositions(past is not None)), right)


@facts_for(formula, formula_with_cache, float64_precision)
def public_formula_facts(ref, inputs):
    """The mistakes' outputs are only ever matched to 1e-6 (first_diagnosis)."""
    composed = formula_facts(ref, inputs)
    return {label: value if label in ("right", "right_weights") else significant(value)
            for label, value in composed.items()}


# ------------------------------------------------------------ what the mistakes output
# In the grader, on the reference's own projections (the checks' expect).


def _masked_attention(q, k, v, o_weight, scale, mask="causal", softmax_dim=-1):
    """Attention of q [B,h,T,dh] over k, v [B,h,S,dh] (the first S - T of them cached),
    with a chosen scale, mask and softmax axis: the right one and the classic wrong ones."""
    T, S = q.shape[2], k.shape[2]
    past = S - T
    scores = q @ k.transpose(-2, -1) * scale
    query_pos = torch.arange(past, S).unsqueeze(1)
    key_pos = torch.arange(S).unsqueeze(0)
    hide = {"causal": key_pos > query_pos, "none": torch.zeros(T, S, dtype=torch.bool),
            "next": key_pos > query_pos + 1, "unshifted": key_pos > torch.arange(T).unsqueeze(1)}[mask]
    weights = torch.softmax(scores.masked_fill(hide, float("-inf")), dim=softmax_dim)
    return merged(weights @ v) @ o_weight.T, weights


def _reference_parts(ref, inputs):
    """q, k, v (with the cache prepended) from the reference's projections."""
    module = loaded_attention(ref, inputs["sizes"], inputs["state"])
    x = inputs["x"]
    with torch.no_grad():
        q, k, v = (module.split_heads(getattr(module, p)(x)) for p in ("q_proj", "k_proj", "v_proj"))
        new_k, new_v = k, v
        if inputs.get("past") is not None:
            k = torch.cat([inputs["past"][0], k], dim=2)
            v = torch.cat([inputs["past"][1], v], dim=2)
    return module, q, k, v, new_k, new_v


def _attention_mistakes(ref, inputs):
    """The reference's output, weights and cache, what each classic wrong version of
    MISTAKES outputs by its name, and the wrong compositions of roles, computed
    with the reference's own projections."""
    module, q, k, v, new_k, new_v = _reference_parts(ref, inputs)
    x, d, h = inputs["x"], inputs["sizes"]["d_model"], inputs["sizes"]["n_heads"]
    dh, o = d // h, inputs["state"]["o_proj.weight"]
    past = inputs.get("past")
    with torch.no_grad():
        right, _ = module(x, None if past is None else tuple(past), True)
        weights = module.last_attention
        root = 1 / math.sqrt(dh)
        out = lambda scale=root, **how: _masked_attention(q, k, v, o, scale, **how)[0]  # noqa: E731
        mistakes = {}
        if past is not None:
            # A cache ignored or not shifted is named before any other mistake.
            mistakes["cache_ignored"] = _masked_attention(q, new_k, new_v, o, root)[0]
            mistakes["unshifted"] = out(mask="unshifted")
        mistakes.update({
            "scale_d": out(1 / d), "scale_dh": out(1 / dh), "no_scale": out(1.0),
            "scale_sqrt_d": out(1 / math.sqrt(d)), "times_sqrt_dh": out(math.sqrt(dh)),
            "no_mask": out(mask="none"), "next": out(mask="next"), "dim_queries": out(softmax_dim=-2),
            "no_output_projection": _masked_attention(q, k, v, torch.eye(d, dtype=o.dtype), root)[0],
        })
        if past is not None:
            joined = {"cache_after": (torch.cat([new_k, past[0]], 2), torch.cat([new_v, past[1]], 2)),
                      "keys_values_mixed": (torch.cat([past[1], new_k], 2), torch.cat([past[0], new_v], 2))}
            for label, (keys, values) in joined.items():
                mistakes[label] = _masked_attention(q, keys, values, o, root)[0]
        compositions = [{"parts": parts, "y": y} for parts, y in
                        distinct_role_compositions(module, q, new_k, new_v, None if past is None else tuple(past),
                                                   right)]
    return {"out": right, "weights": weights, "present": [k, v], "mistakes": mistakes, "compositions": compositions}


@check("matches_reference", 3,
       "random float64 weights and inputs (d=12, h=3) match the reference: output, weights, cache",
       probe=probe_attention, inputs=lambda g: reference_inputs(g), expect=_attention_mistakes, hidden=True)
def matches_reference(out, inputs, expected):
    """The public judge_attention_reference, for the hidden checks above."""
    return judge_attention_reference(out, inputs, expected)


matches_reference_with_cache = check(
    "matches_reference_with_cache", 2,
    "with a random past_key_value (4 cached tokens) the output, weights and present match the reference",
    probe=probe_attention, inputs=lambda g: reference_inputs(g, past_length=4), expect=_attention_mistakes,
    hidden=True)(matches_reference)
