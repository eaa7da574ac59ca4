"""The pre-LN block: U = X + A(LN1(X)), then Y = U + F(LN2(U)).

The checks pin the walk-through's shapes (output [B, T, d], cached keys/values
[B, h, T, d_h]), that zero branches give the input back exactly, causality, the
lesson's Example 1, the formula on fixed weights and inputs (naming the classic wrong
blocks: post-LN, one or swapped norms, a missing residual, ...; and any other block a
small grammar composes, part by part: the branches' order, each branch's LayerNorm,
whether the second reads X or U, each residual), and that two calls
through the KV cache equal one full call. What the right block and the wrong ones output
on the public checks' fixed inputs is data the kit computed from the reference's parts
(grader/checks/facts.py). torch's transformer layers and norm kernels score 'forbidden'.
"""

from __future__ import annotations

import math

import torch

from grader.checks._api import (
    NORM_KERNELS, OwnPartsVerdict, PartCalls, Task, calls_of, causal_diagnosis, check, compare, first_diagnosis,
    matches, named, naming, own_parts, same_values, shape_problem, torch_library_except, unjudgeable_parts,
)
from grader.checks.ch05_block.common import BLOCK_WALK, SIZES
from grader.checks.course import config, load_state, random_block_state
from grader.checks.facts import known_facts

TASKS = [
    Task("block", "model", "TransformerBlock.forward", "the pre-LN block",
         forbidden=("torch.nn.TransformerEncoderLayer", "torch.nn.TransformerDecoderLayer",
                    "torch.nn.functional.layer_norm"),
         forbidden_ops=NORM_KERNELS + ("_transformer_encoder_layer_fwd", "_native_multi_head_attention")
                       + torch_library_except(), takes=(("hidden", 3),)),
]


ATTENTION_PAIR = "attention_pair_used_as_a_tensor"


def attention_pair_problem(out) -> "str | None":
    """The block did arithmetic with what the attention returned, a pair (out, present)."""
    if isinstance(out, dict) and out.get(ATTENTION_PAIR):
        return ("the block used what the attention returned as one tensor, but the attention returns a pair "
                "(out, present): unpack it, attended, present = self.attention(LN1(X), past_key_value, use_cache), "
                "add attended to the stream, and return (hidden, present)")
    return None


def block_of(ns, sizes, state):
    return load_state(ns.model.TransformerBlock(config(ns, SIZES, **sizes)), state)


def probe_block_forward(ns, x, sizes, state=None):
    block = block_of(ns, sizes, state)
    calls, forward = [], block.attention.forward

    def recording(*args, **kwargs):
        use_cache = args[2] if len(args) > 2 else kwargs.get("use_cache", False)
        out = forward(*args, **kwargs)
        calls.append({"use_cache": use_cache is True,
                      "returned_present": isinstance(out, tuple) and len(out) == 2 and out[1] is not None})
        return out

    block.attention.forward = recording
    with torch.no_grad():
        try:
            y, present = block(x.clone())
        except TypeError as error:
            # `x + self.attn(self.ln_1(x))`, as blocks whose attention returns one tensor write it
            if calls and "tuple" in str(error):
                return {ATTENTION_PAIR: True}
            raise
        calls.clear()
        y_cache, present_cache = block(x.clone(), None, True)
    return {"y": y, "present": present, "cached_present": present_cache, "attention_calls": calls}


@check("shape", 2, "B=2, T=3, d=4, h=2, f=8: output [2, 3, 4], cached keys/values [2, 2, 3, 2]",
       probe=probe_block_forward,
       inputs=lambda g: {"x": torch.randn(2, 3, 4, generator=g, dtype=torch.float64), "sizes": BLOCK_WALK},
       gated_by="formula")
