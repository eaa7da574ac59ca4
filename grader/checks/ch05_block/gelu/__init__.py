"""The exact GELU, x · Φ(x) written with erf.

Its values must match the erf form to 1e-9, so the tanh approximation (off by ~5e-4)
fails; it, the sigmoid form and ReLU are each named when a student's output is one of
them (on the public inputs, what each gives is data the kit computed, facts.json);
g(a) - g(-a) = a holds for any GELU-like x · F(x). torch's GELU scores 'forbidden'.
"""

from __future__ import annotations

import torch

from grader.checks._api import (
    GELU_KERNELS, NORMAL_CDF, Task, check, compare, compare_to_float32, diagnose, exact_gelu, float32_close,
    float32_verdict, matches, named, shape_problem, torch_library_except,
)
from grader.checks.facts import known_facts

TASKS = [
    Task("gelu", "model", "gelu", "exact GELU",
         forbidden=("torch.nn.functional.gelu", "torch.nn.GELU", "torch._C._nn.gelu"),
         forbidden_ops=GELU_KERNELS + torch_library_except(NORMAL_CDF)),
]


def probe_gelu(ns, x):
    return {"y": ns.model.gelu(x.clone())}


# Each mistake by name; what it outputs is computed under the same name (hidden.py).
MISTAKES = {
    "tanh": "this is the tanh approximation of GELU; use the exact form x * Phi(x) with erf",
    "relu": "this is ReLU, not GELU: GELU is x * Phi(x), smooth and slightly negative for x < 0",
    "sigmoid": "this is the sigmoid approximation x * sigmoid(1.702 x); use the exact erf form",
    "identity": "the output equals the input: no nonlinearity was applied",
    "phi_alone": "Phi(x) is returned without multiplying by x",
}


@check("exact_values", 2, "gelu equals x * Phi(x) with erf, to 1e-9: the tanh form (off by ~5e-4) fails",
       probe=probe_gelu,
       inputs=lambda g: {"x": torch.tensor([-4.0, -3.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 3.0, 4.0],
                                           dtype=torch.float64)})
def exact_values(out, inputs, expected):
    return gelu_problem(out, inputs, known_facts(inputs)["mistakes"])


def gelu_problem(out, inputs, mistakes):
    """mistakes: {name: what the mistake outputs on inputs["x"]}, MISTAKES's names."""
    known = named(MISTAKES, mistakes)
    said = diagnose(out["y"], exact_gelu(inputs["x"]), known, "gelu(x)")
    if said is None or any(said == text for text, _ in known) or not float32_close(out["y"], exact_gelu(inputs["x"])):
        return said
    return None  # float32's precision: the precision check names it


def probe_gelu_odd_part(ns, a):
    return {"plus": ns.model.gelu(a.clone()), "minus": ns.model.gelu(-a)}


@check("odd_part", 1, "g(a) - g(-a) = a for every a",
       probe=probe_gelu_odd_part, inputs=lambda g: {"a": torch.linspace(-3, 3, 13, dtype=torch.float64)},
       gated_by="exact_values")  # 0.5 * x has the property too
def odd_part(out, inputs, expected):
    difference = out["plus"] - out["minus"]
    if problem := compare_to_float32(difference, inputs["a"], "g(a) - g(-a)", atol=1e-9, rtol=1e-9):
        return f"{problem}; for any GELU-like x * F(x) with F(-x) = 1 - F(x) it must equal a"
    return None


@check("float64_precision", 1, "gelu(x) equals x * Phi(x) to float64's precision: erf and every product in x's dtype",
       probe=probe_gelu, inputs=lambda g: {"x": torch.linspace(-4.0, 4.0, 33, dtype=torch.float64).reshape(3, 11)},
       gated_by="exact_values")
def float64_precision(out, inputs, expected):
    right = exact_gelu(inputs["x"])
    y = out["y"]
    if shape_problem(y, right.shape) or matches(y, right, atol=1e-9, rtol=1e-9) or not float32_close(y, right):
        return None  # right, or wrong beyond float32's precision (exact_values says how)
    return float32_verdict("gelu(x)", "your gelu", "x's dtype (float64 here)", y, right)
