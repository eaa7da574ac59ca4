"""LayerNorm over the last axis.

The checks pin the lesson's figures and the classic mistakes: (1, 3) normalises to
±1/sqrt(1.00001) (the population variance, eps = 1e-5 inside the square root), a
constant vector gives exactly beta, a shift of every feature changes nothing, gamma
starts at 1 and beta at 0, and each position is normalised with its own statistics.
Every input is [B, T, d], as the lesson promises (a LayerNorm that unpacks
`B, T, C = x.shape` is right). What each classic mistake (MISTAKES), and
each pair of the formula's slips made at once (LAYER_NORM_SLIPS), outputs on the
public checks' fixed inputs is data the kit computed (grader/checks/facts.py). torch's
LayerNorm (and its other norm kernels) score 'forbidden'.
"""

from __future__ import annotations

import itertools
import math

import torch

from grader.checks._api import (
    NORM_KERNELS, Task, check, compare, constant, first_diagnosis, float32_close, float32_verdict, kind_of, matches,
    matches_to_float32, named, shape_problem, torch_library_except,
)
from grader.checks.course import EPS
from grader.checks.facts import known_facts

TASKS = [
    Task("layer_norm", "model", "LayerNorm.forward", "LayerNorm over the last axis",
         forbidden=("torch.nn.functional.layer_norm", "torch.layer_norm", "torch.nn.LayerNorm",
                    "torch.nn.functional.group_norm", "torch.nn.functional.rms_norm"),
         forbidden_ops=NORM_KERNELS + torch_library_except(), takes=(("x", 3),)),
]

# ----------------------------------------------------------------------- helpers


# Each mistake by name; what it outputs is computed under the same name (hidden.py).
MISTAKES = {
    "d_minus_1": "the variance is divided by d - 1 instead of d (use the population variance)",
    "no_eps": "eps is missing from the square root",
    "eps_outside": "eps is added outside the square root; it belongs inside: sqrt(var + eps)",
    "no_affine": "gamma and beta are not applied",
    "time_axis": "the statistics are taken over the time axis; take them over the last (feature) axis only",
    "all_axes": "the statistics are taken over all axes; take them over the last (feature) axis only",
}

# The formula's parts a LayerNorm can get wrong together, as well-known implementations do
# (torch's std, which divides by d - 1, with eps added to it: std + eps). Every pair and
# the triple are named, after the single mistakes, slip by slip in this order.
LAYER_NORM_SLIPS = {
    "d_minus_1": "the variance is divided by d - 1 instead of d (x.std() and x.var() do that unless given "
                 "correction=0)",
    "no_eps": "eps is missing",
    "eps_outside": "eps is added outside the square root (std + eps), where it belongs inside: sqrt(var + eps)",
    "no_affine": "gamma and beta are not applied",
}
EPS_SLIPS = ("no_eps", "eps_outside")  # two ways of misplacing the same eps: never made together


def slip_combinations() -> list[tuple[str, ...]]:
    """The pairs and triples of LAYER_NORM_SLIPS one LayerNorm can make at once."""
    names = list(LAYER_NORM_SLIPS)
    found = []
    for size in (2, 3):
        for combination in itertools.combinations(names, size):
            if not set(EPS_SLIPS) <= set(combination):
                found.append(combination)
    return found


def combination_text(combination: tuple[str, ...]) -> str:
    return f"{constant(len(combination))} slips at once: " + "; ".join(constant(LAYER_NORM_SLIPS[name]) for name in combination)


def combination_name(combination: tuple[str, ...]) -> str:
    return "+".join(combination)


def layer_norm_mistake_texts() -> dict[str, str]:
    """Every mistake the checks name, by name: the single ones, then each combination of slips."""
    return MISTAKES | {combination_name(c): combination_text(c) for c in slip_combinations()}


def named_mistakes(outputs: dict) -> list:
    """[(sentence, output)] of the mistakes whose outputs are given by name."""
    return named(layer_norm_mistake_texts(), outputs)


