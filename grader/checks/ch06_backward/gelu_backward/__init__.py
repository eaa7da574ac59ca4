"""GELU's backward: gelu_backward(grad_out, x) gives dx for the exact GELU x·Φ(x).

Judged against autograd on the same forward, at the derivative's known values
(0.5 at 0, Φ(±1) ± φ(1) at ±1, 1 and 0 far out), and by finite differences; the
mistakes table names a half-done product rule, a missing chain rule, a wrong normal
density, the tanh approximation's derivative, ReLU's step and the forward itself. On
the public checks' fixed inputs autograd's gradient, the mistakes' and the differences
are data the kit computed (grader/checks/facts.py; hidden.py).
"""

from __future__ import annotations


import torch

from grader.checks._api import (
    NORMAL_CDF, NORMAL_DENSITY, Task, check, compare, first_diagnosis, float32_close, matches, named,
    shape_problem, torch_library_except,
)
from grader.checks.ch06_backward.common import (
    ANY_LEADING,
    BY_HAND_OPS, NEAR, NO_AUTOGRAD, judge_finite_differences, judge_grads, random_tensor, shipped,
)
from grader.checks.facts import known_facts

TASKS = [
    Task("gelu_backward", "backward", "gelu_backward", "GELU's backward",
         forbidden=NO_AUTOGRAD, promises=ANY_LEADING, forbidden_methods=("backward",), no_autograd=True,
         forbidden_ops=BY_HAND_OPS + torch_library_except(NORMAL_CDF + NORMAL_DENSITY)),
]


# Each mistake by name; what it gives dx is computed under the same name (hidden.py).
MISTAKES = {"dx": {
    "no_x_pdf_term": "the GELU derivative is missing the x·φ(x) term: d/dx [x·Φ(x)] = Φ(x) + x·φ(x) (product rule)",
    "no_cdf_term": "the GELU derivative is missing the Φ(x) term: d/dx [x·Φ(x)] = Φ(x) + x·φ(x) (product rule)",
    "no_chain_rule": "the local derivative is not multiplied by grad_out (the chain rule): return "
                     "grad_out·(Φ(x) + x·φ(x))",
    "pdf_unnormalised": "φ(x) is missing its normalising factor 1/sqrt(2π): φ(x) = exp(−x²/2) / sqrt(2π)",
    "pdf_without_half": "φ(x) uses exp(−x²) instead of exp(−x²/2)",
    "tanh_derivative": "this is the derivative of the tanh approximation of GELU; differentiate the exact x·Φ(x)",
    "at_output": "the derivative was evaluated at GELU(x), the forward's output: Φ and φ belong at x, GELU's input "
                 "(dx = grad_out·(Φ(x) + x·φ(x)))",
    "relu_derivative": "this is ReLU's derivative (a step); GELU's is Φ(x) + x·φ(x)",
    "forward": "this is the forward GELU, not its derivative",
}}


def probe_gelu_backward(ns, grad_out, x):
    return shipped(ns.backward.gelu_backward(grad_out.clone(), x.clone()))


def _gelu_inputs(g):
    x = torch.linspace(-6, 6, 61, dtype=torch.float64).reshape(61)[torch.randperm(61, generator=g)].reshape(1, 61)
    x = torch.cat([x, random_tensor(g, 2, 61, scale=2.0)]).reshape(3, 61)
    return {"grad_out": random_tensor(g, 3, 61), "x": x, "_directions": [random_tensor(g, 3, 61)]}


# --------------------------------------------------------------------- checks


@check("matches_autograd", 2,
       "x [3, 61] from −6 to 6 and random: dx equals autograd's gradient of the exact GELU x·Φ(x), to float64's "
       "precision",
       probe=probe_gelu_backward, inputs=_gelu_inputs, fixed_inputs=True)
def matches_autograd(out, inputs, expected):
    facts = known_facts(inputs)
    return judge_grads(out, ("dx",), "gelu_backward", facts["right"], {}, facts["mistakes"], MISTAKES,
                       precision=True)


@check("key_values", 1, "GELU'(0) = 0.5, GELU'(±1) = Φ(±1) ± φ(1), → 1 for large x, → 0 for very negative x",
       probe=probe_gelu_backward,
       inputs=lambda g: {"grad_out": torch.ones(5, dtype=torch.float64),
                         "x": torch.tensor([0.0, 1.0, -1.0, 8.0, -8.0], dtype=torch.float64)})
def key_values(out, inputs, expected):
    # grad_out = 1: the derivative itself. GELU'(0) = 1/2, GELU'(±1) = Φ(±1) ± φ(1), → 1 and → 0 far out.
    values = torch.tensor([0.5, 1.0833154705876864, -0.0833154705876864, 1.0, 0.0], dtype=torch.float64)
    dx = out["grads"]
    if problem := shape_problem(dx, values.shape, "dx"):
        return problem
    if matches(dx, values, atol=1e-9, rtol=0):
        return None
    known = first_diagnosis(dx, named(MISTAKES["dx"], known_facts(inputs)["mistakes"]["dx"]), **NEAR,
                            right=values)
    lead = "at x = 0, 1, −1, 8, −8 the derivative should be 0.5, 1.0833155, −0.0833155, 1, 0"
    if known:
        return f"{lead}: {known}"
    if float32_close(dx, values):
        return None  # float32 arithmetic: matches_autograd, the precision check, names it
    return f"{lead}; {compare(dx, values, 'dx', atol=1e-9, rtol=0)}"


@check("finite_differences", 1, "dx agrees with central finite differences of GELU (gradcheck's test)",
       probe=probe_gelu_backward, inputs=_gelu_inputs, fixed_inputs=True)
def finite_differences(out, inputs, expected):
    return judge_finite_differences(out, ("dx",), "gelu_backward", [inputs["x"]], inputs["_directions"],
                                     known_facts(inputs)["numeric"])
