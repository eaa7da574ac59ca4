"""MicroGPT.block: the pre-norm layer with its KV cache.

The probe builds a small MicroGPT with a fixed seed and returns its weight tables. The
judges compare with what that network computes, and with what the layer gives with every
other choice of one or two of its parts (BLOCK_PARTS: no residual, no norm, a norm on the
output, ...), to name the one a submission reproduces; where none fits, the attention
weights say whether the difference lies before them or after: the kit's torch float64
twin of the network gives those (hidden/oracles.py), on the public checks' fixed inputs
as data (grader/checks/facts.py).
"""

from __future__ import annotations

import random

from grader.checks._api import check, constant, exception_name
from grader.checks.ch00_micro.common import (NEAR, SMALL, TOL, WEIGHTS_CHANGED, all_close, data_of, flat_of, model_of,
                                             micro_tables, off_by, shape_of, task_of, weights_changed)
from grader.checks.facts import known_facts

TASKS = [task_of("micro_block", "MicroGPT.block", "the pre-norm layer with its KV cache")]


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
        return constant(f"the heads are interleaved: head h takes features h, h + H, h + 2H, ... of q, k and v{back}; "
                        f"head h owns the contiguous slice h*d_head .. (h+1)*d_head - 1, and the heads' outputs are "
                        f"concatenated in order")
    return f"the layer's {part} is not the lesson's"


def parts_sentence(parts: dict) -> str:
    """The sentence for a layer that differs from the lesson's in these parts."""
    said = [part_sentence(part, choice) for part, choice in parts.items()]
    if len(said) == 1:
        return said[0]
    return f"{constant(len(said))} parts of the layer differ: " + "; also, ".join(said)


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
       probe=probe_block, inputs=lambda g: {**block_inputs(3, 3), "zero": ["wo", "fc2"]},
       fixed_inputs=True)
def zero_branch_identity(out, inputs, expected):
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
       probe=probe_block, inputs=lambda g: block_inputs(5, 3), fixed_inputs=True)
def formula(out, inputs, expected):
    facts = known_facts(inputs)
    if weights_changed(out, facts):
        return WEIGHTS_CHANGED
    return judge_block(out, inputs, facts, True)


def block_inputs(seed, n, spread=0.5, sizes=SMALL):
    """The public checks that take these read the stored draw (fixed_inputs): random.gauss
    gives other last bits on another libm, and the facts are found by the exact inputs."""
    rng = random.Random(seed + 7)
    return {"sizes": dict(sizes), "seed": seed, "spread": spread,
            "xs": [[rng.gauss(0.0, 1.0) for _ in range(sizes["n_embd"])] for _ in range(n)]}
