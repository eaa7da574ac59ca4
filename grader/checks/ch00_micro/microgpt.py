"""MicroGPT.block and MicroGPT.forward: the pre-norm layer with its KV cache, and one token
at one position through the whole model.

The probes build a small MicroGPT with a fixed seed and return its weight tables, so a
judge can run the same network as a "twin" in torch float64, written from the lesson's
equations for a whole sequence at once (a causal mask where micro.py has its cache): the
right one, and the classic mistakes (no residual, a final norm, no position row, ...) to
name the one a submission reproduces. Hidden checks build the same model with the
reference. Here too is "no torch or numpy anywhere in micro.py" (pure_python).
"""

from __future__ import annotations

import math
import random
import re
import types

import torch
import torch.nn.functional as F

from grader.checks._api import check, exception_name
from grader.checks.course import EPS
from grader.checks.ch00_micro.common import (ANA, NAMES, NEAR, SMALL, TOL, all_close, data_of, flat_of, model_of, off_by,
                                             rms_of, shape_of, micro_tables, task_of)

TASKS = [
    task_of("micro_block", "MicroGPT.block", "the pre-norm layer with its KV cache"),
    task_of("micro_forward", "MicroGPT.forward", "forward: one token at one position"),
]


# ------------------------------------------------- the model: a torch float64 twin
#
# micro.py runs one position at a time and remembers the earlier positions' keys and
# values in a cache. The twin runs the lesson's equations on a whole sequence at once
# instead, as chapters 04-05 do: a [P, E] tensor per layer, with a causal mask standing
# in for the cache (position p attends to positions 0..p, exactly what the cache holds
# when p arrives). Both give the same numbers; the twin is torch, the model is scalars.


def _f64(rows) -> torch.Tensor:
    return torch.as_tensor(rows, dtype=torch.float64)


def _unit_rms(x: torch.Tensor) -> torch.Tensor:
    """RMSNorm without a gain, over the last dimension: x / sqrt(mean(x^2) + eps)."""
    return x * torch.rsqrt(x.square().mean(dim=-1, keepdim=True) + EPS)


def _twin_block(tables, layer, x, n_head, flaw=None):
    """Layer `layer` on every position of a sequence at once: x is [P, E]; returns the
    layer's output [P, E] and each head's attention weights [H, P, P] (row p is zero past
    p). The lesson's pre-norm layer, or one known flaw of it."""
    weight = lambda name: _f64(tables[f"layer{layer}.{name}"])  # noqa: E731
    P, E = x.shape
    d = E // n_head
    normed = x if flaw == "no_attention_norm" else _unit_rms(x)
    # [P, E] -> [H, P, d]: head i owns features i*d .. (i+1)*d - 1
    split = lambda table: F.linear(normed, weight(table)).reshape(P, n_head, d).permute(1, 0, 2)  # noqa: E731
    queries, keys, vals = split("wq"), split("wk"), split("wv")
    visible = torch.eye(P, dtype=torch.bool) if flaw == "no_cache" else torch.ones(P, P, dtype=torch.bool).tril()
    logits = torch.einsum("hpd,htd->hpt", queries, keys) * d ** -0.5
    attention = logits.masked_fill(~visible, -math.inf).softmax(dim=-1)
    mixed = torch.einsum("hpt,htd->phd", attention, vals).reshape(P, E)
    after_attention = F.linear(mixed, weight("wo"))
    if flaw != "no_attention_residual":
        after_attention = after_attention + x
    mlp_input = x if flaw == "mlp_reads_input" else after_attention
    if flaw != "no_mlp_norm":
        mlp_input = _unit_rms(mlp_input)
    expanded = F.linear(mlp_input, weight("fc1"))
    mlp = F.linear(expanded if flaw == "no_relu" else F.relu(expanded), weight("fc2"))
    out = mlp if flaw == "no_mlp_residual" else mlp + after_attention
    return (_unit_rms(out) if flaw == "output_normalised" else out), attention


_BLOCK_FLAWS = {
    "no_attention_residual": "the attention residual is missing: x = x + WO(concat of the heads)",
    "no_mlp_residual": "the MLP residual is missing: x = x + FC2(relu(FC1(RMSNorm(x))))",
    "no_attention_norm": "the attention reads x itself; it reads RMSNorm(x) (pre-norm)",
    "no_mlp_norm": "the MLP reads x itself; it reads RMSNorm(x) (pre-norm)",
    "mlp_reads_input": "the MLP branch reads the layer's input; it reads x after the attention residual",
    "no_relu": "there is no relu between FC1 and FC2",
    "output_normalised": "the layer's output is normalised again: pre-norm adds to the raw residual stream",
    "no_cache": "each position attends only to itself: append k and v to this layer's cache and attend over all of it",
}


