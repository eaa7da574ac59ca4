"""Chapter 06: backward passes by hand (LayerNorm, GELU, linear, the residual branch).

Every hand-written gradient is compared, in float64, with what autograd gives on the
same forward. Autograd runs here in the grader (in the judge), never in the sandbox:
the tasks forbid it there. A second, gradcheck-style property asks each gradient to
agree with central finite differences of the forward along a random direction.
"""

from __future__ import annotations

import math

import torch

from grader.checks._api import (
    GELU_KERNELS, NORM_KERNELS, Task, check, compare, exact_gelu, first_diagnosis, layer_norm, matches, shape_problem,
)

CHAPTER, TITLE = "06", "Backward by hand"
EPS = 1e-5

NO_AUTOGRAD = ("torch.autograd.grad", "torch.autograd.backward", "torch.Tensor.backward",
               "torch.autograd.functional.vjp", "torch.autograd.functional.jacobian",
               "torch.func.grad", "torch.func.grad_and_value",
               "torch.func.vjp", "torch.func.jacrev", "torch.func.jacfwd")

# At run time: no autograd of any kind, and none of torch's backward kernels.
BY_HAND = dict(no_autograd=True, forbidden_ops=("*_backward", "*_backward_*") + NORM_KERNELS + GELU_KERNELS)

TASKS = [
    Task("layer_norm_backward", "backward", "layer_norm_backward", "LayerNorm's backward",
         forbidden=NO_AUTOGRAD, forbidden_methods=("backward",), **BY_HAND),
    Task("gelu_backward", "backward", "gelu_backward", "GELU's backward",
         forbidden=NO_AUTOGRAD, forbidden_methods=("backward",), **BY_HAND),
    Task("linear_backward", "backward", "linear_backward", "the linear layer's backward",
         forbidden=NO_AUTOGRAD, forbidden_methods=("backward",), **BY_HAND),
    Task("residual_backward", "backward", "residual_feedforward_backward",
         "the backward of the residual feed-forward half-block",
         forbidden=NO_AUTOGRAD, forbidden_methods=("backward",), **BY_HAND),
]

ATOL, RTOL = 1e-9, 1e-7  # exact up to float64 rounding, any correct algebra
NEAR = dict(atol=1e-8, rtol=1e-6)  # reproducing a known mistake

# ------------------------------------------------------------------- forwards
# The forwards the backwards belong to, in plain torch. The judges run autograd and
# finite differences on them, in the grader.


def _linear(x, weight, bias):
    return x @ weight.T + bias


def _residual(x, gamma, beta, w1, b1, w2, b2):
    return x + _linear(exact_gelu(_linear(layer_norm(x, gamma, beta), w1, b1)), w2, b2)


def _autograd(forward, grad_out, *tensors):
    """The gradients autograd gives for sum(grad_out * forward(*tensors))."""
    leaves = [t.detach().clone().double().requires_grad_(True) for t in tensors]
    with torch.enable_grad():
        y = forward(*leaves)
        # <y, grad_out> as a scalar: the same vector-Jacobian product, without the
        # grad_outputs path that makes torch import its symbolic-shape machinery (~0.3 s).
        return [g.detach() for g in torch.autograd.grad((y * grad_out.double()).sum(), leaves)]


def _directional(forward, grad_out, tensors, which, direction, h=1e-6):
    """Central finite difference of sum(grad_out * forward) along `direction` in input `which`."""
    plus = [t.clone() for t in tensors]
    minus = [t.clone() for t in tensors]
    plus[which] = plus[which] + h * direction
    minus[which] = minus[which] - h * direction
    with torch.no_grad():
        return ((grad_out * (forward(*plus) - forward(*minus))).sum() / (2 * h)).item()


def _shipped(out):
    return {"grads": [v for v in out] if isinstance(out, (tuple, list)) else out}


