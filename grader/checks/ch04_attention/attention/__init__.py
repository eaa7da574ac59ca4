"""Causal multi-head attention with a KV cache, CausalSelfAttention.forward.

The public checks test properties any right attention has: shapes, causal softmax
rows, no future leak, cached == recomputed, and the lesson's formula on fixed weights
and inputs, whose right output and classic wrong ones (the wrong scale, the wrong mask,
the wrong softmax axis, a cache that is ignored or not shifted, and any other tensor
in the part of the queries, keys or values, or a cache joined in the other order) are
data the kit computed (grader/checks/facts.py). The hidden ones compare random float64 weights and
inputs with the reference and name the same mistakes by computing what each would output.
"""

from __future__ import annotations


import torch

from grader.checks._api import (
    Task, causal_diagnosis, check, compare, compare_to_float32, exception_name, first_diagnosis, float32_close,
    float32_verdict, matches, named, shape_problem,
    torch_library_except,
)
from grader.checks.ch04_attention.common import WALK_THROUGH, WIDE, loaded_attention, random_attention_state
from grader.checks.ch04_attention.diagnosis import (
    CatLog, cache_joined_new_first, crash_after_the_join, mask_without_the_cache, present_shape_problem, weights_diagnosis,
    wrong_cache_axis,
)
from grader.checks.facts import known_facts

TASKS = [
    Task("attention", "model", "CausalSelfAttention.forward", "causal attention with a KV cache",
         forbidden=("torch.nn.functional.scaled_dot_product_attention", "torch.nn.MultiheadAttention",
                    "torch.nn.functional.multi_head_attention_forward"),
         forbidden_ops=("scaled_dot_product_attention", "_scaled_dot_product_*", "_fused_sdp_choice",
                        "multi_head_attention_forward", "_native_multi_head_attention", "_masked_softmax",
                        "_flash_attention_*", "_efficient_attention_*", "_transformer_encoder_layer_fwd")
                       + torch_library_except(), takes=(("x", 3),)),
]


# ------------------------------------------------------------------ attention


def probe_attention(ns, x, sizes, state, past=None):
    module = loaded_attention(ns, sizes, state)
    cache = lambda: None if past is None else tuple(t.clone() for t in past)  # noqa: E731
    log = CatLog()
    with torch.no_grad():
        try:
            with log:
                out, present = module(x.clone(), cache(), False)
                weights = module.last_attention
                cached_out, cached_present = module(x.clone(), cache(), True)
                cached_weights = module.last_attention
        except NotImplementedError:
            raise
        except Exception as error:  # noqa: BLE001 - with a cache, the judge names the mistake behind a crash
            if past is None:
                raise
            return {"error": type(error).__name__, "cats": log.calls, "masks": log.masks,
                    "past_shape": list(past[0].shape)}
    return {"out": out, "present": present, "weights": weights,
            "cached_out": cached_out, "cached_present": cached_present, "cached_weights": cached_weights}


@check("shapes", 2, "B=2, T=3, d=4, h=2: output [2, 3, 4], weights [2, 2, 3, 3], cached keys/values [2, 2, 3, 2]",
       probe=probe_attention,
       inputs=lambda g: {"x": torch.randn(2, 3, 4, generator=g, dtype=torch.float64), "sizes": WALK_THROUGH,
                         "state": random_attention_state(g, WALK_THROUGH)}, gated_by="formula")
