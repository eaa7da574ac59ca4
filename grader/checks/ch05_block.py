"""Chapter 05: LayerNorm, exact GELU, the feed-forward network and the pre-LN block."""

from __future__ import annotations

import math

import torch

from grader.checks._api import (
    GELU_KERNELS, NORM_KERNELS, Task, causal_diagnosis, check, compare, exact_gelu, first_diagnosis, kind_of, layer_norm,
    matches, shape_problem, tanh_gelu,
)

CHAPTER, TITLE = "05", "LayerNorm, GELU, feed-forward, pre-LN block"
EPS = 1e-5

TASKS = [
    Task("layer_norm", "model", "LayerNorm.forward", "LayerNorm over the last axis",
         forbidden=("torch.nn.functional.layer_norm", "torch.layer_norm", "torch.nn.LayerNorm",
                    "torch.nn.functional.group_norm", "torch.nn.functional.rms_norm"),
         forbidden_ops=NORM_KERNELS),
    Task("gelu", "model", "gelu", "exact GELU",
         forbidden=("torch.nn.functional.gelu", "torch.nn.GELU", "torch._C._nn.gelu"), forbidden_ops=GELU_KERNELS),
    Task("feedforward", "model", "FeedForward.forward", "the feed-forward network",
         forbidden=("torch.nn.functional.gelu", "torch.nn.GELU"), forbidden_ops=GELU_KERNELS),
    Task("block_init", "model", "TransformerBlock.__init__", "the block's parts"),
    Task("block", "model", "TransformerBlock.forward", "the pre-LN block",
         forbidden=("torch.nn.TransformerEncoderLayer", "torch.nn.TransformerDecoderLayer",
                    "torch.nn.functional.layer_norm"),
         forbidden_ops=NORM_KERNELS + ("_transformer_encoder_layer_fwd", "_native_multi_head_attention")),
]

# ----------------------------------------------------------------------- helpers
# These run on both sides: in the sandbox to build inputs into modules, and in the
# grader to compute what known mistakes would output.


def _config(ns, **sizes):
    base = dict(vocab_size=11, block_size=8, d_model=4, n_heads=2, n_layers=1, d_ff=8, dropout=0.0)
    base.update(sizes)
    return ns.model.Config(**base)


def _loaded(module, state):
    module = module.double()
    if state:
        module.load_state_dict({k: v.clone() for k, v in state.items()}, strict=True)
    return module.eval()


def _layer_norm_mistakes(x, gamma, beta):
    return [
        ("the variance is divided by d - 1 instead of d (use the population variance)",
         layer_norm(x, gamma, beta, divisor_offset=1)),
        ("eps is missing from the square root", layer_norm(x, gamma, beta, eps=0.0)),
        ("eps is added outside the square root; it belongs inside: sqrt(var + eps)",
         layer_norm(x, gamma, beta, eps_outside=True)),
        ("gamma and beta are not applied", layer_norm(x, torch.ones_like(gamma), torch.zeros_like(beta))),
        ("the statistics are taken over the time axis; take them over the last (feature) axis only",
         layer_norm(x, gamma, beta, dims=(-2,)) if x.dim() >= 2 else x),
        ("the statistics are taken over all axes; take them over the last (feature) axis only",
         layer_norm(x, gamma, beta, dims=tuple(range(x.dim())))),
    ]


# ------------------------------------------------------------------- LayerNorm


def probe_layer_norm(ns, x, gamma=None, beta=None):
    norm = ns.model.LayerNorm(x.shape[-1]).double()
    with torch.no_grad():
        if gamma is not None:
            norm.weight.copy_(gamma)
            norm.bias.copy_(beta)
        return {"y": norm(x.clone()), "eps": getattr(norm, "eps", None),
                "gamma": norm.weight.detach().clone(), "beta": norm.bias.detach().clone()}


