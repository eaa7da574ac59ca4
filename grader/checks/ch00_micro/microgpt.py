"""MicroGPT.block and MicroGPT.forward: the pre-norm layer with its KV cache, and one token
at one position through the whole model.

The probes build a small MicroGPT with a fixed seed and return its weight tables. The
judges compare with what that network computes, and with what its classic mistakes (no
residual, a final norm, no position row, ...) compute, to name the one a submission
reproduces; for the layer, with every other choice of one or two of its parts
(BLOCK_PARTS), and where none fits, the attention weights say whether the difference
lies before them or after: the kit's torch float64 twin of the network gives those (hidden/oracles.py),
on the public checks' fixed inputs as data (grader/checks/facts.py). Here too is "no
torch or numpy anywhere in micro.py" (pure_python).
"""

from __future__ import annotations

import random
import re
import types

from grader.checks._api import check, exception_name
from grader.checks.ch00_micro.common import (ANA, NAMES, NEAR, SMALL, TOL, all_close, data_of, flat_of, model_of, off_by,
                                             same_tables, shape_of, micro_tables, tables_fingerprint, task_of)
from grader.checks.facts import known_facts

TASKS = [
    task_of("micro_block", "MicroGPT.block", "the pre-norm layer with its KV cache"),
    task_of("micro_forward", "MicroGPT.forward", "forward: one token at one position"),
]


BLOCK_FLAWS = {
    "no_attention_residual": "the attention residual is missing: x = x + WO(concat of the heads)",
    "no_mlp_residual": "the MLP residual is missing: x = x + FC2(relu(FC1(RMSNorm(x))))",
    "no_attention_norm": "the attention reads x itself; it reads RMSNorm(x) (pre-norm)",
    "no_mlp_norm": "the MLP reads x itself; it reads RMSNorm(x) (pre-norm)",
    "mlp_reads_input": "the MLP branch reads the layer's input; it reads x after the attention residual",
    "no_relu": "there is no relu between FC1 and FC2",
    "squared_relu": "the MLP squares its relu (relu(a)²), as one version of a well-known scalar GPT does; this "
                    "model's MLP uses relu(a) itself",
    "output_normalised": "the layer's output is normalised again: pre-norm adds to the raw residual stream",
    "no_cache": "each position attends only to itself: append k and v to this layer's cache and attend over all of it",
}


# The layer's parts, each with the lesson's choice first and the alternatives a hand slips
# into. The kit computes the layer with every alternative of one part and of every two
# parts together (hidden/oracles.py, on the public check's inputs as data); the judge
# names the parts where a submission's layer is the one an alternative gives, so a
# mistake no list foresaw, or two at once, is still pointed at.
BLOCK_PARTS = {
    "raw": ("", ("q", "k", "v", "qk", "qv", "kv", "qkv")),  # which of q, k, v read x instead of RMSNorm(x)
    "heads": ("contiguous", ("interleaved", "interleaved_back")),
    "cache": ("all", ("self",)),
    "attention_residual": (True, (False,)),
    "mlp_input": ("after_attention", ("layer_input",)),
    "mlp_norm": (True, (False,)),
    "relu": (True, (False, "squared")),
    "mlp_residual": (True, (False,)),
    "output_norm": (False, (True,)),
}

# BLOCK_FLAWS, each as the part it changes.
FLAW_PARTS = {
    "no_attention_residual": {"attention_residual": False},
    "no_mlp_residual": {"mlp_residual": False},
    "no_attention_norm": {"raw": "qkv"},
    "no_mlp_norm": {"mlp_norm": False},
    "mlp_reads_input": {"mlp_input": "layer_input"},
    "no_relu": {"relu": False},
    "squared_relu": {"relu": "squared"},
    "output_normalised": {"output_norm": True},
    "no_cache": {"cache": "self"},
}

_PROJECTIONS = {"q": "queries", "k": "keys", "v": "values"}


def _joined(words) -> str:
    words = list(words)
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def part_sentence(part: str, choice) -> str:
    """What is wrong when the layer's `part` is `choice` instead of the lesson's."""
    for flaw, parts in FLAW_PARTS.items():
        if parts == {part: choice}:
            return BLOCK_FLAWS[flaw]
    if part == "raw":
        raw = [_PROJECTIONS[c] for c in "qkv" if c in choice]
        normed = [_PROJECTIONS[c] for c in "qkv" if c not in choice]
        return f"the {_joined(raw)} are computed from the raw stream x; they read RMSNorm(x) like the {_joined(normed)}"
    if part == "heads":
        back = " (and its output is written back to those features)" if choice == "interleaved_back" else ""
        return (f"the heads are interleaved: head h takes features h, h + H, h + 2H, ... of q, k and v{back}; "
                f"head h owns the contiguous slice h*d_head .. (h+1)*d_head - 1, and the heads' outputs are "
                f"concatenated in order")
    return f"the layer's {part} is not the lesson's"


def parts_sentence(parts: dict) -> str:
    """The sentence for a layer that differs from the lesson's in these parts."""
    said = [part_sentence(part, choice) for part, choice in parts.items()]
    if len(said) == 1:
        return said[0]
    return f"{len(said)} parts of the layer differ: " + "; also, ".join(said)


