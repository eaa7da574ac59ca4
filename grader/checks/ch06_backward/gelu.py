"""GELU's backward: gelu_backward(grad_out, x) gives dx for the exact GELU x·Φ(x).

Judged against autograd on the same forward, at the derivative's known values
(0.5 at 0, Φ(±1) ± φ(1) at ±1, 1 and 0 far out), and by finite differences; the
mistakes table names a half-done product rule, a missing chain rule, a wrong normal
density, the tanh approximation's derivative, ReLU's step and the forward itself.
"""

from __future__ import annotations

import math

import torch

from grader.checks._api import (
    Task, check, compare, exact_gelu, first_diagnosis, matches, shape_problem, tanh_gelu,
)
from grader.checks.ch06_backward.common import (
    BY_HAND, NEAR, NO_AUTOGRAD, autograd_of, judge_finite_differences, judge_grads, random_tensor, shipped,
)

TASKS = [
    Task("gelu_backward", "backward", "gelu_backward", "GELU's backward",
         forbidden=NO_AUTOGRAD, forbidden_methods=("backward",), **BY_HAND),
]


def probe_gelu_backward(ns, grad_out, x):
    return shipped(ns.backward.gelu_backward(grad_out.clone(), x.clone()))


def gelu_mistakes(grad_out, x):
    # GELU'(x) from autograd on the exact forward, Φ(x) from torch.special.ndtr, and the
    # product rule's other term as their difference: x·φ(x) = GELU'(x) − Φ(x).
    slope = autograd_of(exact_gelu, torch.ones_like(x), x)[0]
    cdf = torch.special.ndtr(x.double())
    x_pdf = slope - cdf
    return [
        ("the GELU derivative is missing the x·φ(x) term: d/dx [x·Φ(x)] = Φ(x) + x·φ(x) (product rule)",
         grad_out * cdf),
        ("the GELU derivative is missing the Φ(x) term: d/dx [x·Φ(x)] = Φ(x) + x·φ(x) (product rule)",
         grad_out * x_pdf),
        ("the local derivative is not multiplied by grad_out (the chain rule): return grad_out·(Φ(x) + x·φ(x))",
         slope),
        ("φ(x) is missing its normalising factor 1/sqrt(2π): φ(x) = exp(−x²/2) / sqrt(2π)",
         grad_out * (cdf + x_pdf * math.sqrt(2.0 * math.pi))),
        ("φ(x) uses exp(−x²) instead of exp(−x²/2)",  # exp(−x²) = exp(−x²/2)·exp(−x²/2)
         grad_out * (cdf + x_pdf * torch.exp(-x * x / 2))),
        ("this is the derivative of the tanh approximation of GELU; differentiate the exact x·Φ(x)",
         autograd_of(tanh_gelu, grad_out, x)[0]),
        ("this is ReLU's derivative (a step); GELU's is Φ(x) + x·φ(x)", grad_out * (x > 0).double()),
        ("this is the forward GELU, not its derivative", grad_out * exact_gelu(x)),
    ]


def _gelu_inputs(g):
    x = torch.linspace(-6, 6, 61, dtype=torch.float64).reshape(61)[torch.randperm(61, generator=g)].reshape(1, 61)
    x = torch.cat([x, random_tensor(g, 2, 61, scale=2.0)]).reshape(3, 61)
    return {"grad_out": random_tensor(g, 3, 61), "x": x, "_directions": [random_tensor(g, 3, 61)]}


# --------------------------------------------------------------------- checks


@check("matches_autograd", 2, "x from −6 to 6 and random: dx equals autograd's gradient of the exact GELU x·Φ(x)",
       probe=probe_gelu_backward, inputs=_gelu_inputs)
def judge_gelu_autograd(out, inputs, expected):
    g, x = inputs["grad_out"], inputs["x"]
    right = autograd_of(exact_gelu, g, x)
    return judge_grads(out, ("dx",), "gelu_backward", right, {}, {"dx": gelu_mistakes(g, x)})


@check("key_values", 1, "GELU'(0) = 0.5, GELU'(±1) = Φ(±1) ± φ(1), → 1 for large x, → 0 for very negative x",
       probe=probe_gelu_backward,
       inputs=lambda g: {"grad_out": torch.ones(5, dtype=torch.float64),
                         "x": torch.tensor([0.0, 1.0, -1.0, 8.0, -8.0], dtype=torch.float64)})
def judge_gelu_key_values(out, inputs, expected):
    # grad_out = 1: the derivative itself. GELU'(0) = 1/2, GELU'(±1) = Φ(±1) ± φ(1), → 1 and → 0 far out.
    figures = torch.tensor([0.5, 1.0833154705876864, -0.0833154705876864, 1.0, 0.0], dtype=torch.float64)
    dx = out["grads"]
    if problem := shape_problem(dx, figures.shape, "dx"):
        return problem
    if matches(dx, figures, atol=1e-9, rtol=0):
        return None
    known = first_diagnosis(dx, gelu_mistakes(inputs["grad_out"], inputs["x"]), **NEAR)
    lead = "at x = 0, 1, −1, 8, −8 the derivative should be 0.5, 1.0833155, −0.0833155, 1, 0"
    return f"{lead}: {known}" if known else f"{lead}; {compare(dx, figures, 'dx', atol=1e-9, rtol=0)}"


@check("finite_differences", 1, "dx agrees with central finite differences of GELU (gradcheck's test)",
       probe=probe_gelu_backward, inputs=_gelu_inputs)
def judge_gelu_finite_differences(out, inputs, expected):
    return judge_finite_differences(out, ("dx",), "gelu_backward", exact_gelu, [inputs["x"]], inputs["grad_out"],
                                     inputs["_directions"])