def _returned(out, names: tuple[str, ...], function: str) -> "str | None":
    grads = out["grads"] = [v for v in out["grads"]] if isinstance(out["grads"], list) else out["grads"]
    if len(names) == 1:
        return None if isinstance(grads, torch.Tensor) else f"{names[0]} should be a tensor, got {type(grads).__name__}"
    if not isinstance(grads, list) or len(grads) != len(names):
        got = f"{len(grads)} values" if isinstance(grads, list) else type(grads).__name__
        return f"{function} should return ({', '.join(names)}): {len(names)} tensors, got {got}"
    for value, name in zip(grads, names):
        if not isinstance(value, torch.Tensor):
            return f"{name} should be a tensor, got {type(value).__name__}"
    return None


def _as_list(out, names):
    return [out["grads"]] if len(names) == 1 else list(out["grads"])


def _judge_grads(out, names, function, right, shape_mistakes, value_mistakes, atol=ATOL, rtol=RTOL, hidden=False):
    """right: the correct gradients; shape_mistakes[name]: [(shape, why)];
    value_mistakes[name]: [(why, tensor)]. The first wrong gradient is diagnosed.
    Hidden checks name the mistake but print no shapes of their inputs."""
    if problem := _returned(out, names, function):
        return problem
    for name, got, want in zip(names, _as_list(out, names), right):
        if tuple(got.shape) != tuple(want.shape):
            found = f"{name} has the wrong shape" if hidden else \
                f"{name} has shape {list(got.shape)}, expected {list(want.shape)}"
            for shape, why in shape_mistakes.get(name, []):
                if tuple(got.shape) == tuple(shape):
                    return f"{found}: {why}"
            return f"{found} (a gradient has the shape of what it is the gradient of)"
        if not torch.isfinite(got.double()).all():
            return f"{name} contains NaN or inf"
        if compare(got, want, atol=atol, rtol=rtol) is None:
            continue
        known = first_diagnosis(got, [(w, t) for w, t in value_mistakes.get(name, []) if t is not None], **NEAR)
        return known or compare(got, want, name, atol=atol, rtol=rtol)
    return None


def _judge_finite_differences(out, names, function, forward, tensors, grad_out, directions, tolerance=1e-6):
    """gradcheck's idea without autograd: <grad, v> equals the directional derivative."""
    if problem := _returned(out, names, function):
        return problem
    for (name, got), tensor, direction, which in zip(zip(names, _as_list(out, names)), tensors, directions,
                                                      range(len(names))):
        if problem := shape_problem(got, tensor.shape, name):
            return problem
        analytic = (got.double() * direction).sum().item()
        numeric = _directional(forward, grad_out, tensors, which, direction)
        if not math.isfinite(analytic) or abs(analytic - numeric) > tolerance * (1.0 + abs(numeric)):
            return (f"{name} disagrees with central finite differences of the forward along a random "
                    f"direction (your gradient gives {analytic:.6g}, (f(θ + hv) − f(θ − hv)) / 2h gives "
                    f"{numeric:.6g}): it is not the gradient of this forward")
    return None


def _reduced_shapes(x_shape, what):
    """Shapes a per-feature gradient takes when the batch/time sum is done wrong."""
    shape = tuple(x_shape)
    mistakes = [(shape, f"{what} is not summed over batch and time: the same parameter serves every "
                        "position, so its gradient adds up over all of them")]
    if len(shape) > 2:
        mistakes.append((shape[1:], f"{what} is summed over the first (batch) axis only; sum over batch and time"))
    if len(shape) > 1:
        mistakes.append((shape[:-1], f"{what} is summed over the features; sum over every axis but the last"))
    mistakes.append(((), f"{what} is summed over every axis; keep the feature axis"))
    return mistakes


def _random(g, *shape, scale=1.0, shift=0.0):
    return torch.randn(*shape, generator=g, dtype=torch.float64) * scale + shift


# ------------------------------------------------------------------ LayerNorm


