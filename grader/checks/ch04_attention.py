"""Chapter 04: causal multi-head self-attention with a KV cache.

The walk-through B=2, T=3, d=4, h=2 gives Q/K/V [2, 2, 3, 2] and weights [2, 2, 3, 3].
The public checks test properties any right attention has: shapes, causal softmax
rows, no future leak, cached == recomputed, bias-free projections with 4d² parameters.
The hidden ones compare random float64 weights and inputs with the reference and name
the classic mistakes (the wrong scale, the wrong mask, the wrong softmax axis, a
cache that is ignored or not shifted) by computing what each would output.
"""

from __future__ import annotations

import math

import torch
from torch.overrides import TorchFunctionMode

from grader.checks._api import (
    Task, causal_diagnosis, check, compare, exception_name, first_diagnosis, matches, shape_problem,
)

CHAPTER, TITLE = "04", "Causal multi-head attention with a KV cache"

TASKS = [
    Task("attention_init", "model", "CausalSelfAttention.__init__", "the Q/K/V/O projections"),
    Task("split_heads", "model", "CausalSelfAttention.split_heads", "splitting [B, T, d] into heads"),
    Task("merge_heads", "model", "CausalSelfAttention.merge_heads", "merging the heads back"),
    Task("attention", "model", "CausalSelfAttention.forward", "causal attention with a KV cache",
         forbidden=("torch.nn.functional.scaled_dot_product_attention", "torch.nn.MultiheadAttention",
                    "torch.nn.functional.multi_head_attention_forward"),
         forbidden_ops=("scaled_dot_product_attention", "_scaled_dot_product_*", "_fused_sdp_choice",
                        "multi_head_attention_forward", "_native_multi_head_attention", "_masked_softmax",
                        "_flash_attention_*", "_efficient_attention_*", "_transformer_encoder_layer_fwd")),
]

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj")
WALK_THROUGH = {"d_model": 4, "n_heads": 2}
WIDE = {"d_model": 12, "n_heads": 3}  # d_h = 4: 1/sqrt(d_h), 1/d_h, 1/d, 1/sqrt(d) all differ
AXIS_NAMES = {0: "the batch axis", 1: "the heads axis", 2: "the time axis", 3: "the feature axis"}

# ----------------------------------------------------------------------- helpers
# They run on both sides: in the sandbox to build modules, in the grader to compute
# what the known mistakes would output.


def _config(ns, **sizes):
    base = dict(vocab_size=11, block_size=16, d_model=4, n_heads=2, n_layers=1, d_ff=8, dropout=0.0)
    base.update(sizes)
    return ns.model.Config(**base)


def _attention(ns, sizes, state):
    module = ns.model.CausalSelfAttention(_config(ns, **sizes)).double()
    module.load_state_dict({k: v.clone() for k, v in state.items()}, strict=True)
    return module.eval()


def random_attention_state(g, sizes, scale=None):
    d = sizes["d_model"]
    scale = scale if scale is not None else 1.2 / math.sqrt(d)
    return {f"{name}.weight": torch.randn(d, d, generator=g, dtype=torch.float64) * scale for name in PROJECTIONS}