def near_figure(y) -> "str | None":
    """What (1, 3)'s output ±1/s says when it matches no known mistake exactly: s² near
    2 is the d - 1 variance, s² near 1 the right variance with eps entered another way."""
    if not isinstance(y, torch.Tensor) or y.numel() != 2 or not torch.isfinite(y.double()).all():
        return None
    low, high = (float(v) for v in y.double().reshape(-1))
    if not (high > 0 and abs(low + high) <= 1e-9 * max(1.0, high)):
        return None
    denominator_squared = 1.0 / (high * high)
    if abs(denominator_squared - 2.0) < 1e-3:
        return (f"its output ±{high:.9f} is the d - 1 figure ±0.7071 to within eps: the variance is divided by d - 1 "
                f"instead of d (x.std() and x.var() do that unless given correction=0), and eps = 1e-5 does not "
                f"enter as sqrt(var + eps) either")
    if abs(denominator_squared - 1.0) < 1e-3:
        return (f"its output ±{high:.9f} has the population variance right, but eps = 1e-5 does not enter as "
                f"sqrt(var + eps)")
    return None


def probe_layer_norm(ns, x, gamma=None, beta=None):
    norm = ns.model.LayerNorm(x.shape[-1]).double()
    with torch.no_grad():
        if gamma is not None:
            norm.weight.copy_(gamma)
            norm.bias.copy_(beta)
        return {"y": norm(x.clone()), "eps": getattr(norm, "eps", None),
                "gamma": norm.weight.detach().clone(), "beta": norm.bias.detach().clone()}


# -------------------------------------------------------------------- figures


@check("example_figures", 2, "(1, 3) normalises to ±1/sqrt(1.00001), not the d - 1 figure ±0.7071",
       probe=probe_layer_norm, inputs=lambda g: {"x": torch.tensor([[[1.0, 3.0]]], dtype=torch.float64)})
def example_figures(out, inputs, expected):
    a = 1 / math.sqrt(1.00001)
    figure = torch.tensor([[[-a, a]]], dtype=torch.float64)
    if matches(out["y"], figure, atol=1e-9, rtol=0):
        return None
    # A named mistake first: eps outside the root moves (1, 3) by 5e-6, as far as float32 may.
    named = first_diagnosis(out["y"], named_mistakes(known_facts(inputs)["mistakes"]), atol=3e-7, rtol=0,
                            right=figure)
    if named:
        return f"(1, 3) should normalise to (-0.999995, 0.999995) = ±1/sqrt(1.00001): {named}"
    if matches_to_float32(out["y"], figure, atol=1e-9, rtol=0):
        return None  # float32's precision: the precision check names it
    if shape_problem(out["y"], figure.shape) is None and (near := near_figure(out["y"])):
        return f"(1, 3) should normalise to (-0.999995, 0.999995) = ±1/sqrt(1.00001); {near}"
    return compare(out["y"], figure, "LayerNorm((1, 3))", atol=1e-9, rtol=0)


@check("constant_vector", 1, "a constant vector (2, 2) gives exactly beta, with no division by zero",
       probe=probe_layer_norm,
       inputs=lambda g: {"x": torch.tensor([[[2.0, 2.0]]], dtype=torch.float64),
                         "gamma": torch.tensor([2.0, 5.0], dtype=torch.float64),
                         "beta": torch.tensor([0.3, -0.7], dtype=torch.float64)}, gated_by="example_figures")
def constant_vector(out, inputs, expected):
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


# -------------------------------------------------------------- invariances


def probe_layer_norm_shift(ns, x, shift):
    norm = ns.model.LayerNorm(x.shape[-1]).double()
    return {"y": norm(x.clone()), "shifted": norm(x + shift)}


@check("shift_invariance", 1, "adding a constant to every feature changes nothing",
       probe=probe_layer_norm_shift,
       inputs=lambda g: {"x": torch.tensor([[[1.0, 3.0, -2.0, 0.5]]], dtype=torch.float64), "shift": 7.25}, gated_by="example_figures")