def _twin_logits(tables, sizes, ids, flaw=None):
    """The logits [P][V] of a whole sequence of ids: RMSNorm(WTE[ids] + WPE[0..P-1]),
    every layer, the LM head (or one known flaw of that)."""
    x = _f64(tables["wte"])[list(ids)]
    if flaw != "no_position":
        x = x + _f64(tables["wpe"])[: len(ids)]
    if flaw != "no_embedding_norm":
        x = _unit_rms(x)
    for layer in range(1 if flaw == "first_layer_only" else sizes["n_layer"]):
        x, _ = _twin_block(tables, layer, x, sizes["n_head"])
    if flaw == "final_norm":
        x = _unit_rms(x)
    return F.linear(x, _f64(tables["lm_head"])).tolist()


_FORWARD_FLAWS = {
    "final_norm": "the features are normalised before the LM head: this model has no final norm",
    "no_embedding_norm": "the embedding sum is not normalised: RMSNorm(token row + position row) comes first",
    "no_position": "the position row is missing: x = WTE[token] + WPE[pos]",
    "first_layer_only": "only the first layer runs: apply self.block(layer, x) for every layer",
}


# ------------------------------------------------------------------ the layer


def run_block(micro, sizes, seed, spread, xs, zero):
    model = model_of(micro, sizes, seed, spread)
    for name in zero:
        for row in model.table(0, name):
            for p in row:
                p.data = 0.0
    model.start_sequence()
    ys, rows = [], []
    for pos, x in enumerate(xs):
        try:
            y = model.block(0, [micro.Value(v) for v in x])
        except NotImplementedError:
            raise
        except Exception as error:  # noqa: BLE001 - the judge says what the layer was doing when it failed
            if type(error).__name__ == "ForbiddenCall":
                raise
            cached = model.cache[0] if isinstance(model.cache, (list, tuple)) and model.cache else {}
            keys = cached.get("keys") if isinstance(cached, dict) else None
            return {"raised": type(error).__name__, "position": pos,
                    "cached_keys": len(keys) if isinstance(keys, list) else None}
        ys.append(data_of(y, "block's result"))
        rows.append([[w if isinstance(w, float) else None for w in head] for head in model.last_attention[0]])
    cache = model.cache_length()
    model.finish_sequence()
    return {"y": ys, "rows": rows, "cache": cache, "tables": micro_tables(model)}


def probe_block(ns, sizes, seed, spread, xs, zero=()):
    return run_block(ns.micro, sizes, seed, spread, xs, zero)


def _block_twin(tables, sizes, xs, flaw=None):
    """Layer 0 on the positions xs in order: the outputs [P][E], and per position the
    attention rows that position has, [P][H][p + 1]."""
    y, attention = _twin_block(tables, 0, _f64(xs), sizes["n_head"], flaw)
    rows = [[attention[head, p, : p + 1].tolist() for head in range(sizes["n_head"])] for p in range(len(xs))]
    return y.tolist(), rows


def block_raised(out) -> "str | None":
    """A sentence for a layer that raised: where in the sequence, and what the cache held."""
    if "raised" not in out:
        return None
    kind, pos = exception_name({"type": out["raised"]}), out["position"]
    if out.get("cached_keys") == pos:
        return (f"at position {pos} the layer raised {kind} with no key of its own in the cache yet: it attends "
                f"before appending this position's k and v, so at position 0 there is nothing to attend to; append "
                f"k and v to the cache first, then attend (a position sees itself)")
    return f"the layer raised {kind} at position {pos} (the cache starts empty at position 0)"


@check("zero_branch_identity", 2,
       "with WO and FC2 zero the layer returns its input exactly (residuals, no norm on the output)",
       task="micro_block", probe=probe_block, inputs=lambda g: {**block_inputs(3, 3), "zero": ["wo", "fc2"]})
def judge_block_zero_branch(out, inputs, expected):
    if problem := block_raised(out):
        return problem
    xs = inputs["xs"]
    if shape_of(out["y"]) != shape_of(xs):
        return f"the layer should return one value per feature: {shape_of(xs)[-1]} in, got shape {shape_of(out['y'])}"
    if out["y"] == xs or all_close(out["y"], xs, 1e-12):
        return None
    if all_close(out["y"], [[0.0] * len(x) for x in xs], 1e-12):
        return "with WO and FC2 zero the layer returns 0: the residual connections (x + ...) are missing"
    if all_close(out["y"], [rms_of(x) for x in xs], 1e-9):
        return "with WO and FC2 zero the output is RMSNorm(x): the layer's output must not be normalised"
    if all_close(out["y"], [[2 * v for v in x] for x in xs], 1e-12):
        return "with WO and FC2 zero the output is 2x: the residual is added twice"
    return "with WO and FC2 zero (both branches output 0) the layer must return its input exactly"