def shape(out, inputs, expected):
    if problem := attention_pair_problem(out):
        return problem
    x = inputs["x"]
    if problem := shape_problem(out["y"], x.shape, "the block output"):
        return f"{problem}: a block must keep [B, T, d]"
    if out["present"] is not None:
        return "with use_cache=False the block should return present=None"
    present = out["cached_present"]
    B, T, d = x.shape
    h = inputs["sizes"]["n_heads"]
    if not isinstance(present, list) or len(present) != 2:
        calls = out.get("attention_calls") or []
        if calls and not any(c["use_cache"] for c in calls):
            return ("with use_cache=True the block returned no (keys, values): it does not pass its cache arguments "
                    "on, self.attention(LN1(X), past_key_value, use_cache)")
        if any(c["returned_present"] for c in calls):
            return ("with use_cache=True the attention returned its present (keys, values) but the block dropped "
                    "it: return (hidden, present)")
        return "with use_cache=True the block should return the attention's present, (keys, values)"
    for tensor, what in zip(present, ("keys", "values")):
        if problem := shape_problem(tensor, (B, h, T, d // h), f"cached {what}"):
            return problem
    return None


def _zeroed_branches(sizes):
    d, f = sizes["d_model"], sizes["d_ff"]
    zeros = lambda *shape: torch.zeros(*shape, dtype=torch.float64)  # noqa: E731
    g = torch.Generator().manual_seed(5)
    state = {}
    for name, shape in (("attention.q_proj.weight", (d, d)), ("attention.k_proj.weight", (d, d)),
                        ("attention.v_proj.weight", (d, d)), ("feedforward.fc1.weight", (f, d))):
        state[name] = torch.randn(*shape, generator=g, dtype=torch.float64)
    state.update({"attention.o_proj.weight": zeros(d, d), "feedforward.fc1.bias": torch.randn(f, generator=g, dtype=torch.float64),
                  "feedforward.fc2.weight": zeros(d, f), "feedforward.fc2.bias": zeros(d),
                  "ln_attention.weight": torch.full((d,), 1.5, dtype=torch.float64),
                  "ln_attention.bias": torch.full((d,), 0.25, dtype=torch.float64),
                  "ln_feedforward.weight": torch.full((d,), 0.5, dtype=torch.float64),
                  "ln_feedforward.bias": torch.full((d,), -0.25, dtype=torch.float64)})
    return state


@check("zero_branch_identity", 2, "with both branches outputting zero the block returns its input exactly",
       probe=probe_block_forward,
       inputs=lambda g: {"x": torch.randn(2, 3, 4, generator=g, dtype=torch.float64) * 2 + 1,
                         "sizes": BLOCK_WALK, "state": _zeroed_branches(BLOCK_WALK)}, fixed_inputs=True,
       gated_by="formula")
def zero_branch_identity(out, inputs, expected):
    if problem := attention_pair_problem(out):
        return problem
    x, y = inputs["x"], out["y"]
    if problem := shape_problem(y, x.shape, "the block output"):
        return problem
    if torch.equal(y, x) or matches(y, x, atol=1e-12, rtol=0):
        return None
    facts = known_facts(inputs)
    post, renormalised = facts["post"], facts["renormalised"]
    if matches(y, post, atol=1e-10, rtol=0) and not matches(y, renormalised, atol=1e-10, rtol=0):
        return ("with both branches zero the output is LN2(LN1(X)): the block is post-LN (it normalises after each "
                "residual add); this course's block is pre-LN, U = X + A(LN1(X)), Y = U + F(LN2(U)), so zero "
                "branches leave X unchanged")
    if matches(y, facts["normalised"], atol=1e-6, rtol=1e-6) or matches(y, renormalised, atol=1e-6, rtol=1e-6):
        return "with both branches zero the output is a normalised input: the block's output must not be re-normalised (pre-LN adds to the raw residual stream)"
    if matches(y, 2 * x, atol=1e-9, rtol=0):
        return "with both branches zero the output is 2x: the residual is added twice"
    if matches(y, torch.zeros_like(x), atol=1e-12, rtol=0):
        return "with both branches zero the output is 0: the residual connection (X + ...) is missing"
    return "with both branches zero the block must return its input exactly, but it changed it"


def probe_block_output(ns, x, sizes, state):
    block = block_of(ns, sizes, state)
    with torch.no_grad():
        return {"y": block(x.clone())[0]}


def _causal_inputs(g, sizes, state_maker):
    B, T, d = 2, 6, sizes["d_model"]
    x = torch.randn(B, T, d, generator=g, dtype=torch.float64)
    changed = x.clone()
    changed[:, 4:] = torch.randn(B, T - 4, d, generator=g, dtype=torch.float64)
    return {"x": x, "changed": changed, "_first_changed": 4, "sizes": sizes, "state": state_maker(g, sizes)}


@check("causal_invariance", 2, "changing tokens 4.. leaves the block's outputs at positions 0..3 unchanged",
       probe=probe_block_output, inputs=lambda g: _causal_inputs(g, BLOCK_WALK, random_block_state),
       separately=("x", "changed"),
       gated_by="formula")
def causal_invariance(out, inputs, expected):
    return causal_diagnosis(out["x"]["y"], out["changed"]["y"], inputs["_first_changed"], "the block")


def _example_block_inputs():
    sizes = {"d_model": 2, "n_heads": 1, "d_ff": 2}
    z = torch.zeros
    state = {"ln_attention.weight": torch.ones(2, dtype=torch.float64), "ln_attention.bias": z(2, dtype=torch.float64),
             "attention.q_proj.weight": torch.eye(2, dtype=torch.float64), "attention.k_proj.weight": torch.eye(2, dtype=torch.float64),
             "attention.v_proj.weight": torch.eye(2, dtype=torch.float64), "attention.o_proj.weight": z(2, 2, dtype=torch.float64),
             "ln_feedforward.weight": torch.ones(2, dtype=torch.float64), "ln_feedforward.bias": z(2, dtype=torch.float64),
             "feedforward.fc1.weight": torch.eye(2, dtype=torch.float64), "feedforward.fc1.bias": z(2, dtype=torch.float64),
             "feedforward.fc2.weight": 0.5 * torch.eye(2, dtype=torch.float64), "feedforward.fc2.bias": z(2, dtype=torch.float64)}
    return {"x": torch.tensor([[[1.0, 3.0]]], dtype=torch.float64), "sizes": sizes, "state": state}


@check("example_1", 2, "Example 1 gives (0.9206722, 3.4206696); increment difference 0.49999750",
       probe=probe_block_forward, inputs=lambda g: _example_block_inputs())
def example_1(out, inputs, expected):
    if problem := attention_pair_problem(out):
        return problem
    y = out["y"]
    if problem := shape_problem(y, (1, 1, 2), "the block output"):
        return problem
    figure = torch.tensor([[[0.9206722, 3.4206696]]], dtype=torch.float64)
    if matches(y, figure, atol=5e-7, rtol=0):
        increment = y - inputs["x"]
        if abs((increment[0, 0, 1] - increment[0, 0, 0]).item() - 0.49999750) < 5e-8:
            return None
    a = 1 / math.sqrt(1.00001)
    if matches(y, torch.tensor([[[-a, a]]], dtype=torch.float64), atol=1e-6, rtol=0) or matches(
            y, known_facts(inputs)["normalised_figure"], atol=1e-6, rtol=0):
        return "Example 1's output is normalised: pre-LN normalises the branch inputs, never the block output (post-LN is a different block)"
    if matches(y, torch.tensor([[[-0.0793278, 0.4206696]]], dtype=torch.float64), atol=5e-7, rtol=0):
        return "Example 1 returns only the increment: add the residual (U + F(LN2(U)))"
    return "Example 1 should give (0.9206722, 3.4206696), with increment difference 0.49999750"


# Each mistake by name; what it outputs is computed under the same name (hidden.py).
MISTAKES = {
    "feedforward_reads_x": "the feed-forward branch reads X instead of U = X + A(LN1(X))",
    "one_norm": "one LayerNorm (ln_attention) is used for both branches; the feed-forward branch reads "
                "ln_feedforward(U)",
    "feedforward_first": "the feed-forward branch runs before attention; the block is U = X + A(LN1(X)), "
                         "then Y = U + F(LN2(U))",
    "post_ln": "the block is post-LN (normalising after the residual add); this course's block is pre-LN: "
               "U = X + A(LN1(X)), Y = U + F(LN2(U))",
    "renormalised": "the output is re-normalised: pre-LN adds the increments to the raw residual stream",
    "no_ff_residual": "the feed-forward residual is missing (Y = F(LN2(U)))",
    "no_attention_residual": "the attention residual is missing (U = A(LN1(X)))",
    "branches_swapped_norms": "the two LayerNorms are swapped: attention reads ln_attention(X), the "
                              "feed-forward branch ln_feedforward(U)",
    "broadcast": "an increment is broadcast from [B, 1, d]: add each position's own increment",
    "attention_unnormalised": "attention reads X itself; it reads LN1(X) = ln_attention(X)",
    "feedforward_unnormalised": "the feed-forward branch reads U itself; it reads LN2(U) = ln_feedforward(U)",
}
# The hidden check on random weights (matches_reference) names some of the same mistakes,
# one in words of its own.
MISTAKES_REFERENCE = MISTAKES | {
    "one_norm": "one LayerNorm is used for both branches; each branch has its own",
}


BLOCK_PARTS_CALLED = ("ln_attention", "attention", "ln_feedforward", "feedforward")


def probe_block_formula(ns, x, sizes, state):
    block = block_of(ns, sizes, state)
    parts = {name: part for name in BLOCK_PARTS_CALLED
             if isinstance(part := getattr(block, name, None), torch.nn.Module)}
    with torch.no_grad(), PartCalls(parts) as recorded:
        y = block(x.clone())[0]
    return {"y": y, "calls": recorded.calls, "shared": recorded.shared()}


def random_block_inputs(g):
    sizes = {"d_model": 8, "n_heads": 2, "d_ff": 16}
    return {"x": torch.randn(2, 5, 8, generator=g, dtype=torch.float64), "sizes": sizes,
            "state": random_block_state(g, sizes)}


# The block as a small grammar of compositions, to say what a wrong block computes when
# it is none of the named mistakes above: which branch runs first, which LayerNorm each
# branch reads through (or none), whether the second branch reads X or the residual
# stream after the first, and what each residual adds the increment to. The kit computes
# what each composition outputs on the formula check's inputs (hidden/block.py); the
# judge names the one the output is, part by part against the lesson's block.

RIGHT_BLOCK = {"first": "attention", "attention_norm": "ln_attention", "feedforward_norm": "ln_feedforward",
               "second_reads": "U", "first_residual": "X", "second_residual": "U"}
BLOCK_PARTS = {"first": ("attention", "feedforward"), "attention_norm": ("ln_attention", "ln_feedforward", None),
               "feedforward_norm": ("ln_feedforward", "ln_attention", None), "second_reads": ("U", "X"),
               "first_residual": ("X", None), "second_residual": ("U", "X", None)}
MAX_BLOCK_SLIPS = 3  # compositions differing from the lesson's block in at most this many parts


def block_compositions(max_slips: int = MAX_BLOCK_SLIPS) -> list[dict]:
    """Every composition of the grammar but the right one, fewest slips first."""
    found = [{}]
    for part, choices in BLOCK_PARTS.items():
        found = [{**c, part: choice} for c in found for choice in choices]
    wrong = [c for c in found if 0 < block_slips(c) <= max_slips]
    return sorted(wrong, key=block_slips)


def block_slips(parts: dict) -> int:
    return sum(parts[part] != RIGHT_BLOCK[part] for part in BLOCK_PARTS)


_BRANCH = {"attention": ("A", "attention"), "feedforward": ("F", "the feed-forward branch")}
_NORM = {"ln_attention": "LN1", "ln_feedforward": "LN2", None: None}


def block_formula_text(parts: dict) -> str:
    """The composition as the lesson writes a block: 'U = X + A(LN1(X)), Y = U + F(LN2(U))'."""
    first = parts["first"]
    second = "feedforward" if first == "attention" else "attention"
    middle = "U" if first == "attention" else "H"

    def branch(which, reads):
        letter, norm = _BRANCH[which][0], _NORM[parts[f"{which}_norm"]]
        return f"{letter}({norm}({reads}))" if norm else f"{letter}({reads})"

    one = branch(first, "X")
    one = f"X + {one}" if parts["first_residual"] == "X" else one
    two = branch(second, middle if parts["second_reads"] == "U" else "X")
    base = {"U": middle, "X": "X", None: None}[parts["second_residual"]]
    return f"{middle} = {one}, Y = {base + ' + ' if base else ''}{two}"


def block_difference(parts: dict) -> str:
    """What the composition does otherwise than the lesson's block, part by part."""
    first = parts["first"]
    second = "feedforward" if first == "attention" else "attention"
    said = []
    if first != RIGHT_BLOCK["first"]:
        said.append("the feed-forward branch runs first, before attention: attention comes first, and the "
                    "feed-forward branch reads its result U")
    for which in ("attention", "feedforward"):
        norm, right = parts[f"{which}_norm"], RIGHT_BLOCK[f"{which}_norm"]
        name = _BRANCH[which][1]
        if norm is None:
            said.append(f"{name} reads its input without a LayerNorm, where it reads through {right} "
                        f"({_NORM[right]})")
        elif norm != right:
            said.append(f"{name} reads through {norm} ({_NORM[norm]}) instead of its own {right} ({_NORM[right]})")
    first_name, second_name = _BRANCH[first][1], _BRANCH[second][1]
    if first != RIGHT_BLOCK["first"]:
        first_name, second_name = f"{first_name}, which runs first,", f"{second_name}, which runs second,"
    stream = f"the residual stream after {_BRANCH[first][1]}"
    if parts["first_residual"] is None:
        said.append(f"the residual of {first_name} is missing: its increment is not added to X")
    if parts["second_reads"] == "X":
        said.append(f"{second_name} reads X, the block's input, instead of {stream}")
    if parts["second_residual"] == "X":
        said.append(f"the increment of {_BRANCH[second][1]} is added to X, so the increment of {_BRANCH[first][1]} "
                    f"is lost: add it to {stream}")
    elif parts["second_residual"] is None:
        said.append(f"the residual of {second_name} is missing: its increment is returned without adding it to "
                    f"{stream}")
    return "; ".join(said)


def block_composition_diagnosis(parts: dict) -> str:
    return (f"the block computes {block_formula_text(parts)}, where the lesson's block is "
            f"{block_formula_text(RIGHT_BLOCK)}: {block_difference(parts)}")


def composition_mistakes(compositions) -> list:
    """[(sentence, output)] of the wrong compositions given as {"parts", "y"}: each says what
    its parts do otherwise than the lesson's block."""
    return [(block_composition_diagnosis(c["parts"]), c["y"]) for c in compositions]


def block_wiring(out, x) -> "str | None":
    """The block judged on its own parts: None when its output is U + F(LN2(U)), U = X +
    A(LN1(X)), of what its own norms, attention and feed-forward received and returned
    while it ran (PartCalls), whatever those parts compute; else the wire that is wrong,
    in the lesson's words."""
    calls, y = out.get("calls"), out["y"]
    if problem := unjudgeable_parts(out, "the block"):
        return problem
    seen = {name: calls_of(calls, name) for name in BLOCK_PARTS_CALLED}
    verdict = OwnPartsVerdict
    for branch in ("attention", "feedforward"):
        if len(seen[branch]) != 1:
            how = "never calls" if not seen[branch] else f"calls {len(seen[branch])} times"
            return (f"the block {how} self.{branch}(...) in one forward pass, so it cannot be judged on your own "
                    f"parts: call each branch once, as a module (self.{branch}(...), not its .forward or its code "
                    f"written out)")
    attended, fed = seen["attention"][0], seen["feedforward"][0]
    if calls.index(fed) < calls.index(attended):
        return verdict("the feed-forward branch runs first, before attention; the block is U = X + A(LN1(X)), "
                       "then Y = U + F(LN2(U))")
    norms = [c for c in calls if c["part"] in ("ln_attention", "ln_feedforward")]
    a_out = attended["output"]
    if not isinstance(a_out, torch.Tensor) or not isinstance(fed["output"], torch.Tensor):
        return verdict("a branch returned no tensor: attention returns (output, present), the feed-forward a tensor")
    U = x + a_out if a_out.shape == x.shape else None
    if U is None:
        return verdict(f"attention's output has shape {list(a_out.shape)} where X has {list(x.shape)}: "
                       + naming("broadcast", MISTAKES["broadcast"]))

    def normalised(value):
        """The norm call that returned `value`, if one did."""
        return next((c for c in norms if same_values(value, c["output"])), None)

    # The attention branch: A(LN1(X)).
    first = normalised(attended["input"])
    if first is None:
        if any(same_values(c["input"], U) for c in norms) and same_values(attended["input"], x):
            return verdict(naming("post_ln", MISTAKES["post_ln"]))
        if same_values(attended["input"], x):
            return verdict(naming("attention_unnormalised", MISTAKES["attention_unnormalised"]))
        return verdict("attention does not read LN1(X) = ln_attention(X), of the block's input X, nor X itself")
    if not same_values(first["input"], x):
        return verdict("attention reads a LayerNorm of something other than X, the block's input: it reads "
                       "ln_attention(X)")
    second = normalised(fed["input"])
    if first["part"] != "ln_attention":
        if second is not None and second["part"] == "ln_attention":
            return verdict(naming("branches_swapped_norms", MISTAKES["branches_swapped_norms"]))
        return verdict("attention reads through ln_feedforward (LN2) instead of its own ln_attention (LN1): "
                       "U = X + A(LN1(X)), then Y = U + F(LN2(U))")
    # The feed-forward branch: F(LN2(U)).
    if second is None:
        if same_values(fed["input"], U):
            return verdict(naming("feedforward_unnormalised", MISTAKES["feedforward_unnormalised"]))
        if same_values(fed["input"], x):
            return verdict("the feed-forward branch reads X itself; it reads LN2(U) = ln_feedforward(U), "
                           "U = X + A(LN1(X))")
        return verdict("the feed-forward branch does not read LN2(U) = ln_feedforward(U), with U = X + A(LN1(X))")
    if not same_values(second["input"], U):
        if same_values(second["input"], x):
            return verdict(naming("feedforward_reads_x", MISTAKES["feedforward_reads_x"]))
        if same_values(second["input"], a_out):
            return verdict(naming("no_attention_residual", MISTAKES["no_attention_residual"]))
        if any(same_values(second["input"], x + a_out[:, at]) for at in (slice(-1, None), slice(0, 1))):
            return verdict("U = X + A(LN1(X)) is not what the feed-forward branch's LayerNorm reads: "
                           + naming("broadcast", MISTAKES["broadcast"]) + " (a [B, 1, d] increment lets the last "
                           "position leak into every earlier one: the future)")
        return verdict("the feed-forward branch's LayerNorm does not read U = X + A(LN1(X))")
    if second["part"] != "ln_feedforward":
        return verdict(naming("one_norm", MISTAKES["one_norm"]))
    # The output: Y = U + F(LN2(U)).
    f_out = fed["output"]
    if f_out.shape != x.shape:
        return verdict(f"the feed-forward branch's output has shape {list(f_out.shape)} where X has "
                       f"{list(x.shape)}: " + naming("broadcast", MISTAKES["broadcast"]))
    if same_values(y, U + f_out):
        return None
    if same_values(y, f_out):
        return verdict(naming("no_ff_residual", MISTAKES["no_ff_residual"]))
    if same_values(y, x + f_out):
        return verdict("the feed-forward increment is added to X, so the attention increment is lost: "
                       "Y = U + F(LN2(U)), with U = X + A(LN1(X))")
    if normalised(y) is not None:
        return verdict(naming("renormalised", MISTAKES["renormalised"]))
    return verdict(compare(y, U + f_out, "the block output", atol=1e-9, rtol=1e-7)
                   + ": it is not U + F(LN2(U)) of what the block's own parts returned while it ran")


@check("formula", 2,
       "random weights (distinct norms): the output is U + F(LN2(U)), U = X + A(LN1(X)), of the block's own parts",
       probe=probe_block_formula, inputs=random_block_inputs, fixed_inputs=True)
def formula(out, inputs, expected):
    composed = known_facts(inputs)
    if problem := shape_problem(out["y"], inputs["x"].shape, "the block output"):
        return problem
    if matches(out["y"], composed["right"], atol=1e-9, rtol=1e-7):
        return None
    if own_parts(inputs):
        # No certified part stood in: the parts may be wrong and the block right.
        return block_wiring(out, inputs["x"])
    known = first_diagnosis(out["y"], named(MISTAKES, composed["mistakes"])
                            + composition_mistakes(composed.get("compositions", ())), atol=1e-7, rtol=1e-6)
    if known:
        return known
    if matches(out["y"], inputs["x"], atol=1e-12, rtol=0):
        return ("the block returns its input X unchanged: neither branch adds its increment "
                "(U = X + A(LN1(X)), then Y = U + F(LN2(U)))")
    return (compare(out["y"], composed["right"], "the block output", atol=1e-9, rtol=1e-7)
            + ": it is not U + F(LN2(U)) with U = X + A(LN1(X)) computed with the block's own parts")