def shift_invariance(out, inputs, expected):
    if problem := shape_problem(out["y"], inputs["x"].shape):
        return problem
    if not matches_to_float32(out["shifted"], out["y"], atol=1e-9, rtol=0):
        centred = all(isinstance(y, torch.Tensor) and y.is_floating_point() and y.numel() and
                      float(y.double().mean(dim=-1).abs().max()) < 1e-9 for y in (out["y"], out["shifted"]))
        if centred:
            # gamma 1 and beta 0: an output with mean 0 had the mean taken off; the scale moved.
            return ("adding the same constant to every feature changed the output, though each output has mean 0: "
                    "the mean is subtracted, but the variance is taken of x itself; take it of the centred "
                    "values, mean((x − mean)²)")
        return "adding the same constant to every feature changed the output: subtract the mean of the last axis"
    return None


@check("defaults", 1, "eps is 1e-5, gamma starts at 1 and beta at 0",
       probe=probe_layer_norm, inputs=lambda g: {"x": torch.tensor([[[1.0, 3.0, -2.0, 0.5]]], dtype=torch.float64)},
       gated_by="example_figures")
def defaults(out, inputs, expected):
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


def probe_layer_norm_rows(ns, x, gamma, beta):
    norm = ns.model.LayerNorm(x.shape[-1]).double()
    with torch.no_grad():
        norm.weight.copy_(gamma)
        norm.bias.copy_(beta)
        rows = torch.stack([torch.stack([norm(x[b, t].clone().reshape(1, 1, -1))[0, 0] for t in range(x.shape[1])])
                            for b in range(x.shape[0])])
        return {"y": norm(x.clone()), "rows": rows}


@check("each_position_alone", 1,
       "x [2, 3, 4] normalised at once equals each position normalised alone: statistics over the last axis only",
       probe=probe_layer_norm_rows, fixed_inputs=True,
       inputs=lambda g: {"x": torch.randn(2, 3, 4, generator=g, dtype=torch.float64) * 2 + 0.5,
                         "gamma": torch.rand(4, generator=g, dtype=torch.float64) + 0.5,
                         "beta": torch.randn(4, generator=g, dtype=torch.float64)}, gated_by="example_figures")
def each_position_alone(out, inputs, expected):
    x = inputs["x"]
    if problem := shape_problem(out["y"], x.shape, "LayerNorm(x)"):
        return problem
    if matches_to_float32(out["y"], out["rows"], atol=1e-9, rtol=1e-7):
        return None
    # Every named mistake may answer: one made at each position alone gives the same at once,
    # so only a mistake about the axes the statistics span can match where the two differ.
    named = first_diagnosis(out["y"], named_mistakes(known_facts(inputs)["mistakes"]), atol=1e-7, rtol=1e-6)
    if named:
        return f"normalising x [2, 3, 4] at once differs from normalising each position alone: {named}"
    return ("normalising x [2, 3, 4] at once differs from normalising each position alone: each position's "
            "d features are normalised with their own mean and variance, never with other positions'")


@check("float64_precision", 1,
       "x [2, 3, 4] normalises to float64's precision: the mean, variance and division in x's dtype",
       probe=probe_layer_norm_rows,
       inputs=lambda g: {"x": torch.linspace(-2.0, 3.0, 24, dtype=torch.float64).sin().reshape(2, 3, 4) * 3 + 0.25,
                         "gamma": torch.tensor([0.5, 1.25, 2.0, 0.75], dtype=torch.float64),
                         "beta": torch.tensor([0.1, -0.3, 0.0, 0.6], dtype=torch.float64)}, gated_by="example_figures")
def float64_precision(out, inputs, expected):
    x, gamma, beta = inputs["x"], inputs["gamma"], inputs["beta"]
    centred = x - x.mean(dim=-1, keepdim=True)
    right = centred / torch.sqrt((centred * centred).mean(dim=-1, keepdim=True) + EPS) * gamma + beta
    y = out["y"]
    if shape_problem(y, right.shape) or matches(y, right, atol=1e-9, rtol=1e-7) or not float32_close(y, right):
        return None  # right, or wrong beyond float32's precision (the other checks say how)
    return float32_verdict("the normalised output", "your LayerNorm", "x's dtype (float64 here)", y, right)
