"""Chapter 04's head layout and attention formula written out in plain torch, the kit's
own: the heads of x and their merge, the classic wrong splits and merges, and the
lesson's formula composed from a module's parts with the right scale and mask and with
each classic wrong one. The hidden checks judge with them; on the public checks' fixed
inputs the kit writes what they give into facts.json (grader/generate/facts.py).
"""

from __future__ import annotations

import math

import torch

from grader.checks.ch04_attention.attention import role_compositions
from grader.checks.ch04_attention.common import loaded_attention
from grader.checks.facts import significant


def heads_of(x, h):
    """[B, T, d] -> [B, h, T, d_h], head i owning features i*d_h .. (i+1)*d_h - 1."""
    B, T, d = x.shape
    return x.reshape(B, T, h, d // h).transpose(1, 2)


def merged(y):
    """[B, h, T, d_h] -> [B, T, d], the inverse of heads_of."""
    B, h, T, dh = y.shape
    return y.transpose(1, 2).reshape(B, T, h * dh)


def split_mistakes(x, h):
    """What each of split_heads' SPLIT_MISTAKES gives, by its name."""
    B, T, d = x.shape
    dh = d // h
    return {"axes_regrouped": x.reshape(B, h, T, dh),
            "every_hth_feature": x.reshape(B, T, dh, h).permute(0, 3, 1, 2)}


def split_facts(x, h):
    return {"right": heads_of(x, h), "mistakes": split_mistakes(x, h)}


def merge_mistakes(y):
    """What each of merge_heads' MERGE_MISTAKES gives, by its name."""
    B, h, T, dh = y.shape
    return {"heads_axis_not_moved": y.reshape(B, T, h * dh),
            "interleaved": y.permute(0, 2, 3, 1).reshape(B, T, h * dh)}


def merge_facts(y):
    return {"right": merged(y), "mistakes": merge_mistakes(y)}


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
    with torch.no_grad():
        q, k, v = (module.split_heads(getattr(module, p)(x.clone())) for p in ("q_proj", "k_proj", "v_proj"))
        composed = {}
        for label, (scale, mask, axis, arrangement, project) in formula_variants(d, d // h).items():
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
    kept = []
    for parts in role_compositions(past is not None):
        y = role_output(module, q, k, v, past, parts)
        if y is not None and all(not torch.allclose(y, other, atol=1e-9, rtol=1e-7)
                                 for other in [right] + [o for _, o in kept]):
            kept.append((parts, y))
    return kept