def judge_layer_norm_figures(out, inputs, expected):
    a = 1 / math.sqrt(1.00001)
    figure = torch.tensor([[-a, a]], dtype=torch.float64)
    if matches(out["y"], figure, atol=1e-9, rtol=0):
        return None
    x, ones, zeros = inputs["x"], torch.ones(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64)
    known = first_diagnosis(out["y"], _layer_norm_mistakes(x, ones, zeros), atol=1e-6, rtol=0)
    if known:
        return f"(1, 3) should normalise to (-0.999995, 0.999995) = ±1/sqrt(1.00001): {known}"
    return compare(out["y"], figure, "LayerNorm((1, 3))", atol=1e-9, rtol=0)


def judge_layer_norm_constant(out, inputs, expected):
    y = out["y"]
    if problem := shape_problem(y, inputs["x"].shape):
        return problem
    if not torch.isfinite(y).all():
        return "a constant vector gives NaN or inf: its variance is 0, so eps must sit inside the square root"
    if not matches(y, inputs["beta"].expand_as(y), atol=1e-12, rtol=0):
        if matches(y, torch.zeros_like(y), atol=1e-12, rtol=0):
            return ("a constant vector gives 0 instead of beta: gamma and beta are not applied (multiply the "
                    "normalised values by self.weight, then add self.bias)")
        return "a constant vector should come out as exactly beta (its centred values are all 0)"
    return None


def judge_layer_norm_defaults(out, inputs, expected):
    eps = out["eps"]
    numeric = (isinstance(eps, (int, float)) and not isinstance(eps, bool)) or (
        isinstance(eps, torch.Tensor) and eps.numel() == 1 and not eps.is_complex())
    if not numeric:
        return f"eps should be the number 1e-5, found {kind_of(eps)}"
    value = float(eps)
    if not math.isfinite(value):
        return f"eps should be 1e-5, found {value!r}: eps must be a finite number"
    if not abs(value - EPS) <= 1e-12:
        return f"eps should be 1e-5, found {eps!r}"
    if not (torch.equal(out["gamma"], torch.ones(4, dtype=torch.float64))
            and torch.equal(out["beta"], torch.zeros(4, dtype=torch.float64))):
        return "gamma should start at 1 and beta at 0"
    return None


def probe_layer_norm_shift(ns, x, shift):
    norm = ns.model.LayerNorm(x.shape[-1]).double()
    return {"y": norm(x.clone()), "shifted": norm(x + shift)}


def judge_layer_norm_shift(out, inputs, expected):
    if problem := shape_problem(out["y"], inputs["x"].shape):
        return problem
    if not matches(out["shifted"], out["y"], atol=1e-9, rtol=0):
        return "adding the same constant to every feature changed the output: subtract the mean of the last axis"
    return None


def judge_layer_norm_reference(out, inputs, expected):
    if compare(out["y"], expected, atol=1e-9, rtol=1e-7) is None:
        return None
    known = first_diagnosis(out["y"], _layer_norm_mistakes(inputs["x"], inputs["gamma"], inputs["beta"]),
                            atol=1e-7, rtol=1e-6)
    return known or compare(out["y"], expected, "the normalised output", atol=1e-9, rtol=1e-7)


def _random_norm_inputs(g):
    return {"x": torch.randn(2, 5, 6, generator=g, dtype=torch.float64) * 3 + 1,
            "gamma": torch.rand(6, generator=g, dtype=torch.float64) + 0.5,
            "beta": torch.randn(6, generator=g, dtype=torch.float64)}


def _expect_layer_norm(ref, inputs):
    norm = ref.model.LayerNorm(6).double()
    with torch.no_grad():
        norm.weight.copy_(inputs["gamma"])
        norm.bias.copy_(inputs["beta"])
        return norm(inputs["x"])


def probe_layer_norm_rows(ns, x, gamma, beta):
    norm = ns.model.LayerNorm(x.shape[-1]).double()
    with torch.no_grad():
        norm.weight.copy_(gamma)
        norm.bias.copy_(beta)
        rows = torch.stack([torch.stack([norm(x[b, t].clone().reshape(1, -1))[0] for t in range(x.shape[1])])
                            for b in range(x.shape[0])])
        return {"y": norm(x.clone()), "rows": rows}