def judge_block(out, inputs, tables, reveal):
    if problem := block_raised(out):
        return problem
    xs, sizes = inputs["xs"], inputs["sizes"]
    if shape_of(out["y"]) != shape_of(xs):
        return f"the layer should return E = {sizes['n_embd']} values per position, got shape {shape_of(out['y'])}"
    want, rows = _block_twin(tables, sizes, xs)
    for pos, (got_rows, want_rows) in enumerate(zip(out["rows"], rows)):
        lengths = [len(r) for r in got_rows]
        if lengths != [pos + 1] * sizes["n_head"]:
            if lengths == [0] * sizes["n_head"]:
                return ("self.last_attention[layer][head] is not filled in: keep each head's weights as floats "
                        "([w.data for w in weights])")
            return (f"at position {pos} every head should attend over {pos + 1} cached positions, "
                    f"the attention rows have lengths {lengths}: append k and v to this layer's cache first")
    if out["cache"] != len(xs):
        return f"after {len(xs)} positions the cache should hold {len(xs)} keys, it holds {out['cache']}"
    if any(w is None for w in flat_of(out["rows"])):
        return ("self.last_attention[layer][head] should hold plain floats, the weights' .data "
                "([w.data for w in weights]), not Values")
    if all_close(out["y"], want, TOL) and all_close(out["rows"], rows, TOL):
        return None
    for flaw, text in _BLOCK_FLAWS.items():
        wrong, _ = _block_twin(tables, sizes, xs, flaw)
        if all_close(out["y"], wrong, NEAR):
            return text
    if all_close(out["y"], want, TOL):
        return "the outputs are right but self.last_attention does not hold each head's softmax weights"
    return (f"the layer's output is off by up to {off_by(out['y'], want):.3g}"
            + (" (h = RMSNorm(x); q, k, v; attend per head; x += WO(heads); x += FC2(relu(FC1(RMSNorm(x)))))"
               if reveal else ""))


@check("formula", 3,
       "3 positions, E = 8, 2 heads: outputs, cache and attention rows equal the pre-norm layer's formula",
       task="micro_block", probe=probe_block, inputs=lambda g: block_inputs(5, 3))
def judge_block_public(out, inputs, expected):
    return judge_block(out, inputs, out.get("tables"), True)


def block_inputs(seed, n, spread=0.5, sizes=SMALL):
    rng = random.Random(seed + 7)
    return {"sizes": dict(sizes), "seed": seed, "spread": spread,
            "xs": [[rng.gauss(0.0, 1.0) for _ in range(sizes["n_embd"])] for _ in range(n)]}


# ------------------------------------------------------------------- forward


def run_forward(micro, sizes, seed, spread, ids, tables=True):
    model = model_of(micro, sizes, seed, spread)
    model.start_sequence()
    logits = []
    for pos, token in enumerate(ids):
        logits.append(data_of(model.forward(token, pos), "forward's result"))
    rows = [[[float(w) for w in head] for head in layer] for layer in model.last_attention]
    cache = model.cache_length()
    model.finish_sequence()
    out = {"logits": logits, "rows": rows, "cache": cache, "params": len(model.params)}
    if tables:
        out["tables"] = micro_tables(model)
    return out


def probe_forward(ns, sizes, seed, ids, spread=None, tables=True):
    return run_forward(ns.micro, sizes, seed, spread, ids, tables)


@check("ana_walk_through", 2,
       "the names model has 4192 parameters; 'ana' = 5 ids, 4 scored positions: 27 logits each, "
       "and position 3 (target BOS) has 4 attention weights summing to 1",
       task="micro_forward", probe=probe_forward,
       inputs=lambda g: {"sizes": dict(NAMES), "seed": 0, "ids": ANA[:4], "tables": False})
def judge_forward_ana(out, inputs, expected):
    if out["params"] != 4192:
        return f"the names model (V=27, E=16, T=16, L=1, H=4) should have 4192 parameters, it has {out['params']}"
    lengths = {len(row) for row in out["logits"]}
    if lengths != {27}:
        n = sorted(lengths)[0]
        if n == 16:
            return ("forward returned 16 values: those are the E = 16 features; apply the LM head, "
                    "logit[v] = dot(LMHead[v], x), to get V = 27 logits")
        return f"forward should return V = 27 logits (one per vocabulary entry), got {n}"
    rows = out["rows"][0]
    if [len(r) for r in rows] != [4, 4, 4, 4]:
        return (f"at the last scored position of 'ana' (position 3, target BOS) every head should have 4 "
                f"attention weights, got {[len(r) for r in rows]}")
    if any(abs(sum(r) - 1.0) > 1e-9 for r in rows):
        return "the last position's attention rows should each sum to 1"
    if out["cache"] != 4:
        return f"after 4 positions the cache should hold 4 positions, it holds {out['cache']}"
    return None