def probe_layer_norm_backward(ns, grad_out, x, gamma):
    out = ns.backward.layer_norm_backward(grad_out.clone(), x.clone(), gamma.clone())
    return _shipped(out)


LN_NAMES = ("dx", "dgamma", "dbeta")


def _ln_dx(grad_out, x, gamma, eps=EPS, mean_term=True, variance_term=True, unbiased=False):
    mean = x.mean(dim=-1, keepdim=True)
    centred = x - mean
    count = x.shape[-1] - (1 if unbiased else 0)
    inv_std = 1.0 / torch.sqrt((centred * centred).sum(dim=-1, keepdim=True) / count + eps)
    normalised = centred * inv_std
    dnorm = grad_out * gamma
    dx = dnorm
    if mean_term:
        dx = dx - dnorm.mean(dim=-1, keepdim=True)
    if variance_term:
        dx = dx - normalised * (dnorm * normalised).mean(dim=-1, keepdim=True)
    return dx * inv_std, normalised


def _layer_norm_mistakes(grad_out, x, gamma):
    positions = max(1, grad_out.numel() // grad_out.shape[-1])
    flat = lambda t: t.reshape(-1, t.shape[-1])  # noqa: E731
    _, normalised = _ln_dx(grad_out, x, gamma)
    dgamma = flat(grad_out * normalised).sum(0)
    dbeta = flat(grad_out).sum(0)
    return {
        "dx": [
            ("dx is missing the mean terms: x̂ depends on every feature through the mean and the variance, so "
             "dx = (dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂)) / σ with dx̂ = grad_out·gamma; yours is only dx̂ / σ",
             _ln_dx(grad_out, x, gamma, mean_term=False, variance_term=False)[0]),
            ("dx is missing the mean term that comes from the mean μ: subtract mean(dx̂) over the features",
             _ln_dx(grad_out, x, gamma, mean_term=False)[0]),
            ("dx is missing the term that comes from the variance: subtract x̂·mean(dx̂·x̂) over the features",
             _ln_dx(grad_out, x, gamma, variance_term=False)[0]),
            ("dx ignores gamma: the upstream gradient reaches x̂ multiplied by gamma (dx̂ = grad_out·gamma)",
             _ln_dx(grad_out, x, torch.ones_like(gamma))[0]),
            ("dx leaves eps out of the square root; the forward divides by sqrt(var + eps)",
             _ln_dx(grad_out, x, gamma, eps=0.0)[0]),
            ("dx uses the unbiased variance (divided by d - 1, torch.var's default); the forward's is the "
             "population variance, divided by d", _ln_dx(grad_out, x, gamma, unbiased=True)[0]),
        ],
        "dgamma": [
            ("dgamma uses x instead of the normalised x̂: dgamma = Σ grad_out·x̂", flat(grad_out * x).sum(0)),
            ("dgamma uses x − mean without dividing by σ: dgamma = Σ grad_out·x̂",
             flat(grad_out * (x - x.mean(-1, keepdim=True))).sum(0)),
            ("dgamma averages over the positions; it must sum over batch and time", dgamma / positions),
            ("dgamma is multiplied by gamma; dgamma = Σ grad_out·x̂", dgamma * gamma),
        ],
        "dbeta": [
            ("dbeta averages over the positions; it must sum over batch and time", dbeta / positions),
            ("dbeta is multiplied by gamma; dbeta = Σ grad_out", dbeta * gamma),
        ],
    }


def _layer_norm_shapes(x):
    return {"dgamma": _reduced_shapes(x.shape, "dgamma"), "dbeta": _reduced_shapes(x.shape, "dbeta")}


def judge_layer_norm_autograd(out, inputs, expected):
    g, x, gamma = inputs["grad_out"], inputs["x"], inputs["gamma"]
    right = _autograd(layer_norm, g, x, gamma, inputs["_beta"])
    return _judge_grads(out, LN_NAMES, "layer_norm_backward", right, _layer_norm_shapes(x),
                        _layer_norm_mistakes(g, x, gamma))


def judge_layer_norm_reference(out, inputs, expected):
    g, x, gamma = inputs["grad_out"], inputs["x"], inputs["gamma"]
    return _judge_grads(out, LN_NAMES, "layer_norm_backward", expected, _layer_norm_shapes(x),
                        _layer_norm_mistakes(g, x, gamma), hidden=True)


def judge_layer_norm_dx_sums_to_zero(out, inputs, expected):
    if problem := _returned(out, LN_NAMES, "layer_norm_backward"):
        return problem
    dx = out["grads"][0]
    if problem := shape_problem(dx, inputs["x"].shape, "dx"):
        return problem
    sums = dx.double().sum(dim=-1)
    if not torch.isfinite(sums).all() or sums.abs().max().item() > 1e-9 * (1 + dx.abs().max().item()):
        return ("dx does not sum to zero over the features at each position: adding a constant to every "
                "feature leaves LayerNorm's output unchanged, so the gradient has no component along "
                "(1, ..., 1). The mean terms are missing or wrong")
    return None


def judge_layer_norm_finite_differences(out, inputs, expected):
    tensors = [inputs["x"], inputs["gamma"], inputs["_beta"]]
    return _judge_finite_differences(out, LN_NAMES, "layer_norm_backward", layer_norm, tensors,
                                     inputs["grad_out"], inputs["_directions"])


def _expect_layer_norm(ref, inputs):
    return list(ref.backward.layer_norm_backward(inputs["grad_out"], inputs["x"], inputs["gamma"]))


def _layer_norm_inputs(shape):
    def make(g):
        d = shape[-1]
        x = _random(g, *shape, scale=2.0, shift=1.0)
        gamma, beta = _random(g, d, scale=0.5, shift=1.0), _random(g, d)
        return {"grad_out": _random(g, *shape), "x": x, "gamma": gamma, "_beta": beta,
                "_directions": [_random(g, *shape), _random(g, d), _random(g, d)]}
    return make


# ----------------------------------------------------------------------- GELU


def probe_gelu_backward(ns, grad_out, x):
    return _shipped(ns.backward.gelu_backward(grad_out.clone(), x.clone()))


def _gelu_mistakes(grad_out, x):
    cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
    pdf = torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)
    tanh = torch.tanh(inner)
    tanh_derivative = 0.5 * (1 + tanh) + 0.5 * x * (1 - tanh**2) * math.sqrt(2.0 / math.pi) * (1 + 3 * 0.044715 * x**2)
    return [
        ("the GELU derivative is missing the x·φ(x) term: d/dx [x·Φ(x)] = Φ(x) + x·φ(x) (product rule)",
         grad_out * cdf),
        ("the GELU derivative is missing the Φ(x) term: d/dx [x·Φ(x)] = Φ(x) + x·φ(x) (product rule)",
         grad_out * x * pdf),
        ("the local derivative is not multiplied by grad_out (the chain rule): return grad_out·(Φ(x) + x·φ(x))",
         cdf + x * pdf),
        ("φ(x) is missing its normalising factor 1/sqrt(2π): φ(x) = exp(−x²/2) / sqrt(2π)",
         grad_out * (cdf + x * pdf * math.sqrt(2.0 * math.pi))),
        ("φ(x) uses exp(−x²) instead of exp(−x²/2)",
         grad_out * (cdf + x * torch.exp(-x * x) / math.sqrt(2.0 * math.pi))),
        ("this is the derivative of the tanh approximation of GELU; differentiate the exact x·Φ(x)",
         grad_out * tanh_derivative),
        ("this is ReLU's derivative (a step); GELU's is Φ(x) + x·φ(x)", grad_out * (x > 0).double()),
        ("this is the forward GELU, not its derivative", grad_out * x * cdf),
    ]