def shapes(out, inputs, expected):
    B, T, d = inputs["x"].shape
    h = inputs["sizes"]["n_heads"]
    if problem := shape_problem(out["out"], (B, T, d), "the attention output"):
        return f"{problem}: attention keeps [B, T, d]"
    if out["present"] is not None:
        return "with use_cache=False forward should return present=None"
    if out["weights"] is None:
        return "forward should keep the softmax weights in self.last_attention"
    if problem := shape_problem(out["weights"], (B, h, T, T), "self.last_attention"):
        return f"{problem}: the weights are [B, h, T, T_past + T]"
    present = out["cached_present"]
    if not isinstance(present, list) or len(present) != 2:
        return "with use_cache=True forward should return present = (keys, values)"
    for tensor, what in zip(present, ("keys", "values")):
        if problem := shape_problem(tensor, (B, h, T, d // h), f"the cached {what}"):
            return f"{problem}: cached keys and values are [B, h, T, d_h]"
    if problem := shape_problem(out["cached_out"], (B, T, d), "the output with use_cache=True"):
        return problem
    if not torch.allclose(out["cached_out"].double(), out["out"].double(), atol=1e-12, rtol=0, equal_nan=True):
        return "use_cache=True changed the output; it should only add present"
    return None


@check("causal_softmax_weights", 3, "each row of the weights sums to 1 and is zero above the diagonal, never on it",
       probe=probe_attention,
       inputs=lambda g: {"x": torch.randn(2, 5, 4, generator=g, dtype=torch.float64), "sizes": WALK_THROUGH,
                         "state": random_attention_state(g, WALK_THROUGH)})
def causal_softmax_weights(out, inputs, expected):
    B, T, _ = inputs["x"].shape
    h = inputs["sizes"]["n_heads"]
    if problem := shape_problem(out["weights"], (B, h, T, T), "self.last_attention"):
        return problem
    return weights_diagnosis(out["weights"])


def probe_attention_output(ns, x, sizes, state):
    module = loaded_attention(ns, sizes, state)
    with torch.no_grad():
        return {"y": module(x.clone())[0]}


@check("causal_invariance", 2, "changing tokens 4.. leaves the outputs at positions 0..3 unchanged",
       probe=probe_attention_output, inputs=lambda g: _causal_inputs(g, WALK_THROUGH), separately=("x", "changed"), gated_by="formula")
def causal_invariance(out, inputs, expected):
    return causal_diagnosis(out["x"]["y"], out["changed"]["y"], inputs["_first_changed"], "attention")


def _causal_inputs(g, sizes):
    B, T, d = 2, 6, sizes["d_model"]
    x = torch.randn(B, T, d, generator=g, dtype=torch.float64)
    changed = x.clone()
    changed[:, 4:] = torch.randn(B, T - 4, d, generator=g, dtype=torch.float64)
    return {"x": x, "changed": changed, "_first_changed": 4, "sizes": sizes, "state": random_attention_state(g, sizes)}


# ------------------------------------------------------------------- the cache


def probe_attention_cache(ns, x, sizes, state, chunks, part, earlier):
    module = loaded_attention(ns, sizes, state)
    with torch.no_grad():
        if part == "full":
            return {"full": module(x.clone())[0]}
        steps, past, start = [], None, 0
        for n in chunks:
            piece = x[:, start:start + n].clone()
            log = CatLog()
            try:
                with log:
                    out, present = module(piece, past, True)
            except NotImplementedError:
                raise
            except Exception as error:  # noqa: BLE001 - the judge names the mistake behind the crash
                return {"steps": steps, "error": type(error).__name__, "cats": log.calls, "masks": log.masks,
                        "past_shape": list(past[0].shape) if past else None}
            weights = module.last_attention
            alone, _ = module(piece)
            steps.append({"out": out, "alone": alone, "weights": weights, "cats": log.calls,
                          "present_shapes": [list(t.shape) for t in present]
                          if isinstance(present, (tuple, list)) and len(present) == 2
                          and all(isinstance(t, torch.Tensor) for t in present) else None})
            past = tuple(present) if isinstance(present, (tuple, list)) else present
            start += n
    return {"steps": steps}


@check("cache_consistent", 2,
       "calls of 2, 1 and 3 tokens through the KV cache equal one full call; present grows to [B, h, 6, d_h]",
       probe=probe_attention_cache, inputs=lambda g: _cache_inputs(g, (2, 1, 3)), parts=("full", "steps"), gated_by="formula")
def cache_consistent(out, inputs, expected):
    x, chunks = inputs["x"], inputs["chunks"]
    B, _, d = x.shape
    h = inputs["sizes"]["n_heads"]
    dh = d // h
    calls = "in one call per token" if all(n == 1 for n in chunks) else f"in chunks of {', '.join(map(str, chunks))}"
    if "error" in out:
        failed = len(out["steps"])  # the call that raised: chunks[failed], after sum(chunks[:failed]) cached
        known = (wrong_cache_axis(out["cats"], out["past_shape"]) if out["past_shape"] else None) or \
            mask_without_the_cache(out.get("masks"), chunks[failed], sum(chunks[:failed]))
        raised = exception_name({"type": out["error"]})
        if not known and (later := crash_after_the_join(out["cats"], out["past_shape"], raised)):
            return f"calling forward with a past_key_value ({calls}) {later}"
        return known or (f"calling forward with a past_key_value ({calls}) raised {raised}: "
                          f"the cached keys and values [B, h, T_past, d_h] could not be joined with the new ones")
    steps, past = out["steps"], 0
    for n, step in zip(chunks, steps):
        if past and matches(step["out"], step["alone"], atol=1e-12, rtol=0) and not matches(
                step["out"], out["full"][:, past:past + n], atol=1e-9, rtol=1e-7):
            return ("the cached keys/values (past_key_value) are ignored: a call with the cache gives the same "
                    "output as a call without it")
        shapes = step["present_shapes"]
        if shapes is None:
            return "with use_cache=True forward should return present = (keys, values)"
        for shape, what in zip(shapes, ("keys", "values")):
            if problem := present_shape_problem(shape, what, (B, h, past, n, dh), step["cats"]):
                return f"{problem} (after {past + n} tokens, {calls})"
        if problem := shape_problem(step["weights"], (B, h, n, past + n), "self.last_attention"):
            return f"{problem} after a call with {past} cached tokens: the weights are [B, h, T, T_past + T]"
        if problem := weights_diagnosis(step["weights"], past):
            return f"{problem} (in a call with {past} cached tokens)"
        past += n
    stepwise = torch.cat([step["out"] for step in steps], dim=1)
    if problem := compare_to_float32(stepwise, out["full"], "the cached output", atol=1e-9, rtol=1e-7):
        past = 0
        for n, step in zip(chunks, steps):
            if past and (reversed_cache := cache_joined_new_first(step["cats"], past, n)):
                return (f"running attention {calls} through the KV cache differs from one full call: "
                        f"{reversed_cache}")
            past += n
        return f"running attention {calls} through the KV cache differs from one full call: {problem}"
    return None


cache_one_token_at_a_time = check(
    "cache_one_token_at_a_time", 2, "six one-token calls through the KV cache equal one full call",
    probe=probe_attention_cache, inputs=lambda g: _cache_inputs(g, (1,) * 6), parts=("full", "steps"),
    gated_by="formula")(cache_consistent)


def _cache_inputs(g, chunks, sizes=WIDE):
    T = sum(chunks)
    return {"x": torch.randn(2, T, sizes["d_model"], generator=g, dtype=torch.float64), "sizes": sizes,
            "state": random_attention_state(g, sizes), "chunks": list(chunks)}


# ------------------------------------------------------- the lesson's formula
# The projections, split_heads and merge_heads composed as the lesson writes attention,
# o_proj(merge(softmax(mask(q kᵀ · scale)) v)), with the right scale and mask and with
# each classic wrong one (MISTAKES): on the checks' fixed inputs, data the kit
# computed with the reference's parts (grader/checks/facts.py; hidden.py). The
# judge says which the output is.

MISTAKES = {
    "scale_d": "the scores are divided by d, the model width; divide by sqrt(d_h), the square root of one "
               "head's width",
    "scale_dh": "the scores are divided by d_h itself; divide by its square root, sqrt(d_h)",
    "no_scale": "the scores are not scaled: divide q·k by sqrt(d_h) before the softmax",
    "scale_sqrt_d": "the scores are divided by sqrt(d), the root of the model width; use sqrt(d_h), one head's width",
    "times_sqrt_dh": "the scores are multiplied by sqrt(d_h); divide by it",
    "no_mask": "there is no causal mask: each position attends to later positions too",
    "next": "the mask lets the next token through: hide every key after the query's own position",
    "dim_queries": "the softmax is taken over dim -2 (the queries); take it over the last axis (the keys)",
    "diagonal": "the mask also hides the diagonal: a position must attend to itself (hide only the keys after it)",
    "no_output_projection": "the output projection is missing: the merged heads go through o_proj",
    "cache_ignored": "the cached keys/values (past_key_value) are ignored: the output is the same as without a cache",
    "unshifted": "the causal mask is not shifted by the cache length: new token t sits at position T_past + t "
                 "and sees every cached key",
    "cache_after": "the cached keys/values are placed after the new ones: the cache holds the earlier positions, "
                   "so it comes first, torch.cat([past, new], dim=2)",
    "keys_values_mixed": "keys and values are mixed up: the cached keys are joined to the new values (or the other "
                         "way round); keys join keys, values join values",
}


# Which tensor plays which part, as a small grammar: the tensor the scores use as the
# queries, the one they compare them with (the keys), the one the weights mix (the
# values) and, with a cache, what is joined before or after this call's keys and values.
# The kit computes what each composition outputs with the right scale, mask and softmax
# on the formula checks' inputs (hidden.py); the judge names the one the output
# is, part by part against the lesson's formula.

RIGHT_ROLES = {"query": "q", "key": "k", "value": "v"}
ROLE_SOURCES = {"query": ("q", "k", "v"), "key": ("k", "v", "q"), "value": ("v", "k", "q")}
RIGHT_CACHE_ROLES = {"key_past": "past_k", "key_order": "past first", "value_past": "past_v",
                     "value_order": "past first"}
CACHE_SOURCES = {"key_past": ("past_k", "past_v", None), "key_order": ("past first", "new first"),
                 "value_past": ("past_v", "past_k", None), "value_order": ("past first", "new first")}
MAX_CACHED_ROLE_SLIPS = 2  # with a cache, compositions differing from the lesson's in at most this many parts


def right_roles(cached: bool) -> dict:
    return {**RIGHT_ROLES, **(RIGHT_CACHE_ROLES if cached else {})}


def role_slips(parts: dict) -> int:
    right = right_roles("key_past" in parts)
    return sum(parts[part] != right[part] for part in right)


def role_compositions(cached: bool) -> list[dict]:
    """Every composition of the grammar but the right one, fewest slips first (with a cache,
    at most MAX_CACHED_ROLE_SLIPS; a part left out has no order)."""
    sources = {**ROLE_SOURCES, **(CACHE_SOURCES if cached else {})}
    found = [{}]
    for part, choices in sources.items():
        found = [{**c, part: choice} for c in found for choice in choices]
    found = [c for c in found if 0 < role_slips(c) <= (MAX_CACHED_ROLE_SLIPS if cached else len(sources))
             and not any(c.get(f"{role}_past", "") is None and c[f"{role}_order"] != "past first"
                         for role in ("key", "value"))]
    return sorted(found, key=role_slips)


_TENSOR_NAMES = {"q": "the queries", "k": "the keys", "v": "the values", "past_k": "the cached keys",
                 "past_v": "the cached values"}
_PROJECTION = {"q": "q = split_heads(q_proj(x))", "k": "k = split_heads(k_proj(x))",
               "v": "v = split_heads(v_proj(x))"}


def roles_formula_text(parts: dict) -> str:
    """'o_proj(merge_heads(softmax(mask(q kᵀ / sqrt(d_h))) v))', with a cache '... with K = [past_k, k], V = [past_v, v]'."""
    if "key_past" not in parts:
        return f"o_proj(merge_heads(softmax(mask({parts['query']} {parts['key']}ᵀ / sqrt(d_h))) {parts['value']}))"

    def joined(role):
        past, new = parts[f"{role}_past"], parts[role]
        if past is None:
            return new
        return f"[{past}, {new}]" if parts[f"{role}_order"] == "past first" else f"[{new}, {past}]"

    return (f"o_proj(merge_heads(softmax(mask({parts['query']} Kᵀ / sqrt(d_h))) V)) with K = {joined('key')}, "
            f"V = {joined('value')}")


def roles_difference(parts: dict) -> str:
    """What the composition does otherwise than the lesson's formula, part by part."""
    said = []
    cached = "key_past" in parts
    # With a cache, a role whose new and cached parts are both the other tensor's (weights @ k
    # after k was joined with its cache) is one slip: the whole tensor is the other one.
    whole = {role: cached and parts[role] == other and parts[f"{role}_past"] == f"past_{other}"
             and parts[f"{role}_order"] == "past first" for role, other in (("key", "v"), ("value", "k"))}
    both = ", the cached and the new ones," if cached else ""
    if parts["query"] != "q":
        said.append(f"the scores use {_TENSOR_NAMES[parts['query']]} where the queries go: the scores are "
                    f"q kᵀ with {_PROJECTION['q']}")
    if parts["key"] != "k":
        other = "themselves" if parts["key"] == "q" else _TENSOR_NAMES[parts["key"]] + (both if whole["key"] else "")
        said.append(f"the scores compare the queries with {other} instead of with the keys: q kᵀ with "
                    f"{_PROJECTION['k']}")
    if parts["value"] != "v":
        other = _TENSOR_NAMES[parts["value"]] + (both if whole["value"] else ",")
        said.append(f"the attention output mixes {other} not the values: weights @ V with {_PROJECTION['v']}")
    for role, index in (("key", 0), ("value", 1)):
        if not cached or whole[role]:
            continue
        past, right = parts[f"{role}_past"], RIGHT_CACHE_ROLES[f"{role}_past"]
        plural = f"{role}s"
        if past is None:
            said.append(f"the cached {plural} are left out: the {plural} are the cached ones (past_key_value[{index}]) "
                        f"joined with this call's")
        elif past != right:
            said.append(f"{_TENSOR_NAMES[past]} are joined to the new {plural}: {plural} join the cached {plural}, "
                        f"past_key_value[{index}]")
        if past is not None and parts[f"{role}_order"] != "past first":
            said.append(f"the cache's order is reversed for the {plural}: the cached {plural} come after the new "
                        f"ones; the cache holds the earlier positions, so it comes first, "
                        f"torch.cat([{right}, {role[0]}], dim=2)")
    return "; ".join(said)


def roles_diagnosis(parts: dict) -> str:
    cached = "key_past" in parts
    return (f"the output is {roles_formula_text(parts)}, where the lesson's is "
            f"{roles_formula_text(right_roles(cached))}: {roles_difference(parts)}")


def probe_attention_formula(ns, x, sizes, state, past=None):
    module = loaded_attention(ns, sizes, state)
    cache = lambda: None if past is None else tuple(t.clone() for t in past)  # noqa: E731
    with torch.no_grad():
        log = CatLog()
        try:
            with log:
                out, _ = module(x.clone(), cache(), True)
        except NotImplementedError:
            raise
        except Exception as error:  # noqa: BLE001 - with a cache, the judge names the mistake behind a crash
            if past is None:
                raise
            return {"error": type(error).__name__, "cats": log.calls, "masks": log.masks,
                    "past_shape": list(past[0].shape)}
        return {"out": out, "weights": module.last_attention}


@check("formula", 2,
       "d=12, h=3: the output is o_proj(merge_heads(softmax(mask(q kᵀ / sqrt(d_h))) v)) of your own parts",
       probe=probe_attention_formula, inputs=lambda g: reference_inputs(g), fixed_inputs=True)
def formula(out, inputs, expected):
    if "error" in out:
        return judge_attention_reference(out, inputs, expected)
    composed = known_facts(inputs)
    right = composed["right"]
    past = "" if inputs.get("past") is None else f" (with {inputs['past'][0].shape[2]} cached tokens)"
    if compare_to_float32(out["out"], right, atol=1e-9, rtol=1e-7) is None:
        if problem := compare_to_float32(out["weights"], composed["right_weights"], "self.last_attention", atol=1e-9, rtol=1e-7):
            return f"{problem}: keep the softmax weights (after masking, before dropout) in self.last_attention{past}"
        return None
    known = first_diagnosis(out["out"], named(MISTAKES, {label: composed[label] for label in MISTAKES
                                                         if label in composed}), atol=1e-7, rtol=1e-6)
    known = known or first_diagnosis(out["out"], [(roles_diagnosis(c["parts"]), c["y"])
                                                  for c in composed.get("compositions", ())], atol=1e-7, rtol=1e-6)
    if known:
        return known + past
    cached = 0 if inputs.get("past") is None else inputs["past"][0].shape[2]
    if isinstance(out["weights"], torch.Tensor) and (weights := weights_diagnosis(out["weights"], cached)):
        return weights + past
    problem = compare_to_float32(out["out"], right, "the attention output", atol=1e-9, rtol=1e-7)
    return (f"{problem}{past}: the output is not o_proj(merge_heads(softmax(mask(q kᵀ / sqrt(d_h))) v)) "
            f"computed with your own projections and head functions")


formula_with_cache = check(
    "formula_with_cache", 2, "with 4 cached tokens the output is the same formula over [cached keys, new keys]",
    probe=probe_attention_formula, inputs=lambda g: reference_inputs(g, past_length=4), fixed_inputs=True)(formula)


@check("float64_precision", 1,
       "d=12, h=3: the output equals the lesson's formula to float64's precision (the scores, softmax and "
       "weighted sum all in the input's dtype)",
       probe=probe_attention_formula, inputs=lambda g: reference_inputs(g), fixed_inputs=True, gated_by="formula")
def float64_precision(out, inputs, expected):
    if "error" in out or not isinstance(out.get("out"), torch.Tensor):
        return None  # the formula check says what is wrong
    right = known_facts(inputs)["right"]
    if compare(out["out"], right, atol=1e-9, rtol=1e-7) is None:
        return None
    if float32_close(out["out"], right):
        return float32_verdict("the attention output", "your attention", "the input's dtype (float64 here)",
                               out["out"], right)
    return None  # wrong beyond float32's precision: the formula check names it


# ---------------------------------------------------------- against the reference


def judge_attention_reference(out, inputs, expected):
    past = 0 if inputs.get("past") is None else inputs["past"][0].shape[2]
    if "error" in out:
        known = wrong_cache_axis(out["cats"], out["past_shape"]) or \
            mask_without_the_cache(out.get("masks"), inputs["x"].shape[1], past)
        raised = exception_name({"type": out["error"]})
        if not known and (later := crash_after_the_join(out["cats"], out["past_shape"], raised)):
            return f"calling forward with a past_key_value {later}"
        return known or (f"calling forward with a past_key_value raised {raised}: "
                          f"the cached keys and values [B, h, T_past, d_h] could not be joined with the new ones")
    mismatch = compare_to_float32(out["cached_out"], expected["out"], "the attention output", atol=1e-9, rtol=1e-7)
    if mismatch:
        known = first_diagnosis(out["cached_out"], named(MISTAKES, expected["mistakes"])
                                + [(roles_diagnosis(c["parts"]), c["y"]) for c in expected["compositions"]],
                                atol=1e-7, rtol=1e-6)
        return known or weights_diagnosis(out["cached_weights"], past) or mismatch
    present = out["cached_present"]
    if not isinstance(present, list) or len(present) != 2:
        return "with use_cache=True forward should return present = (keys, values)"
    B, T, d = inputs["x"].shape
    h = inputs["sizes"]["n_heads"]
    dh = d // h
    for tensor, wanted, what in zip(present, expected["present"], ("keys", "values")):
        if isinstance(tensor, torch.Tensor) and (
                problem := present_shape_problem(list(tensor.shape), what, (B, h, past, T, dh), [])):
            return problem
        if problem := compare_to_float32(tensor, wanted, f"the returned {what}", atol=1e-9, rtol=1e-7):
            return f"{problem}: present is the cached and the new {what}, joined along time"
    if problem := compare_to_float32(out["cached_weights"], expected["weights"], "self.last_attention", atol=1e-9, rtol=1e-7):
        return f"{problem}: keep the softmax weights (after masking, before dropout) in self.last_attention"
    return None


def reference_inputs(g, past_length=0):
    sizes, B, T = WIDE, 2, 5
    d, h = sizes["d_model"], sizes["n_heads"]
    inputs = {"x": torch.randn(B, T, d, generator=g, dtype=torch.float64), "sizes": sizes,
              "state": random_attention_state(g, sizes)}
    if past_length:
        inputs["past"] = [torch.randn(B, h, past_length, d // h, generator=g, dtype=torch.float64) * 1.5
                          for _ in range(2)]
    return inputs