def judge_layer_norm_rows(out, inputs, expected):
    x, gamma, beta = inputs["x"], inputs["gamma"], inputs["beta"]
    if problem := shape_problem(out["y"], x.shape, "LayerNorm(x)"):
        return problem
    if matches(out["y"], out["rows"], atol=1e-9, rtol=1e-7):
        return None
    known = first_diagnosis(out["y"], _layer_norm_mistakes(x, gamma, beta)[4:], atol=1e-7, rtol=1e-6)
    if known:
        return f"normalising x [2, 3, 4] at once differs from normalising each position alone: {known}"
    return ("normalising x [2, 3, 4] at once differs from normalising each position alone: each position's "
            "d features are normalised with their own mean and variance, never with other positions'")


# ------------------------------------------------------------------------ GELU


def probe_gelu(ns, x):
    return {"y": ns.model.gelu(x.clone())}


def _gelu_mistakes(x):
    return [
        ("this is the tanh approximation of GELU; use the exact form x * Phi(x) with erf",
         tanh_gelu(x)),
        ("this is ReLU, not GELU: GELU is x * Phi(x), smooth and slightly negative for x < 0",
         torch.relu(x)),
        ("this is the sigmoid approximation x * sigmoid(1.702 x); use the exact erf form",
         x * torch.sigmoid(1.702 * x)),
        ("the output equals the input: no nonlinearity was applied", x),
        ("Phi(x) is returned without multiplying by x", 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))),
    ]


def judge_gelu_values(out, inputs, expected):
    x = inputs["x"]
    exact = exact_gelu(x)
    if compare(out["y"], exact, atol=1e-9, rtol=1e-9) is None:
        return None
    known = first_diagnosis(out["y"], _gelu_mistakes(x), atol=1e-7, rtol=1e-6)
    return known or compare(out["y"], exact, "gelu(x)", atol=1e-9, rtol=1e-9)


def probe_gelu_odd_part(ns, a):
    return {"plus": ns.model.gelu(a.clone()), "minus": ns.model.gelu(-a)}


def judge_gelu_odd_part(out, inputs, expected):
    difference = out["plus"] - out["minus"]
    if problem := compare(difference, inputs["a"], "g(a) - g(-a)", atol=1e-9, rtol=1e-9):
        return f"{problem}; for any GELU-like x * F(x) with F(-x) = 1 - F(x) it must equal a"
    return None


# --------------------------------------------------------------- feed-forward


def probe_feedforward(ns, x, state, sizes):
    ffn = _loaded(ns.model.FeedForward(_config(ns, **sizes)), state)
    return {"y": ffn(x.clone())}


def _example_feedforward_inputs():
    a = 1 / math.sqrt(1.00001)
    return {"x": torch.tensor([[[-a, a]]], dtype=torch.float64),
            "state": {"fc1.weight": torch.eye(2, dtype=torch.float64), "fc1.bias": torch.zeros(2, dtype=torch.float64),
                      "fc2.weight": 0.5 * torch.eye(2, dtype=torch.float64), "fc2.bias": torch.zeros(2, dtype=torch.float64)},
            "sizes": {"d_model": 2, "n_heads": 1, "d_ff": 2}}


def _feedforward_mistakes(x, state):
    w1, b1, w2, b2 = state["fc1.weight"], state["fc1.bias"], state["fc2.weight"], state["fc2.bias"]
    pre = x @ w1.T + b1
    return [
        ("there is no nonlinearity between the two linear layers: apply gelu to x W1 + b1", pre @ w2.T + b2),
        ("ReLU is used where the exact GELU belongs", torch.relu(pre) @ w2.T + b2),
        ("the tanh approximation of GELU is used; use the exact erf form", tanh_gelu(pre) @ w2.T + b2),
        ("the second bias b2 is missing", exact_gelu(pre) @ w2.T),
        ("the first bias b1 is missing", exact_gelu(x @ w1.T) @ w2.T + b2),
    ]