def judge_gelu_autograd(out, inputs, expected):
    g, x = inputs["grad_out"], inputs["x"]
    right = _autograd(exact_gelu, g, x)
    return _judge_grads(out, ("dx",), "gelu_backward", right, {}, {"dx": _gelu_mistakes(g, x)})


def judge_gelu_reference(out, inputs, expected):
    g, x = inputs["grad_out"], inputs["x"]
    return _judge_grads(out, ("dx",), "gelu_backward", [expected], {}, {"dx": _gelu_mistakes(g, x)}, hidden=True)


def judge_gelu_key_values(out, inputs, expected):
    # grad_out = 1: the derivative itself. GELU'(0) = 1/2, GELU'(±1) = Φ(±1) ± φ(1), → 1 and → 0 far out.
    figures = torch.tensor([0.5, 1.0833154705876864, -0.0833154705876864, 1.0, 0.0], dtype=torch.float64)
    dx = out["grads"]
    if problem := shape_problem(dx, figures.shape, "dx"):
        return problem
    if matches(dx, figures, atol=1e-9, rtol=0):
        return None
    known = first_diagnosis(dx, _gelu_mistakes(inputs["grad_out"], inputs["x"]), **NEAR)
    lead = "at x = 0, 1, −1, 8, −8 the derivative should be 0.5, 1.0833155, −0.0833155, 1, 0"
    return f"{lead}: {known}" if known else f"{lead}; {compare(dx, figures, 'dx', atol=1e-9, rtol=0)}"