def judge_forward(out, inputs, tables, reveal):
    sizes, ids = inputs["sizes"], inputs["ids"]
    V = sizes["vocab_size"]
    if shape_of(out["logits"]) != [len(ids), V]:
        shape = shape_of(out["logits"])
        if shape == [len(ids), sizes["n_embd"]]:
            return (f"forward returned E = {sizes['n_embd']} values: apply the LM head, "
                    f"logit[v] = dot(LMHead[v], x), to get V = {V} logits")
        return f"forward should return V = {V} logits per call, got shape {shape}"
    want = _twin_logits(tables, sizes, ids)
    if all_close(out["logits"], want, TOL):
        return None
    for flaw, text in _FORWARD_FLAWS.items():
        if all_close(out["logits"], _twin_logits(tables, sizes, ids, flaw), NEAR):
            return text
    worst = max(range(len(ids)), key=lambda p: off_by(out["logits"][p], want[p]))
    return (f"the logits are off by up to {off_by(out['logits'], want):.3g} (worst at position {worst})"
            + ("; forward is RMSNorm(WTE[token] + WPE[pos]), every layer's block, then the LM head"
               if reveal else ""))


@check("formula", 3,
       "2 layers, 5 positions: logits = LMHead · layers(RMSNorm(WTE[token] + WPE[pos])), no final norm",
       task="micro_forward", probe=probe_forward,
       inputs=lambda g: {"sizes": dict(SMALL, n_layer=2), "seed": 4, "spread": 0.5, "ids": [6, 2, 0, 5, 2]})
def judge_forward_public(out, inputs, expected):
    return judge_forward(out, inputs, out["tables"], True)


def probe_pure_python(ns, sizes, seed):
    model = model_of(ns.micro, sizes, seed)
    model.start_sequence()
    model.forward(0, 0)  # the stub raises here: 'not implemented', like every other check of the task
    model.finish_sequence()
    banned = ("torch", "numpy")
    found = []
    for name, value in vars(ns.micro).items():
        if isinstance(value, types.ModuleType):
            origin = value.__name__
        else:
            origin = getattr(value, "__module__", None) or ""
            origin = origin if isinstance(origin, str) else ""
        if origin.split(".")[0] in banned:
            found.append(f"{name} ({origin})")
    # Imports inside functions: the names a function's code (or a nested one) refers to.
    # The graded function is the student's here; the other graded parts are certified.
    seen = set()

    def visit(code, where):
        if id(code) in seen:
            return
        seen.add(id(code))
        for banned_name in banned:
            if banned_name in code.co_names:
                found.append(f"{banned_name} (in {where})")
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                visit(const, where)

    owners = [ns.micro] + [v for v in vars(ns.micro).values()
                           if isinstance(v, type) and getattr(v, "__module__", "") == ns.micro.__name__]
    for owner in owners:
        for attr, value in list(vars(owner).items()):
            function = getattr(value, "__func__", value)
            code = getattr(function, "__code__", None)
            if isinstance(code, types.CodeType) and getattr(function, "__module__", "") == ns.micro.__name__:
                visit(code, f"{getattr(function, '__qualname__', attr)}")
    return {"found": sorted(set(found))}


@check("pure_python", 1, "micro.py uses no torch or numpy: every number is a Value", task="micro_forward",
       probe=probe_pure_python, inputs=lambda g: {"sizes": dict(SMALL), "seed": 0})
def judge_pure_python(out, inputs, expected):
    if out["found"]:
        return (f"micro.py uses {', '.join(_where_banned(out['found']))}: chapter 00 is plain Python (math and "
                f"random only), every number a Value")
    return None


def _where_banned(found) -> list[str]:
    """The probe's findings in the grader's words: a banned library, and where, when the
    place is one of the tasks' functions (names in the submission are its own text)."""
    from grader.checks import catalogue

    known = {task.qualname for task in catalogue.tasks().values() if task.module == "micro"}
    said = []
    for entry in found:
        match = re.fullmatch(r"(torch|numpy) \(in ([\w.]+)\)", str(entry))
        if match and match[2] in known:
            said.append(str(entry))
        else:
            said.extend(name for name in ("torch", "numpy") if name in str(entry))
    return sorted(set(said)) or ["a library other than math and random"]