def judge_feedforward(out, inputs, expected):
    x, state = inputs["x"], inputs["state"]
    right = exact_gelu(x @ state["fc1.weight"].T + state["fc1.bias"]) @ state["fc2.weight"].T + state["fc2.bias"]
    if compare(out["y"], right, atol=1e-9, rtol=1e-7) is None:
        return None
    known = first_diagnosis(out["y"], _feedforward_mistakes(x, state), atol=1e-7, rtol=1e-6)
    return known or compare(out["y"], right, "the feed-forward output", atol=1e-9, rtol=1e-7)


def judge_feedforward_example(out, inputs, expected):
    figure = torch.tensor([[[-0.0793278, 0.4206696]]], dtype=torch.float64)
    if problem := judge_feedforward(out, inputs, expected):
        return f"Example 1 should give the increment (-0.0793278, 0.4206696): {problem}"
    if not matches(out["y"], figure, atol=5e-7, rtol=0):
        return "Example 1 should give the increment (-0.0793278, 0.4206696)"
    return None


def _random_feedforward_inputs(g):
    d, f = 4, 8
    return {"x": torch.randn(2, 3, d, generator=g, dtype=torch.float64),
            "state": {"fc1.weight": torch.randn(f, d, generator=g, dtype=torch.float64) * 0.7,
                      "fc1.bias": torch.randn(f, generator=g, dtype=torch.float64) * 0.5,
                      "fc2.weight": torch.randn(d, f, generator=g, dtype=torch.float64) * 0.7,
                      "fc2.bias": torch.randn(d, generator=g, dtype=torch.float64) * 0.5},
            "sizes": {"d_model": d, "d_ff": f}}


# ---------------------------------------------------------------------- block


def probe_block_parts(ns, sizes):
    block = ns.model.TransformerBlock(_config(ns, **sizes))
    names = ("ln_attention", "attention", "ln_feedforward", "feedforward")
    parts = {name: getattr(block, name, None) for name in names}
    return {
        "missing": [name for name, part in parts.items() if part is None],
        "types": {name: type(part).__name__ for name, part in parts.items()},
        "norms_shared": parts["ln_attention"] is not None and parts["ln_attention"] is parts["ln_feedforward"],
        "parameters": sum(p.numel() for p in block.parameters()),
    }


def _block_ledger(d, f):
    return 4 * d * d + 2 * d * f + f + 5 * d


def judge_block_parts(out, inputs, expected):
    if out["missing"]:
        return f"the block has no attribute(s) {', '.join(out['missing'])}; the names are part of the contract"
    wanted = {"ln_attention": "LayerNorm", "attention": "CausalSelfAttention",
              "ln_feedforward": "LayerNorm", "feedforward": "FeedForward"}
    for name, kind in wanted.items():
        if out["types"][name] != kind:
            return f"block.{name} should be a {kind}, found {out['types'][name]}"
    if out["norms_shared"]:
        return "ln_attention and ln_feedforward are one object used twice: each branch needs its own LayerNorm"
    d, f = inputs["sizes"]["d_model"], inputs["sizes"]["d_ff"]
    if out["parameters"] != _block_ledger(d, f):
        return (f"the block registers {out['parameters']} parameters; the ledger 4d² + 2df + f + 5d "
                f"gives {_block_ledger(d, f)} for d={d}, f={f}")
    return None


def _block(ns, sizes, state):
    return _loaded(ns.model.TransformerBlock(_config(ns, **sizes)), state)


def probe_block_forward(ns, x, sizes, state=None):
    block = _block(ns, sizes, state)
    calls, forward = [], block.attention.forward

    def recording(*args, **kwargs):
        use_cache = args[2] if len(args) > 2 else kwargs.get("use_cache", False)
        out = forward(*args, **kwargs)
        calls.append({"use_cache": use_cache is True,
                      "returned_present": isinstance(out, tuple) and len(out) == 2 and out[1] is not None})
        return out

    block.attention.forward = recording
    with torch.no_grad():
        y, present = block(x.clone())
        calls.clear()
        y_cache, present_cache = block(x.clone(), None, True)
    return {"y": y, "present": present, "cached_present": present_cache, "attention_calls": calls}


