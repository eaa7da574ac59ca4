"""MicroGPT.forward: one token at one position through the whole model.

The probes build a small MicroGPT with a fixed seed and return its weight tables. The
judges compare with what that network computes, and with what its classic mistakes (a
final norm, no position row, only the first layer, ...) compute, to name the one a
submission reproduces: the kit's torch float64 twin of the network gives those
(hidden/oracles.py), on the public checks' fixed inputs as data (grader/checks/facts.py).
Here too is "no torch or numpy anywhere in micro.py" (pure_python).
"""

from __future__ import annotations

import re
import types

from grader.checks._api import check
from grader.checks.ch00_micro.common import (ANA, NAMES, NEAR, SMALL, TOL, WEIGHTS_CHANGED, all_close, data_of,
                                             micro_tables, model_of, off_by, shape_of, task_of, weights_changed)
from grader.checks.facts import known_facts

TASKS = [task_of("micro_forward", "MicroGPT.forward", "forward: one token at one position")]


FORWARD_FLAWS = {
    "final_norm": "the features are normalised before the LM head: this model has no final norm",
    "no_embedding_norm": "the embedding sum is not normalised: RMSNorm(token row + position row) comes first",
    "no_position": "the position row is missing: x = WTE[token] + WPE[pos]",
    "first_layer_only": "only the first layer runs: apply self.block(layer, x) for every layer",
    "tied_head": "the logits are read from WTE, a head tied to the token table as some well-known GPTs tie it; "
                 "this model has its own LMHead: logit[v] = dot(LMHead[v], x)",
}


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
       probe=probe_forward,
       inputs=lambda g: {"sizes": dict(NAMES), "seed": 0, "ids": ANA[:4], "tables": False})
def ana_walk_through(out, inputs, expected):
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


def judge_forward(out, inputs, facts, reveal):
    """facts: the network's logits on inputs["ids"] ("logits") and each flaw's of
    FORWARD_FLAWS ("flaws")."""
    sizes, ids = inputs["sizes"], inputs["ids"]
    V = sizes["vocab_size"]
    if shape_of(out["logits"]) != [len(ids), V]:
        shape = shape_of(out["logits"])
        if shape == [len(ids), sizes["n_embd"]]:
            return (f"forward returned E = {sizes['n_embd']} values: apply the LM head, "
                    f"logit[v] = dot(LMHead[v], x), to get V = {V} logits")
        return f"forward should return V = {V} logits per call, got shape {shape}"
    want = facts["logits"]
    if all_close(out["logits"], want, TOL):
        return None
    for flaw, text in FORWARD_FLAWS.items():
        if all_close(out["logits"], facts["flaws"][flaw], NEAR):
            return text
    worst = max(range(len(ids)), key=lambda p: off_by(out["logits"][p], want[p]))
    return (f"the logits are off by up to {off_by(out['logits'], want):.3g} (worst at position {worst})"
            + ("; forward is RMSNorm(WTE[token] + WPE[pos]), every layer's block, then the LM head"
               if reveal else ""))


@check("formula", 3,
       "2 layers, 5 positions: logits = LMHead · layers(RMSNorm(WTE[token] + WPE[pos])), no final norm",
       probe=probe_forward,
       inputs=lambda g: {"sizes": dict(SMALL, n_layer=2), "seed": 4, "spread": 0.5, "ids": [6, 2, 0, 5, 2]})
def formula(out, inputs, expected):
    facts = known_facts(inputs)
    if weights_changed(out, facts):
        return WEIGHTS_CHANGED
    return judge_forward(out, inputs, facts, True)


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
            # The student's own functions only: a certified part's code is not readable.
            if getattr(function, "__module__", "") != ns.micro.__name__:
                continue
            code = getattr(function, "__code__", None)
            if isinstance(code, types.CodeType):
                visit(code, f"{getattr(function, '__qualname__', attr)}")
    return {"found": sorted(set(found))}


@check("pure_python", 1, "micro.py uses no torch or numpy: every number is a Value",
       probe=probe_pure_python, inputs=lambda g: {"sizes": dict(SMALL), "seed": 0}, gated_by="formula")
def pure_python(out, inputs, expected):
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
        entry = entry if isinstance(entry, str) else ""  # the probe finds names; anything else says nothing
        match = re.fullmatch(r"(torch|numpy) \(in ([\w.]+)\)", entry)
        if match and match[2] in known:
            said.append(entry)
        else:
            said.extend(name for name in ("torch", "numpy") if name in entry)
    return sorted(set(said)) or ["a library other than math and random"]