def _heads(x, h):
    B, T, d = x.shape
    return x.reshape(B, T, h, d // h).transpose(1, 2)


def _merged(y):
    B, h, T, dh = y.shape
    return y.transpose(1, 2).reshape(B, T, h * dh)


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
    return _merged(weights @ v) @ o_weight.T, weights


def _reference_parts(ref, inputs):
    """q, k, v (with the cache prepended) from the reference's projections."""
    module = _attention(ref, inputs["sizes"], inputs["state"])
    x = inputs["x"]
    with torch.no_grad():
        q, k, v = (module.split_heads(getattr(module, p)(x)) for p in ("q_proj", "k_proj", "v_proj"))
        new_k, new_v = k, v
        if inputs.get("past") is not None:
            k = torch.cat([inputs["past"][0], k], dim=2)
            v = torch.cat([inputs["past"][1], v], dim=2)
    return module, q, k, v, new_k, new_v


def _attention_mistakes(ref, inputs):
    """The reference's output, weights and cache, and the outputs of the classic wrong
    versions computed with the reference's own projections."""
    module, q, k, v, new_k, new_v = _reference_parts(ref, inputs)
    x, d, h = inputs["x"], inputs["sizes"]["d_model"], inputs["sizes"]["n_heads"]
    dh, o = d // h, inputs["state"]["o_proj.weight"]
    past = inputs.get("past")
    with torch.no_grad():
        right, _ = module(x, None if past is None else tuple(past), True)
        weights = module.last_attention
        root = 1 / math.sqrt(dh)
        out = lambda scale=root, **how: _masked_attention(q, k, v, o, scale, **how)[0]  # noqa: E731
        mistakes = [
            ("the scores are divided by d, the model width; divide by sqrt(d_h), the square root of "
             "one head's width", out(1 / d)),
            ("the scores are divided by d_h itself; divide by its square root, sqrt(d_h)", out(1 / dh)),
            ("the scores are not scaled: divide q·k by sqrt(d_h) before the softmax", out(1.0)),
            ("the scores are divided by sqrt(d), the root of the model width; use sqrt(d_h), one head's width",
             out(1 / math.sqrt(d))),
            ("the scores are multiplied by sqrt(d_h); divide by it", out(math.sqrt(dh))),
            ("there is no causal mask: each position attends to later positions too", out(mask="none")),
            ("the mask lets the next token through: hide every key after the query's own position",
             out(mask="next")),
            ("the softmax is taken over dim -2 (the queries); take it over the last axis (the keys)",
             out(softmax_dim=-2)),
            (FORMULA_MISTAKES["no_output_projection"],
             _masked_attention(q, k, v, torch.eye(d, dtype=o.dtype), root)[0]),
        ]
        if past is not None:
            joined = {"cache_after": (torch.cat([new_k, past[0]], 2), torch.cat([new_v, past[1]], 2)),
                      "keys_values_mixed": (torch.cat([past[1], new_k], 2), torch.cat([past[0], new_v], 2))}
            for label, (keys, values) in joined.items():
                mistakes.append((FORMULA_MISTAKES[label], _masked_attention(q, keys, values, o, root)[0]))
            alone = _masked_attention(q, new_k, new_v, o, root)[0]
            mistakes = [
                ("the cached keys/values (past_key_value) are ignored: the output is the same as without a cache",
                 alone),
                ("the causal mask is not shifted by the cache length: new token t sits at position T_past + t "
                 "and sees every cached key", out(mask="unshifted")),
            ] + mistakes
    return {"out": right, "weights": weights, "present": [k, v], "mistakes": mistakes}


class _CatLog(TorchFunctionMode):
    """Records every torch.cat in the student's forward: axis and input shapes, so
    that a cache joined along the wrong axis can be named even when it crashes."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") in ("cat", "concat", "concatenate"):
            try:
                tensors = args[0] if args else kwargs.get("tensors")
                dim = args[1] if len(args) > 1 else kwargs.get("dim", kwargs.get("axis", 0))
                self.calls.append({"dim": int(dim), "shapes": [list(t.shape) for t in tensors]})
            except Exception:  # noqa: BLE001 - logging must never change what the code does
                pass
        return func(*args, **kwargs)


def _wrong_cache_axis(calls, past_shape) -> "str | None":
    """The explanation when a cat that joins the cached keys used an axis other than time."""
    for call in calls:
        if len(call["shapes"]) == 2 and call["shapes"][0] == list(past_shape) and len(past_shape) == 4:
            axis = call["dim"] % 4
            if axis != 2:
                return (f"the cache is concatenated along {AXIS_NAMES[axis]} (dim {call['dim']}); keys and values "
                        f"are [B, h, T, d_h], so the cached and the new ones join along the time axis, dim 2")
    return None


def _present_shape_problem(shape, what, sizes, cats) -> "str | None":
    """What is wrong with the shape of the returned keys or values, given B, h, T_past, T, d_h."""
    B, h, past, n, dh = sizes
    if shape == [B, h, past + n, dh]:
        return None
    if past and past == n and shape == [B, h, n, dh]:
        return (f"the returned {what} hold either only the cached tokens or only this call's: present must hold "
                f"both, the cached ones and this call's new tokens: [B, h, T_past + T, d_h]")
    if past and shape == [B, h, n, dh]:
        return (f"the returned {what} hold only this call's tokens; present must hold the cached ones too: "
                f"[B, h, T_past + T, d_h]")
    if past and shape == [B, h, past, dh]:
        return (f"the returned {what} hold only the cached tokens; present must add this call's new tokens: "
                f"[B, h, T_past + T, d_h]")
    known = _wrong_cache_axis(cats, [B, h, past, dh]) if past else None
    return known or f"the returned {what} have shape {shape}; present is [B, h, T_past + T, d_h]"


# ------------------------------------------------------------- attention_init


def probe_projections(ns, sizes, more_heads=None):
    module = ns.model.CausalSelfAttention(_config(ns, **sizes))
    parts = {name: getattr(module, name, None) for name in PROJECTIONS}
    report = {
        "missing": [name for name, part in parts.items() if part is None],
        "with_bias": [name for name, part in parts.items()
                      if part is not None and getattr(part, "bias", None) is not None],
        "shapes": {name: list(part.weight.shape) if isinstance(getattr(part, "weight", None), torch.Tensor) else None
                   for name, part in parts.items()},
        "distinct": len({id(part) for part in parts.values()}),
        "parameters": sum(p.numel() for p in module.parameters()),
    }
    if more_heads:
        report["parameters_more_heads"] = sum(
            p.numel() for p in ns.model.CausalSelfAttention(_config(ns, **{**sizes, "n_heads": more_heads})).parameters())
    return report


def judge_projections(out, inputs, expected):
    d = inputs["sizes"]["d_model"]
    if out["missing"]:
        return (f"the attention has no attribute(s) {', '.join(out['missing'])}; q_proj, k_proj, v_proj "
                f"and o_proj are part of the contract")
    if out["with_bias"]:
        return (f"{', '.join(out['with_bias'])} {'has a bias' if len(out['with_bias']) == 1 else 'have a bias'}: "
                f"Q/K/V/O are linear maps without bias, nn.Linear(d, d, bias=False)")
    if out["distinct"] < 4:
        return "some of q_proj, k_proj, v_proj, o_proj are one object used twice: each needs its own weights"
    for name, shape in out["shapes"].items():
        if shape is None:
            return f"{name} has no weight tensor: each projection is an nn.Linear(d, d, bias=False)"
        if shape != [d, d]:
            return f"{name}.weight has shape {shape}, expected [{d}, {d}]: each projection maps d features to d"
    if out["parameters"] != 4 * d * d:
        return (f"the attention registers {out['parameters']} parameters; four bias-free d×d projections "
                f"give 4d² = {4 * d * d} for d={d}")
    if "parameters_more_heads" in out and out["parameters_more_heads"] != out["parameters"]:
        return "the parameter count changes with the number of heads; it should be 4d² whatever h is"
    return None


# ---------------------------------------------------------------- split_heads


def probe_split(ns, x, sizes):
    module = ns.model.CausalSelfAttention(_config(ns, **sizes)).double()
    return {"y": module.split_heads(x.clone())}


def _split_mistakes(x, h):
    B, T, d = x.shape
    dh = d // h
    return [
        ("the heads are split with the axes mixed up: view(B, h, T, d_h) regroups the numbers without moving "
         "them; view as [B, T, h, d_h] first, then swap T and h (transpose(1, 2))", x.reshape(B, h, T, dh)),
        ("head i takes every h-th feature (view(B, T, d_h, h)); head i must own the contiguous features "
         "i*d_h .. (i+1)*d_h - 1", x.reshape(B, T, dh, h).permute(0, 3, 1, 2)),
    ]


def judge_split_shape(out, inputs, expected):
    B, T, d = inputs["x"].shape
    h = inputs["sizes"]["n_heads"]
    y = out["y"]
    if isinstance(y, torch.Tensor) and list(y.shape) == [B, T, h, d // h]:
        return (f"split_heads returns [B, T, h, d_h] = {list(y.shape)}; the heads axis comes second: "
                f"[B, h, T, d_h] (transpose T and h)")
    return shape_problem(y, (B, h, T, d // h), "split_heads(x)")


def judge_split_values(out, inputs, expected):
    x, h = inputs["x"], inputs["sizes"]["n_heads"]
    if problem := judge_split_shape(out, inputs, expected):
        return problem
    right = _heads(x, h)
    if matches(out["y"], right, atol=0, rtol=0):
        return None
    known = first_diagnosis(out["y"], _split_mistakes(x, h), atol=0, rtol=0)
    return known or (compare(out["y"], right, "split_heads(x)", atol=0, rtol=0)
                     + ": head i must own features i*d_h .. (i+1)*d_h - 1 of every position")


# ---------------------------------------------------------------- merge_heads


def probe_merge(ns, y, sizes):
    module = ns.model.CausalSelfAttention(_config(ns, **sizes)).double()
    return {"x": module.merge_heads(y.clone())}


def _merge_mistakes(y):
    B, h, T, dh = y.shape
    return [
        ("merge_heads reshapes [B, h, T, d_h] straight to [B, T, d] without moving the heads axis back: "
         "transpose h and T first (transpose(1, 2)), then reshape", y.reshape(B, T, h * dh)),
        ("the heads' features are interleaved (feature j of head i lands at j*h + i); head i's features "
         "belong together at i*d_h .. (i+1)*d_h - 1", y.permute(0, 2, 3, 1).reshape(B, T, h * dh)),
    ]


def judge_merge_shape(out, inputs, expected):
    B, h, T, dh = inputs["y"].shape
    return shape_problem(out["x"], (B, T, h * dh), "merge_heads(y)")


def judge_merge_values(out, inputs, expected):
    if problem := judge_merge_shape(out, inputs, expected):
        return problem
    y = inputs["y"]
    right = _merged(y)
    if matches(out["x"], right, atol=0, rtol=0):
        return None
    known = first_diagnosis(out["x"], _merge_mistakes(y), atol=0, rtol=0)
    return known or (compare(out["x"], right, "merge_heads(y)", atol=0, rtol=0)
                     + ": head i's d_h features go to positions i*d_h .. (i+1)*d_h - 1")


def probe_merge_inverse(ns, x, sizes):
    module = ns.model.CausalSelfAttention(_config(ns, **sizes)).double()
    heads = module.split_heads(x.clone())
    return {"round_trip": module.merge_heads(heads), "again": module.split_heads(module.merge_heads(heads.clone()))}


def judge_merge_inverse(out, inputs, expected):
    x = inputs["x"]
    if problem := shape_problem(out["round_trip"], x.shape, "merge_heads(split_heads(x))"):
        return problem
    if not torch.equal(out["round_trip"], x):
        return ("merge_heads(split_heads(x)) is not x: merge_heads must undo split_heads exactly "
                "(transpose h and T back, then reshape to [B, T, d])")
    if not torch.equal(out["again"], _heads(x, inputs["sizes"]["n_heads"])):
        return "split_heads(merge_heads(y)) is not y: merge_heads must be the exact inverse of split_heads"
    return None


# ------------------------------------------------------------------ attention


def probe_attention(ns, x, sizes, state, past=None):
    module = _attention(ns, sizes, state)
    cache = lambda: None if past is None else tuple(t.clone() for t in past)  # noqa: E731
    log = _CatLog()
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
            return {"error": type(error).__name__, "cats": log.calls,
                    "past_shape": list(past[0].shape)}
    return {"out": out, "present": present, "weights": weights,
            "cached_out": cached_out, "cached_present": cached_present, "cached_weights": cached_weights}


def judge_attention_shapes(out, inputs, expected):
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


def weights_diagnosis(w, past: int = 0, what: str = "self.last_attention") -> "str | None":
    """None when w [B, h, T, past + T] holds causal softmax rows; else what is wrong."""
    if not isinstance(w, torch.Tensor) or w.dim() != 4:
        return f"{what} should be a [B, h, T, T_past + T] tensor of softmax weights"
    T, S = w.shape[-2], w.shape[-1]
    w = w.double()
    query_pos = torch.arange(past, past + T).unsqueeze(1)
    key_pos = torch.arange(S).unsqueeze(0)
    diagonal = (key_pos == query_pos).expand_as(w)
    if torch.isnan(w).any():
        if past == 0 and torch.isnan(w[..., 0, :]).all():
            return (f"{what} is NaN in the first row: the mask also hides the diagonal, so position 0 has no "
                    f"key left; a position must attend to itself (hide only the keys after it)")
        return f"{what} contains NaN"
    if torch.isinf(w).any():
        return (f"{what} contains -inf: it holds the masked scores, not the softmax weights; keep the weights "
                f"after the softmax")
    if (w < -1e-12).any():
        return f"{what} has negative entries; softmax weights are never negative (does it hold the scores?)"
    rows_ok = torch.allclose(w.sum(-1), torch.ones_like(w.sum(-1)), atol=1e-9, rtol=0)
    if not rows_ok:
        if T == S and torch.allclose(w.sum(-2), torch.ones_like(w.sum(-2)), atol=1e-9, rtol=0):
            return ("each row of weights should sum to 1, but the columns do: the softmax is taken over dim -2 "
                    "(the queries); take it over the last axis (the keys)")
        return f"each row of {what} (one query's weights over the keys) should sum to 1"
    later = w[(key_pos > query_pos).expand_as(w)]
    further = w[(key_pos > query_pos + 1).expand_as(w)]
    # keys a query may see but an unshifted mask (key > t) would hide, its own excepted: t < key < past + t
    unshifted = (key_pos < query_pos) & (key_pos > torch.arange(T).unsqueeze(1))
    if past > 0 and unshifted.any() and (w[unshifted.expand_as(w)].abs() < 1e-15).all():
        return ("the causal mask is not shifted by the cache length: new token t sits at position T_past + t "
                "and may attend to every cached key and to itself, but the weights hide them")
    seen_diagonal = w[(diagonal & (query_pos > 0)).expand_as(w)]
    if seen_diagonal.numel() and (seen_diagonal.abs() < 1e-15).all():
        if past > 0 and not unshifted.any():
            return ("the new token gets zero weight on its own key: either the mask also hides the diagonal, or "
                    "it is not shifted by the cache length (new token t sits at position T_past + t and sees "
                    "every cached key and itself)")
        return ("the weights on the diagonal are zero: the mask also hides the diagonal; a position must "
                "attend to itself (hide only the keys after it)")
    if later.numel() and (later.abs() > 1e-12).any():
        if further.numel() and (further.abs() <= 1e-12).all():
            return ("the mask lets the next token through: each position also attends to the one after it "
                    "(an off-by-one mask offset); hide every key after the query's own position")
        if further.numel():
            return ("the weights above the diagonal are not zero: there is no causal mask, so a position attends "
                    "to later positions")
        return ("a position attends to the one after it: the causal mask must hide every key after the "
                "query's own position")
    return None


def judge_attention_weights(out, inputs, expected):
    B, T, _ = inputs["x"].shape
    h = inputs["sizes"]["n_heads"]
    if problem := shape_problem(out["weights"], (B, h, T, T), "self.last_attention"):
        return problem
    return weights_diagnosis(out["weights"])


def probe_attention_output(ns, x, sizes, state):
    module = _attention(ns, sizes, state)
    with torch.no_grad():
        return {"y": module(x.clone())[0]}


def judge_attention_causal(out, inputs, expected):
    return causal_diagnosis(out["x"]["y"], out["changed"]["y"], inputs["_first_changed"], "attention")


def _causal_inputs(g, sizes):
    B, T, d = 2, 6, sizes["d_model"]
    x = torch.randn(B, T, d, generator=g, dtype=torch.float64)
    changed = x.clone()
    changed[:, 4:] = torch.randn(B, T - 4, d, generator=g, dtype=torch.float64)
    return {"x": x, "changed": changed, "_first_changed": 4, "sizes": sizes, "state": random_attention_state(g, sizes)}


# ------------------------------------------------------------------- the cache


def probe_attention_cache(ns, x, sizes, state, chunks, part, earlier):
    module = _attention(ns, sizes, state)
    with torch.no_grad():
        if part == "full":
            return {"full": module(x.clone())[0]}
        steps, past, start = [], None, 0
        for n in chunks:
            piece = x[:, start:start + n].clone()
            log = _CatLog()
            try:
                with log:
                    out, present = module(piece, past, True)
            except NotImplementedError:
                raise
            except Exception as error:  # noqa: BLE001 - the judge names the mistake behind the crash
                return {"steps": steps, "error": type(error).__name__,
                        "cats": log.calls, "past_shape": list(past[0].shape) if past else None}
            weights = module.last_attention
            alone, _ = module(piece)
            steps.append({"out": out, "alone": alone, "weights": weights, "cats": log.calls,
                          "present_shapes": [list(t.shape) for t in present]
                          if isinstance(present, (tuple, list)) and len(present) == 2
                          and all(isinstance(t, torch.Tensor) for t in present) else None})
            past = tuple(present) if isinstance(present, (tuple, list)) else present
            start += n
    return {"steps": steps}


def judge_attention_cache(out, inputs, expected):
    x, chunks = inputs["x"], inputs["chunks"]
    B, _, d = x.shape
    h = inputs["sizes"]["n_heads"]
    dh = d // h
    calls = "in one call per token" if all(n == 1 for n in chunks) else f"in chunks of {', '.join(map(str, chunks))}"
    if "error" in out:
        known = _wrong_cache_axis(out["cats"], out["past_shape"]) if out["past_shape"] else None
        raised = exception_name({"type": out["error"]})
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
            if problem := _present_shape_problem(shape, what, (B, h, past, n, dh), step["cats"]):
                return f"{problem} (after {past + n} tokens, {calls})"
        if problem := shape_problem(step["weights"], (B, h, n, past + n), "self.last_attention"):
            return f"{problem} after a call with {past} cached tokens: the weights are [B, h, T, T_past + T]"
        if problem := weights_diagnosis(step["weights"], past):
            return f"{problem} (in a call with {past} cached tokens)"
        past += n
    stepwise = torch.cat([step["out"] for step in steps], dim=1)
    if problem := compare(stepwise, out["full"], "the cached output", atol=1e-9, rtol=1e-7):
        return f"running attention {calls} through the KV cache differs from one full call: {problem}"
    return None


def _cache_inputs(g, chunks, sizes=WIDE):
    T = sum(chunks)
    return {"x": torch.randn(2, T, sizes["d_model"], generator=g, dtype=torch.float64), "sizes": sizes,
            "state": random_attention_state(g, sizes), "chunks": list(chunks)}


# ------------------------------------------------------- the lesson's formula
# Public: the module's own projections, split_heads and merge_heads composed as the
# lesson writes attention, o_proj(merge(softmax(mask(q kᵀ · scale)) v)), with the right
# scale and mask and with each classic wrong one. The judge says which the output is.

FORMULA_MISTAKES = {
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


def _formula_variants(d, dh):
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


def probe_attention_formula(ns, x, sizes, state, past=None):
    module = _attention(ns, sizes, state)
    cache = lambda: None if past is None else tuple(t.clone() for t in past)  # noqa: E731
    d, h = sizes["d_model"], sizes["n_heads"]
    with torch.no_grad():
        log = _CatLog()
        try:
            with log:
                out, _ = module(x.clone(), cache(), True)
        except NotImplementedError:
            raise
        except Exception as error:  # noqa: BLE001 - with a cache, the judge names the mistake behind a crash
            if past is None:
                raise
            return {"error": type(error).__name__, "cats": log.calls, "past_shape": list(past[0].shape)}
        weights = module.last_attention
        q, k, v = (module.split_heads(getattr(module, p)(x.clone())) for p in ("q_proj", "k_proj", "v_proj"))
        composed = {}
        for label, (scale, mask, axis, arrangement, project) in _formula_variants(d, d // h).items():
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
            merged = module.merge_heads(w @ values)
            composed[label] = module.o_proj(merged) if project else merged
            if label == "right":
                composed["right_weights"] = w
    return {"out": out, "weights": weights, "composed": composed}


def judge_attention_formula(out, inputs, expected):
    if "error" in out:
        return judge_attention_reference(out, inputs, expected)
    composed = out["composed"]
    right = composed["right"]
    past = "" if inputs.get("past") is None else f" (with {inputs['past'][0].shape[2]} cached tokens)"
    if compare(out["out"], right, atol=1e-9, rtol=1e-7) is None:
        if problem := compare(out["weights"], composed["right_weights"], "self.last_attention", atol=1e-9, rtol=1e-7):
            return f"{problem}: keep the softmax weights (after masking, before dropout) in self.last_attention{past}"
        return None
    known = first_diagnosis(out["out"], [(text, composed[label]) for label, text in FORMULA_MISTAKES.items()
                                         if label in composed], atol=1e-7, rtol=1e-6)
    if known:
        return known + past
    cached = 0 if inputs.get("past") is None else inputs["past"][0].shape[2]
    if isinstance(out["weights"], torch.Tensor) and (weights := weights_diagnosis(out["weights"], cached)):
        return weights + past
    problem = compare(out["out"], right, "the attention output", atol=1e-9, rtol=1e-7)
    return (f"{problem}{past}: the output is not o_proj(merge_heads(softmax(mask(q kᵀ / sqrt(d_h))) v)) "
            f"computed with your own projections and head functions")


# ---------------------------------------------------------- against the reference


def judge_attention_reference(out, inputs, expected):
    past = 0 if inputs.get("past") is None else inputs["past"][0].shape[2]
    if "error" in out:
        known = _wrong_cache_axis(out["cats"], out["past_shape"])
        return known or (f"calling forward with a past_key_value raised {exception_name({'type': out['error']})}: "
                          f"the cached keys and values [B, h, T_past, d_h] could not be joined with the new ones")
    mismatch = compare(out["cached_out"], expected["out"], "the attention output", atol=1e-9, rtol=1e-7)
    if mismatch:
        known = first_diagnosis(out["cached_out"], expected["mistakes"], atol=1e-7, rtol=1e-6)
        return known or weights_diagnosis(out["cached_weights"], past) or mismatch
    present = out["cached_present"]
    if not isinstance(present, list) or len(present) != 2:
        return "with use_cache=True forward should return present = (keys, values)"
    B, T, d = inputs["x"].shape
    h = inputs["sizes"]["n_heads"]
    dh = d // h
    for tensor, wanted, what in zip(present, expected["present"], ("keys", "values")):
        if isinstance(tensor, torch.Tensor) and (
                problem := _present_shape_problem(list(tensor.shape), what, (B, h, past, T, dh), [])):
            return problem
        if problem := compare(tensor, wanted, f"the returned {what}", atol=1e-9, rtol=1e-7):
            return f"{problem}: present is the cached and the new {what}, joined along time"
    if problem := compare(out["cached_weights"], expected["weights"], "self.last_attention", atol=1e-9, rtol=1e-7):
        return f"{problem}: keep the softmax weights (after masking, before dropout) in self.last_attention"
    return None


def _reference_inputs(g, past_length=0):
    sizes, B, T = WIDE, 2, 5
    d, h = sizes["d_model"], sizes["n_heads"]
    inputs = {"x": torch.randn(B, T, d, generator=g, dtype=torch.float64), "sizes": sizes,
              "state": random_attention_state(g, sizes)}
    if past_length:
        inputs["past"] = [torch.randn(B, h, past_length, d // h, generator=g, dtype=torch.float64) * 1.5
                          for _ in range(2)]
    return inputs


# ----------------------------------------------------------------------- checks

CHECKS = [
    check("ch04.attention_init.projections", "attention_init", 2,
          "q_proj, k_proj, v_proj, o_proj are separate d×d linear maps without bias: 4d² = 64 parameters for d=4",
          probe_projections, judge_projections, inputs=lambda g: {"sizes": WALK_THROUGH}),
    check("ch04.attention_init.parameter_ledger_wide", "attention_init", 1,
          "d=64: 4d² = 16,384 parameters, for h=4 and for h=8 alike",
          probe_projections, judge_projections,
          inputs=lambda g: {"sizes": {"d_model": 64, "n_heads": 4}, "more_heads": 8}, hidden=True),
    check("ch04.split_heads.shape", "split_heads", 1,
          "B=2, T=3, d=4, h=2: split_heads gives [2, 2, 3, 2] = [B, h, T, d_h]",
          probe_split, judge_split_shape,
          inputs=lambda g: {"x": torch.randn(2, 3, 4, generator=g, dtype=torch.float64), "sizes": WALK_THROUGH}),
    check("ch04.split_heads.head_features", "split_heads", 2,
          "head i owns features i*d_h .. (i+1)*d_h - 1 of every position (d=12, h=3)",
          probe_split, judge_split_values,
          inputs=lambda g: {"x": torch.arange(2 * 5 * 12, dtype=torch.float64).reshape(2, 5, 12), "sizes": WIDE}),
    check("ch04.split_heads.matches_reference", "split_heads", 1,
          "random [B, T, d] inputs are split like the reference (d=8, h=4)",
          probe_split, judge_split_values,
          inputs=lambda g: {"x": torch.randn(3, 7, 8, generator=g, dtype=torch.float64),
                            "sizes": {"d_model": 8, "n_heads": 4}}, hidden=True),
    check("ch04.merge_heads.shape", "merge_heads", 1,
          "B=2, h=2, T=3, d_h=2: merge_heads gives [2, 3, 4] = [B, T, d]",
          probe_merge, judge_merge_shape,
          inputs=lambda g: {"y": torch.randn(2, 2, 3, 2, generator=g, dtype=torch.float64), "sizes": WALK_THROUGH}),
    check("ch04.merge_heads.head_features", "merge_heads", 2,
          "head i's features land at i*d_h .. (i+1)*d_h - 1 of each position (d=12, h=3)",
          probe_merge, judge_merge_values,
          inputs=lambda g: {"y": torch.arange(2 * 3 * 5 * 4, dtype=torch.float64).reshape(2, 3, 5, 4), "sizes": WIDE}),
    check("ch04.merge_heads.inverse_of_split", "merge_heads", 1,
          "merge_heads(split_heads(x)) == x and split_heads(merge_heads(y)) == y",
          probe_merge_inverse, judge_merge_inverse,
          inputs=lambda g: {"x": torch.randn(2, 5, 12, generator=g, dtype=torch.float64), "sizes": WIDE}),
    check("ch04.attention.shapes", "attention", 2,
          "B=2, T=3, d=4, h=2: output [2, 3, 4], weights [2, 2, 3, 3], cached keys/values [2, 2, 3, 2]",
          probe_attention, judge_attention_shapes,
          inputs=lambda g: {"x": torch.randn(2, 3, 4, generator=g, dtype=torch.float64), "sizes": WALK_THROUGH,
                            "state": random_attention_state(g, WALK_THROUGH)}),
    check("ch04.attention.causal_softmax_weights", "attention", 3,
          "each row of the weights sums to 1 and is zero above the diagonal, never on it",
          probe_attention, judge_attention_weights,
          inputs=lambda g: {"x": torch.randn(2, 5, 4, generator=g, dtype=torch.float64), "sizes": WALK_THROUGH,
                            "state": random_attention_state(g, WALK_THROUGH)}),
    check("ch04.attention.causal_invariance", "attention", 2,
          "changing tokens 4.. leaves the outputs at positions 0..3 unchanged",
          probe_attention_output, judge_attention_causal, inputs=lambda g: _causal_inputs(g, WALK_THROUGH),
          separately=("x", "changed")),
    check("ch04.attention.cache_consistent", "attention", 2,
          "calls of 2, 1 and 3 tokens through the KV cache equal one full call; present grows to [B, h, 6, d_h]",
          probe_attention_cache, judge_attention_cache, inputs=lambda g: _cache_inputs(g, (2, 1, 3)),
          parts=("full", "steps")),
    check("ch04.attention.cache_one_token_at_a_time", "attention", 2,
          "six one-token calls through the KV cache equal one full call",
          probe_attention_cache, judge_attention_cache, inputs=lambda g: _cache_inputs(g, (1,) * 6),
          parts=("full", "steps")),
    check("ch04.attention.formula", "attention", 2,
          "d=12, h=3: the output is o_proj(merge_heads(softmax(mask(q kᵀ / sqrt(d_h))) v)) of your own parts",
          probe_attention_formula, judge_attention_formula, inputs=lambda g: _reference_inputs(g)),
    check("ch04.attention.formula_with_cache", "attention", 2,
          "with 4 cached tokens the output is the same formula over [cached keys, new keys]",
          probe_attention_formula, judge_attention_formula, inputs=lambda g: _reference_inputs(g, past_length=4)),
    check("ch04.attention.matches_reference", "attention", 3,
          "random float64 weights and inputs (d=12, h=3) match the reference: output, weights, cache",
          probe_attention, judge_attention_reference, inputs=lambda g: _reference_inputs(g),
          expect=_attention_mistakes, hidden=True),
    check("ch04.attention.matches_reference_with_cache", "attention", 2,
          "with a random past_key_value (4 cached tokens) the output, weights and present match the reference",
          probe_attention, judge_attention_reference, inputs=lambda g: _reference_inputs(g, past_length=4),
          expect=_attention_mistakes, hidden=True),
]