def judge_block_shape(out, inputs, expected):
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


def judge_zero_branch(out, inputs, expected):
    x, y = inputs["x"], out["y"]
    if problem := shape_problem(y, x.shape, "the block output"):
        return problem
    if torch.equal(y, x) or matches(y, x, atol=1e-12, rtol=0):
        return None
    ones, zeros = torch.ones(x.shape[-1], dtype=torch.float64), torch.zeros(x.shape[-1], dtype=torch.float64)
    post = layer_norm(layer_norm(x, torch.full_like(ones, 1.5), torch.full_like(zeros, 0.25)),
                      torch.full_like(ones, 0.5), torch.full_like(zeros, -0.25))
    renormalised = layer_norm(x, torch.full_like(ones, 0.5), torch.full_like(zeros, -0.25))
    if matches(y, post, atol=1e-10, rtol=0) and not matches(y, renormalised, atol=1e-10, rtol=0):
        return ("with both branches zero the output is LN2(LN1(X)): the block is post-LN (it normalises after each "
                "residual add); this course's block is pre-LN, U = X + A(LN1(X)), Y = U + F(LN2(U)), so zero "
                "branches leave X unchanged")
    if matches(y, layer_norm(x, ones, zeros), atol=1e-6, rtol=1e-6) or matches(
            y, layer_norm(x, torch.full_like(ones, 0.5), torch.full_like(zeros, -0.25)), atol=1e-6, rtol=1e-6):
        return "with both branches zero the output is a normalised input: the block's output must not be re-normalised (pre-LN adds to the raw residual stream)"
    if matches(y, 2 * x, atol=1e-9, rtol=0):
        return "with both branches zero the output is 2x: the residual is added twice"
    if matches(y, torch.zeros_like(x), atol=1e-12, rtol=0):
        return "with both branches zero the output is 0: the residual connection (X + ...) is missing"
    return "with both branches zero the block must return its input exactly, but it changed it"


def probe_block_output(ns, x, sizes, state):
    block = _block(ns, sizes, state)
    with torch.no_grad():
        return {"y": block(x.clone())[0]}


def judge_block_causal(out, inputs, expected):
    return causal_diagnosis(out["x"]["y"], out["changed"]["y"], inputs["_first_changed"], "the block")


def _causal_inputs(g, sizes, state_maker):
    B, T, d = 2, 6, sizes["d_model"]
    x = torch.randn(B, T, d, generator=g, dtype=torch.float64)
    changed = x.clone()
    changed[:, 4:] = torch.randn(B, T - 4, d, generator=g, dtype=torch.float64)
    return {"x": x, "changed": changed, "_first_changed": 4, "sizes": sizes, "state": state_maker(g, sizes)}


def random_block_state(g, sizes):
    d, f = sizes["d_model"], sizes["d_ff"]
    r = lambda *shape, s=0.5: torch.randn(*shape, generator=g, dtype=torch.float64) * s  # noqa: E731
    return {"ln_attention.weight": 1 + r(d, s=0.3), "ln_attention.bias": r(d, s=0.3),
            "attention.q_proj.weight": r(d, d), "attention.k_proj.weight": r(d, d),
            "attention.v_proj.weight": r(d, d), "attention.o_proj.weight": r(d, d),
            "ln_feedforward.weight": 1 + r(d, s=0.3), "ln_feedforward.bias": r(d, s=0.3),
            "feedforward.fc1.weight": r(f, d), "feedforward.fc1.bias": r(f),
            "feedforward.fc2.weight": r(d, f), "feedforward.fc2.bias": r(d)}


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