def judge_gelu_finite_differences(out, inputs, expected):
    return _judge_finite_differences(out, ("dx",), "gelu_backward", exact_gelu, [inputs["x"]], inputs["grad_out"],
                                     inputs["_directions"])


def _expect_gelu(ref, inputs):
    return ref.backward.gelu_backward(inputs["grad_out"], inputs["x"])


def _gelu_inputs(g):
    x = torch.linspace(-6, 6, 61, dtype=torch.float64).reshape(61)[torch.randperm(61, generator=g)].reshape(1, 61)
    x = torch.cat([x, _random(g, 2, 61, scale=2.0)]).reshape(3, 61)
    return {"grad_out": _random(g, 3, 61), "x": x, "_directions": [_random(g, 3, 61)]}


# --------------------------------------------------------------------- linear


def probe_linear_backward(ns, grad_out, x, weight):
    out = ns.backward.linear_backward(grad_out.clone(), x.clone(), weight.clone())
    return _shipped(out)


LINEAR_NAMES = ("dx", "dweight", "dbias")


def _linear_shapes(grad_out, x, weight):
    out_features, in_features = weight.shape
    dweight = [((in_features, out_features), "dweight is transposed: nn.Linear stores weight as [out, in], so "
                                             "dweight = grad_outᵀ · x has shape [out, in]")]
    if x.dim() > 2:
        dweight += [(tuple(x.shape[:-2]) + (out_features, in_features),
                     "dweight is not summed over the batch: every position uses the same W, so add up its "
                     "contributions from all of them"),
                    (tuple(x.shape[:-2]) + (in_features, out_features),
                     "dweight is transposed and not summed over the batch")]
    return {"dx": [(tuple(x.shape[:-1]) + (out_features,),
                    "dx has grad_out's shape; dx = grad_out @ W has x's shape [..., in]")],
            "dweight": dweight,
            "dbias": _reduced_shapes(grad_out.shape, "dbias")}


def _linear_mistakes(grad_out, x, weight):
    flat_g = grad_out.reshape(-1, grad_out.shape[-1])
    flat_x = x.reshape(-1, x.shape[-1])
    positions = flat_g.shape[0]
    dweight = flat_g.T @ flat_x
    mistakes = {
        "dx": [("dx uses Wᵀ: with nn.Linear's [out, in] weight, y = x Wᵀ + b gives dx = grad_out @ W",
                grad_out @ weight.T if weight.shape[0] == weight.shape[1] else None)],
        "dweight": [("dweight is transposed: nn.Linear stores weight as [out, in], so dweight = grad_outᵀ · x",
                     dweight.T if weight.shape[0] == weight.shape[1] else None),
                    ("dweight averages over the positions; it must sum them", dweight / positions)],
        "dbias": [("dbias averages over the positions; it must sum them", flat_g.sum(0) / positions)],
    }
    return mistakes