FORWARD_FLAWS = {
    "final_norm": "the features are normalised before the LM head: this model has no final norm",
    "no_embedding_norm": "the embedding sum is not normalised: RMSNorm(token row + position row) comes first",
    "no_position": "the position row is missing: x = WTE[token] + WPE[pos]",
    "first_layer_only": "only the first layer runs: apply self.block(layer, x) for every layer",
    "tied_head": "the logits are read from WTE, a head tied to the token table as some well-known GPTs tie it; "
                 "this model has its own LMHead: logit[v] = dot(LMHead[v], x)",
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
       task="micro_block", probe=probe_block, inputs=lambda g: {**block_inputs(3, 3), "zero": ["wo", "fc2"]},
       fixed_inputs=True)
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
    if all_close(out["y"], known_facts(inputs)["rms"], 1e-9):
        return "with WO and FC2 zero the output is RMSNorm(x): the layer's output must not be normalised"
    if all_close(out["y"], [[2 * v for v in x] for x in xs], 1e-12):
        return "with WO and FC2 zero the output is 2x: the residual is added twice"
    return "with WO and FC2 zero (both branches output 0) the layer must return its input exactly"


def judge_block(out, inputs, facts, reveal):
    """facts: what the network computes on inputs["xs"] ("y", the attention "rows"), what a
    layer with one or two parts otherwise gives ("alternatives", [(parts, y)], see
    BLOCK_PARTS) and the attention rows of those whose weights differ ("row_alternatives")."""
    if problem := block_raised(out):
        return problem
    xs, sizes = inputs["xs"], inputs["sizes"]
    if shape_of(out["y"]) != shape_of(xs):
        return f"the layer should return E = {sizes['n_embd']} values per position, got shape {shape_of(out['y'])}"
    want, rows = facts["y"], facts["rows"]
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
    for parts, wrong in facts["alternatives"]:
        if all_close(out["y"], wrong, NEAR):
            return parts_sentence(parts)
    if all_close(out["y"], want, TOL):
        return "the outputs are right but self.last_attention does not hold each head's softmax weights"
    return weights_localise(out, facts, reveal)


def weights_localise(out, facts, reveal) -> str:
    """For an output no known layer gives: whether the attention weights are already wrong
    (queries, keys, heads, cache) or the difference comes after them."""
    want, rows = facts["y"], facts["rows"]
    off = f"the layer's output is off by up to {off_by(out['y'], want):.3g}"
    formula = (" (h = RMSNorm(x); q, k, v; attend per head; x += WO(heads); x += FC2(relu(FC1(RMSNorm(x)))))"
               if reveal else "")
    if all_close(out["rows"], rows, TOL):
        return (f"{off}, but the attention weights are right, and with them the queries, the keys and the cache: "
                f"what differs comes after the weights (the values, WO, a residual or the MLP){formula}")
    for parts, wrong in facts["row_alternatives"]:
        if all_close(out["rows"], wrong, NEAR):
            return f"{off}, and the attention weights already differ: they are the ones a layer gives where " + \
                parts_sentence(parts)
    pos, head = next((p, h) for p, (got, right) in enumerate(zip(out["rows"], rows))
                     for h, (a, b) in enumerate(zip(got, right)) if not all_close(a, b, TOL))
    return (f"{off}, and the attention weights already differ (first at position {pos}, head {head}): the scores "
            f"dot(q, k) / sqrt(d_head) use other queries or keys than head {head}'s slice of WQ·RMSNorm(x) and "
            f"WK·RMSNorm(x){formula}")


@check("formula", 3,
       "3 positions, E = 8, 2 heads: outputs, cache and attention rows equal the pre-norm layer's formula",
       task="micro_block", probe=probe_block, inputs=lambda g: block_inputs(5, 3), fixed_inputs=True)
def judge_block_public(out, inputs, expected):
    facts = known_facts(inputs)
    if weights_changed(out, facts):
        return WEIGHTS_CHANGED
    return judge_block(out, inputs, facts, True)


# The public facts are what MicroGPT(**sizes, seed=seed) computes; a model whose own
# __init__ drew other weights cannot be judged by them. Which weights were drawn is
# compared to a tolerance: the same seed gives weights an ulp apart on another libm.
WEIGHTS_CHANGED = ("the model's weights are not the ones MicroGPT draws from its seed: keep MicroGPT.__init__ as "
                   "given (its tables, in their order); this check compares with what that model computes")


def weights_changed(out, facts) -> bool:
    return "tables" in out and not same_tables(tables_fingerprint(out["tables"]), facts["tables"])


def block_inputs(seed, n, spread=0.5, sizes=SMALL):
    """The public checks that take these read the stored draw (fixed_inputs): random.gauss
    gives other last bits on another libm, and the facts are found by the exact inputs."""
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
       task="micro_forward", probe=probe_forward,
       inputs=lambda g: {"sizes": dict(SMALL, n_layer=2), "seed": 4, "spread": 0.5, "ids": [6, 2, 0, 5, 2]})
def judge_forward_public(out, inputs, expected):
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


@check("pure_python", 1, "micro.py uses no torch or numpy: every number is a Value", task="micro_forward",
       probe=probe_pure_python, inputs=lambda g: {"sizes": dict(SMALL), "seed": 0}, gated_by="formula")
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