def judge_block_example(out, inputs, expected):
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
            y, layer_norm(figure, torch.ones(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64)), atol=1e-6, rtol=0):
        return "Example 1's output is normalised: pre-LN normalises the branch inputs, never the block output (post-LN is a different block)"
    if matches(y, torch.tensor([[[-0.0793278, 0.4206696]]], dtype=torch.float64), atol=5e-7, rtol=0):
        return "Example 1 returns only the increment: add the residual (U + F(LN2(U)))"
    return "Example 1 should give (0.9206722, 3.4206696), with increment difference 0.49999750"


BLOCK_FORMULA_MISTAKES = {
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


def probe_block_formula(ns, x, sizes, state):
    """The block's output and its own parts composed as the lesson's formula says, right
    and in the classic wrong orders."""
    block = _block(ns, sizes, state)
    with torch.no_grad():
        y = block(x.clone())[0]
        attn = lambda h: block.attention(h)[0]  # noqa: E731
        ffn, ln1, ln2 = block.feedforward, block.ln_attention, block.ln_feedforward
        u = x + attn(ln1(x))
        right = u + ffn(ln2(u))
        first = x + ffn(ln2(x))
        post_u = ln1(x + attn(x))
        a_only = attn(ln1(x))
        swapped_u = x + attn(ln2(x))
        composed = {
            "right": right,
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
    return {"y": y, "composed": composed}


def judge_block_formula(out, inputs, expected):
    composed = out["composed"]
    if problem := shape_problem(out["y"], inputs["x"].shape, "the block output"):
        return problem
    if matches(out["y"], composed["right"], atol=1e-9, rtol=1e-7):
        return None
    known = first_diagnosis(out["y"], [(text, composed[label]) for label, text in BLOCK_FORMULA_MISTAKES.items()],
                            atol=1e-7, rtol=1e-6)
    return known or (compare(out["y"], composed["right"], "the block output", atol=1e-9, rtol=1e-7)
                     + ": it is not U + F(LN2(U)) with U = X + A(LN1(X)) computed with the block's own parts")


def _block_mistakes(ref, inputs):
    """Outputs of the classic wrong blocks, built from reference parts."""
    block = ref.model.TransformerBlock(_config(ref, **inputs["sizes"]))
    _loaded(block, inputs["state"])
    x = inputs["x"]
    with torch.no_grad():
        attn = lambda h: block.attention(h)[0]  # noqa: E731
        ffn, ln1, ln2 = block.feedforward, block.ln_attention, block.ln_feedforward
        u = x + attn(ln1(x))
        right = u + ffn(ln2(u))
        post_u = ln1(x + attn(x))
        return {
            "right": right,
            "mistakes": [
                ("the block is post-LN (normalising after the residual add); this course's block is pre-LN: "
                 "U = X + A(LN1(X)), Y = U + F(LN2(U))", ln2(post_u + ffn(post_u))),
                ("the output is re-normalised: pre-LN adds the increments to the raw residual stream",
                 ln2(right)),
                ("the feed-forward branch reads X instead of U = X + A(LN1(X))", u + ffn(ln2(x))),
                (BLOCK_FORMULA_MISTAKES["branches_swapped_norms"],
                 (x + attn(ln2(x))) + ffn(ln1(x + attn(ln2(x))))),
                (BLOCK_FORMULA_MISTAKES["feedforward_first"],
                 (x + ffn(ln2(x))) + attn(ln1(x + ffn(ln2(x))))),
                ("one LayerNorm is used for both branches; each branch has its own", u + ffn(ln1(u))),
                ("the feed-forward residual is missing (Y = F(LN2(U)))", ffn(ln2(u))),
                ("the attention residual is missing (U = A(LN1(X)))", attn(ln1(x)) + ffn(ln2(attn(ln1(x))))),
                ("an increment is broadcast from [B, 1, d]: add each position's own increment",
                 x + attn(ln1(x))[:, -1:, :] + ffn(ln2(x + attn(ln1(x))[:, -1:, :]))),
            ],
        }


def judge_block_reference(out, inputs, expected):
    if compare(out["y"], expected["right"], atol=1e-9, rtol=1e-7) is None:
        return None
    known = first_diagnosis(out["y"], expected["mistakes"], atol=1e-7, rtol=1e-6)
    return known or compare(out["y"], expected["right"], "the block output", atol=1e-9, rtol=1e-7)


def _random_block_inputs(g):
    sizes = {"d_model": 8, "n_heads": 2, "d_ff": 16}
    return {"x": torch.randn(2, 5, 8, generator=g, dtype=torch.float64), "sizes": sizes,
            "state": random_block_state(g, sizes)}


def probe_block_cache(ns, x, sizes, state, split, part, earlier):
    block = _block(ns, sizes, state)
    with torch.no_grad():
        if part == "full":
            return {"full": block(x.clone())[0]}
        first, present = block(x[:, :split].clone(), None, True)
        rest, _ = block(x[:, split:].clone(), present, True)
    return {"stepwise": torch.cat([first, rest], dim=1)}


def judge_block_cache(out, inputs, expected):
    if problem := compare(out["stepwise"], out["full"], "the cached block output", atol=1e-9, rtol=1e-7):
        return f"running the block in two calls through the KV cache differs from one call: {problem}"
    return None


# ----------------------------------------------------------------------- checks

WALK_THROUGH = {"d_model": 4, "n_heads": 2, "d_ff": 8}

CHECKS = [
    check("ch05.layer_norm.example_figures", "layer_norm", 2,
          "(1, 3) normalises to ±1/sqrt(1.00001), not the d - 1 figure ±0.7071",
          probe_layer_norm, judge_layer_norm_figures,
          inputs=lambda g: {"x": torch.tensor([[1.0, 3.0]], dtype=torch.float64)}),
    check("ch05.layer_norm.constant_vector", "layer_norm", 1,
          "a constant vector (2, 2) gives exactly beta, with no division by zero",
          probe_layer_norm, judge_layer_norm_constant,
          inputs=lambda g: {"x": torch.tensor([[2.0, 2.0]], dtype=torch.float64),
                            "gamma": torch.tensor([2.0, 5.0], dtype=torch.float64),
                            "beta": torch.tensor([0.3, -0.7], dtype=torch.float64)}),
    check("ch05.layer_norm.shift_invariance", "layer_norm", 1,
          "adding a constant to every feature changes nothing",
          probe_layer_norm_shift, judge_layer_norm_shift,
          inputs=lambda g: {"x": torch.tensor([[[1.0, 3.0, -2.0, 0.5]]], dtype=torch.float64), "shift": 7.25}),
    check("ch05.layer_norm.defaults", "layer_norm", 1, "eps is 1e-5, gamma starts at 1 and beta at 0",
          probe_layer_norm, judge_layer_norm_defaults,
          inputs=lambda g: {"x": torch.tensor([[1.0, 3.0, -2.0, 0.5]], dtype=torch.float64)}),
    check("ch05.layer_norm.each_position_alone", "layer_norm", 1,
          "x [2, 3, 4] normalised at once equals each position normalised alone: statistics over the last axis only",
          probe_layer_norm_rows, judge_layer_norm_rows,
          inputs=lambda g: {"x": torch.randn(2, 3, 4, generator=g, dtype=torch.float64) * 2 + 0.5,
                            "gamma": torch.rand(4, generator=g, dtype=torch.float64) + 0.5,
                            "beta": torch.randn(4, generator=g, dtype=torch.float64)}),
    check("ch05.layer_norm.matches_reference", "layer_norm", 3,
          "random [B, T, d] inputs with random gamma and beta match the reference",
          probe_layer_norm, judge_layer_norm_reference, inputs=_random_norm_inputs,
          expect=_expect_layer_norm, hidden=True),
    check("ch05.gelu.exact_values", "gelu", 2,
          "gelu equals x * Phi(x) with erf, to 1e-9: the tanh form (off by ~5e-4) fails",
          probe_gelu, judge_gelu_values,
          inputs=lambda g: {"x": torch.tensor([-4.0, -3.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 3.0, 4.0],
                                              dtype=torch.float64)}),
    check("ch05.gelu.odd_part", "gelu", 1, "g(a) - g(-a) = a for every a",
          probe_gelu_odd_part, judge_gelu_odd_part,
          inputs=lambda g: {"a": torch.linspace(-3, 3, 13, dtype=torch.float64)}),
    check("ch05.gelu.matches_reference", "gelu", 2, "random tensors of any shape match the reference",
          probe_gelu, judge_gelu_values,
          inputs=lambda g: {"x": torch.randn(3, 4, 5, generator=g, dtype=torch.float64) * 2}, hidden=True),
    check("ch05.feedforward.example_1", "feedforward", 2,
          "Example 1 (W1 = I, W2 = ½I) gives the increment (-0.0793278, 0.4206696)",
          probe_feedforward, judge_feedforward_example, inputs=lambda g: _example_feedforward_inputs()),
    check("ch05.feedforward.matches_reference", "feedforward", 3,
          "random weights and inputs give fc2(gelu(fc1(x)))",
          probe_feedforward, judge_feedforward, inputs=_random_feedforward_inputs, hidden=True),
    check("ch05.block_init.parameter_ledger", "block_init", 2,
          "the block has ln_attention, attention, ln_feedforward, feedforward (two separate norms) "
          "and 4d² + 2df + f + 5d parameters",
          probe_block_parts, judge_block_parts, inputs=lambda g: {"sizes": WALK_THROUGH}),
    check("ch05.block_init.parameter_ledger_wide", "block_init", 1,
          "the ledger holds for d=64, h=4, f=256 (49,728 per block)",
          probe_block_parts, judge_block_parts,
          inputs=lambda g: {"sizes": {"d_model": 64, "n_heads": 4, "d_ff": 256}}, hidden=True),
    check("ch05.block.shape", "block", 2,
          "B=2, T=3, d=4, h=2, f=8: output [2, 3, 4], cached keys/values [2, 2, 3, 2]",
          probe_block_forward, judge_block_shape,
          inputs=lambda g: {"x": torch.randn(2, 3, 4, generator=g, dtype=torch.float64), "sizes": WALK_THROUGH}),
    check("ch05.block.zero_branch_identity", "block", 2,
          "with both branches outputting zero the block returns its input exactly",
          probe_block_forward, judge_zero_branch,
          inputs=lambda g: {"x": torch.randn(2, 3, 4, generator=g, dtype=torch.float64) * 2 + 1,
                            "sizes": WALK_THROUGH, "state": _zeroed_branches(WALK_THROUGH)}),
    check("ch05.block.causal_invariance", "block", 2,
          "changing tokens 4.. leaves the block's outputs at positions 0..3 unchanged",
          probe_block_output, judge_block_causal,
          inputs=lambda g: _causal_inputs(g, WALK_THROUGH, random_block_state),
          separately=("x", "changed")),
    check("ch05.block.example_1", "block", 2,
          "Example 1 gives (0.9206722, 3.4206696); increment difference 0.49999750",
          probe_block_forward, judge_block_example, inputs=lambda g: _example_block_inputs()),
    check("ch05.block.formula", "block", 2,
          "random weights (distinct norms): the output is U + F(LN2(U)), U = X + A(LN1(X)), of the block's own parts",
          probe_block_formula, judge_block_formula, inputs=_random_block_inputs),
    check("ch05.block.matches_reference", "block", 3,
          "random weights (distinct norms) and inputs match the reference pre-LN block",
          probe_block_forward, judge_block_reference, inputs=_random_block_inputs,
          expect=_block_mistakes, hidden=True),
    check("ch05.block.cache_consistent", "block", 1,
          "two calls through the KV cache equal one full call",
          probe_block_cache, judge_block_cache,
          inputs=lambda g: {**_random_block_inputs(g), "split": 3}, hidden=True, parts=("full", "stepwise")),
]