def judge_linear_autograd(out, inputs, expected):
    g, x, w = inputs["grad_out"], inputs["x"], inputs["weight"]
    right = _autograd(_linear, g, x, w, inputs["_bias"])
    return _judge_grads(out, LINEAR_NAMES, "linear_backward", right, _linear_shapes(g, x, w),
                        _linear_mistakes(g, x, w))


def judge_linear_reference(out, inputs, expected):
    g, x, w = inputs["grad_out"], inputs["x"], inputs["weight"]
    return _judge_grads(out, LINEAR_NAMES, "linear_backward", expected, _linear_shapes(g, x, w),
                        _linear_mistakes(g, x, w), hidden=True)


def judge_linear_finite_differences(out, inputs, expected):
    tensors = [inputs["x"], inputs["weight"], inputs["_bias"]]
    return _judge_finite_differences(out, LINEAR_NAMES, "linear_backward", _linear, tensors, inputs["grad_out"],
                                     inputs["_directions"])


def _expect_linear(ref, inputs):
    return list(ref.backward.linear_backward(inputs["grad_out"], inputs["x"], inputs["weight"]))


def _linear_inputs(x_shape, out_features):
    def make(g):
        in_features = x_shape[-1]
        x, w, b = _random(g, *x_shape), _random(g, out_features, in_features), _random(g, out_features)
        out_shape = tuple(x_shape[:-1]) + (out_features,)
        return {"grad_out": _random(g, *out_shape), "x": x, "weight": w, "_bias": b,
                "_directions": [_random(g, *x_shape), _random(g, out_features, in_features), _random(g, out_features)]}
    return make


# ------------------------------------------------------------------- residual


RESIDUAL_NAMES = ("dx", "dgamma", "dbeta", "dw1", "db1", "dw2", "db2")
RESIDUAL_ARGS = ("x", "gamma", "beta", "w1", "b1", "w2", "b2")


def probe_residual_backward(ns, grad_out, x, gamma, beta, w1, b1, w2, b2):
    out = ns.backward.residual_feedforward_backward(grad_out.clone(), x.clone(), gamma.clone(), beta.clone(),
                                                    w1.clone(), b1.clone(), w2.clone(), b2.clone())
    return _shipped(out)


def _residual_mistakes(grad_out, right):
    dx = right[0]
    return {"dx": [("the residual (skip) gradient is missing: y = x + F(x), so dx = grad_out + the branch's dx",
                    dx - grad_out),
                   ("dx is only the skip path: the branch's gradient (through LayerNorm, fc1, GELU, fc2) "
                    "must be added to grad_out", grad_out),
                   ("the skip gradient is added twice: dx = grad_out + the branch's dx, once", dx + grad_out)]}


def _residual_shapes(inputs):
    x, w1, w2 = inputs["x"], inputs["w1"], inputs["w2"]
    transposed = "it is transposed: keep nn.Linear's [out, in] layout"
    return {"dgamma": _reduced_shapes(x.shape, "dgamma"), "dbeta": _reduced_shapes(x.shape, "dbeta"),
            "dw1": [(tuple(w1.shape[::-1]), transposed)], "dw2": [(tuple(w2.shape[::-1]), transposed)],
            "db1": _reduced_shapes(tuple(x.shape[:-1]) + (w1.shape[0],), "db1"),
            "db2": _reduced_shapes(x.shape, "db2")}


def judge_residual_autograd(out, inputs, expected):
    g = inputs["grad_out"]
    right = _autograd(_residual, g, *(inputs[name] for name in RESIDUAL_ARGS))
    return _judge_grads(out, RESIDUAL_NAMES, "residual_feedforward_backward", right, _residual_shapes(inputs),
                        _residual_mistakes(g, right))


def judge_residual_reference(out, inputs, expected):
    return _judge_grads(out, RESIDUAL_NAMES, "residual_feedforward_backward", expected, _residual_shapes(inputs),
                        _residual_mistakes(inputs["grad_out"], expected), hidden=True)


def judge_residual_dead_branch(out, inputs, expected):
    if problem := _returned(out, RESIDUAL_NAMES, "residual_feedforward_backward"):
        return problem
    g = inputs["grad_out"]
    dx = out["grads"][0]
    if problem := shape_problem(dx, g.shape, "dx"):
        return problem
    if matches(dx, g, atol=1e-12, rtol=0):
        return None
    if matches(dx, torch.zeros_like(g), atol=1e-12, rtol=0):
        return ("with fc2's weight zero the branch passes no gradient, yet dx is 0: the residual (skip) gradient "
                "is missing: dx = grad_out + the branch's dx")
    if matches(dx, 2 * g, atol=1e-12, rtol=0):
        return "with fc2's weight zero dx is 2·grad_out: the skip gradient is added twice"
    return ("with fc2's weight zero the branch passes no gradient, so dx must equal grad_out exactly "
            "(the skip path carries it unchanged); yours differs")


def judge_residual_finite_differences(out, inputs, expected):
    tensors = [inputs[name] for name in RESIDUAL_ARGS]
    return _judge_finite_differences(out, RESIDUAL_NAMES, "residual_feedforward_backward", _residual, tensors,
                                     inputs["grad_out"], inputs["_directions"])


def _expect_residual(ref, inputs):
    return list(ref.backward.residual_feedforward_backward(inputs["grad_out"],
                                                           *(inputs[name] for name in RESIDUAL_ARGS)))


def _residual_inputs(x_shape, f, dead=False):
    def make(g):
        d = x_shape[-1]
        tensors = {"x": _random(g, *x_shape, scale=1.5, shift=0.5), "gamma": _random(g, d, scale=0.5, shift=1.0),
                   "beta": _random(g, d, scale=0.5), "w1": _random(g, f, d, scale=0.7), "b1": _random(g, f, scale=0.5),
                   "w2": _random(g, d, f, scale=0.7), "b2": _random(g, d, scale=0.5)}
        if dead:
            tensors["w2"] = torch.zeros(d, f, dtype=torch.float64)
        directions = [_random(g, *tensors[name].shape) for name in RESIDUAL_ARGS]
        return {"grad_out": _random(g, *x_shape), **tensors, "_directions": directions}
    return make


# ----------------------------------------------------------------------- checks

CHECKS = [
    check("ch06.layer_norm_backward.matches_autograd", "layer_norm_backward", 3,
          "x [2, 3, 5]: dx, dgamma, dbeta equal autograd's gradients of the same LayerNorm (float64)",
          probe_layer_norm_backward, judge_layer_norm_autograd, inputs=_layer_norm_inputs((2, 3, 5))),
    check("ch06.layer_norm_backward.dx_sums_to_zero", "layer_norm_backward", 1,
          "dx sums to zero over the features at every position (LayerNorm ignores a constant shift)",
          probe_layer_norm_backward, judge_layer_norm_dx_sums_to_zero, inputs=_layer_norm_inputs((4, 6))),
    check("ch06.layer_norm_backward.finite_differences", "layer_norm_backward", 1,
          "each gradient agrees with central finite differences of the forward (gradcheck's test)",
          probe_layer_norm_backward, judge_layer_norm_finite_differences, inputs=_layer_norm_inputs((3, 4))),
    check("ch06.layer_norm_backward.matches_reference", "layer_norm_backward", 2,
          "4-D inputs with random gamma match the reference gradients",
          probe_layer_norm_backward, judge_layer_norm_reference, inputs=_layer_norm_inputs((2, 2, 3, 7)),
          expect=_expect_layer_norm, hidden=True),
    check("ch06.layer_norm_backward.single_vector", "layer_norm_backward", 1,
          "a single vector x [d] gives dx, dgamma, dbeta of shape [d]",
          probe_layer_norm_backward, judge_layer_norm_reference, inputs=_layer_norm_inputs((6,)),
          expect=_expect_layer_norm, hidden=True),
    check("ch06.gelu_backward.matches_autograd", "gelu_backward", 2,
          "x from −6 to 6 and random: dx equals autograd's gradient of the exact GELU x·Φ(x)",
          probe_gelu_backward, judge_gelu_autograd, inputs=_gelu_inputs),
    check("ch06.gelu_backward.key_values", "gelu_backward", 1,
          "GELU'(0) = 0.5, GELU'(±1) = Φ(±1) ± φ(1), → 1 for large x, → 0 for very negative x",
          probe_gelu_backward, judge_gelu_key_values,
          inputs=lambda g: {"grad_out": torch.ones(5, dtype=torch.float64),
                            "x": torch.tensor([0.0, 1.0, -1.0, 8.0, -8.0], dtype=torch.float64)}),
    check("ch06.gelu_backward.finite_differences", "gelu_backward", 1,
          "dx agrees with central finite differences of GELU (gradcheck's test)",
          probe_gelu_backward, judge_gelu_finite_differences, inputs=_gelu_inputs),
    check("ch06.gelu_backward.matches_reference", "gelu_backward", 2,
          "random tensors of another shape match the reference gradient",
          probe_gelu_backward, judge_gelu_reference,
          inputs=lambda g: {"grad_out": _random(g, 2, 3, 4, 5), "x": _random(g, 2, 3, 4, 5, scale=2.5)},
          expect=_expect_gelu, hidden=True),
    check("ch06.linear_backward.matches_autograd", "linear_backward", 3,
          "x [2, 3, 4], W [6, 4]: dx, dW, db equal autograd's gradients of x Wᵀ + b",
          probe_linear_backward, judge_linear_autograd, inputs=_linear_inputs((2, 3, 4), 6)),
    check("ch06.linear_backward.finite_differences", "linear_backward", 1,
          "each gradient agrees with central finite differences of x Wᵀ + b (gradcheck's test)",
          probe_linear_backward, judge_linear_finite_differences, inputs=_linear_inputs((5, 3), 2)),
    check("ch06.linear_backward.matches_reference", "linear_backward", 2,
          "4-D inputs and a square weight match the reference gradients",
          probe_linear_backward, judge_linear_reference, inputs=_linear_inputs((2, 2, 3, 5), 5),
          expect=_expect_linear, hidden=True),
    check("ch06.residual_backward.matches_autograd", "residual_backward", 3,
          "x [2, 3, 4], f = 8: all seven gradients of x + fc2(gelu(fc1(LN(x)))) equal autograd's",
          probe_residual_backward, judge_residual_autograd, inputs=_residual_inputs((2, 3, 4), 8)),
    check("ch06.residual_backward.dead_branch", "residual_backward", 1,
          "with fc2's weight zero, dx equals grad_out exactly: the skip path passes it unchanged",
          probe_residual_backward, judge_residual_dead_branch, inputs=_residual_inputs((2, 3, 4), 8, dead=True)),
    check("ch06.residual_backward.finite_differences", "residual_backward", 1,
          "each gradient agrees with central finite differences of the half-block (gradcheck's test)",
          probe_residual_backward, judge_residual_finite_differences, inputs=_residual_inputs((3, 4), 6)),
    check("ch06.residual_backward.matches_reference", "residual_backward", 2,
          "other shapes (x [3, 2, 6], f = 10) match the reference gradients",
          probe_residual_backward, judge_residual_reference, inputs=_residual_inputs((3, 2, 6), 10),
          expect=_expect_residual, hidden=True),
]
