"""LayerNorm's backward: layer_norm_backward(grad_out, x, gamma) gives (dx, dgamma, dbeta)
for LayerNorm over the last axis of x [..., d], with the course's eps inside the root.

Judged against autograd on the same forward, by dx summing to zero at every position
(LayerNorm ignores a constant shift), and by finite differences; the mistakes tables
name the missing mean and variance terms, a forgotten gamma or eps, the unbiased
variance, and per-feature gradients averaged or summed over the wrong axes. On the
public checks' fixed inputs autograd's gradients, the mistakes' and the differences are
data the kit computed (grader/checks/facts.py; hidden.py).
"""

from __future__ import annotations

import torch

from grader.checks._api import FLOAT32_STEP, FLOAT32_STEPS, Task, check, shape_problem
from grader.checks.ch06_backward.common import (
    ANY_LEADING,
    BY_HAND, NO_AUTOGRAD, judge_finite_differences, judge_grads, random_tensor, reduced_shapes, returned_of, shipped,
)
from grader.checks.facts import known_facts

TASKS = [
    Task("layer_norm_backward", "backward", "layer_norm_backward", "LayerNorm's backward",
         forbidden=NO_AUTOGRAD, promises=ANY_LEADING, forbidden_methods=("backward",), **BY_HAND),
]


def probe_layer_norm_backward(ns, grad_out, x, gamma):
    out = ns.backward.layer_norm_backward(grad_out.clone(), x.clone(), gamma.clone())
    return shipped(out)


LN_NAMES = ("dx", "dgamma", "dbeta")

# Each mistake by gradient and name; what it gives is computed under the same names (hidden.py).
MISTAKES = {
    "dx": {
        "no_mean_terms": "dx is missing the mean terms: x̂ depends on every feature through the mean and the "
                         "variance, so dx = (dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂)) / σ with dx̂ = grad_out·gamma; yours "
                         "is only dx̂ / σ",
        "no_mean_term": "dx is missing the mean term that comes from the mean μ: subtract mean(dx̂) over the features",
        "no_variance_term": "dx is missing the term that comes from the variance: subtract x̂·mean(dx̂·x̂) over the "
                            "features",
        "no_gamma": "dx ignores gamma: the upstream gradient reaches x̂ multiplied by gamma (dx̂ = grad_out·gamma)",
        "no_eps": "dx leaves eps out of the square root; the forward divides by sqrt(var + eps)",
        "unbiased_variance": "dx uses the unbiased variance (divided by d - 1, torch.var's default); the forward's "
                             "is the population variance, divided by d",
    },
    "dgamma": {
        "from_x": "dgamma uses x instead of the normalised x̂: dgamma = Σ grad_out·x̂",
        "from_centred_x": "dgamma uses x − mean without dividing by σ: dgamma = Σ grad_out·x̂",
        "averaged": "dgamma averages over the positions; it must sum over batch and time",
        "times_gamma": "dgamma is multiplied by gamma; dgamma = Σ grad_out·x̂",
    },
    "dbeta": {
        "averaged": "dbeta averages over the positions; it must sum over batch and time",
        "times_gamma": "dbeta is multiplied by gamma; dbeta = Σ grad_out",
    },
}


def layer_norm_shapes(x):
    return {"dgamma": reduced_shapes(x.shape, "dgamma"), "dbeta": reduced_shapes(x.shape, "dbeta")}


def layer_norm_inputs(shape):
    def make(g):
        d = shape[-1]
        x = random_tensor(g, *shape, scale=2.0, shift=1.0)
        gamma, beta = random_tensor(g, d, scale=0.5, shift=1.0), random_tensor(g, d)
        return {"grad_out": random_tensor(g, *shape), "x": x, "gamma": gamma, "_beta": beta,
                "_directions": [random_tensor(g, *shape), random_tensor(g, d), random_tensor(g, d)]}
    return make


# --------------------------------------------------------------------- checks


@check("matches_autograd", 3,
       "x [2, 3, 5]: dx, dgamma, dbeta equal autograd's gradients of the same LayerNorm, to float64's precision",
       probe=probe_layer_norm_backward, inputs=layer_norm_inputs((2, 3, 5)), fixed_inputs=True)
def matches_autograd(out, inputs, expected):
    facts = known_facts(inputs)
    return judge_grads(out, LN_NAMES, "layer_norm_backward", facts["right"], layer_norm_shapes(inputs["x"]),
                        facts["mistakes"], MISTAKES, precision=True)


@check("dx_sums_to_zero", 1,
       "x [4, 6] (any leading shape, 2-D here): dx sums to zero over the features at every position (LayerNorm "
       "ignores a constant shift)",
       probe=probe_layer_norm_backward, inputs=layer_norm_inputs((4, 6)))
def dx_sums_to_zero(out, inputs, expected):
    if problem := returned_of(out, LN_NAMES, "layer_norm_backward"):
        return problem
    dx = out["grads"][0]
    if problem := shape_problem(dx, inputs["x"].shape, "dx"):
        return problem
    sums = dx.double().sum(dim=-1)
    # Float32's rounding allowed: the precision check (matches_autograd) names float32 arithmetic.
    allowed = max(1e-9, FLOAT32_STEPS * FLOAT32_STEP * dx.shape[-1]) * (1 + dx.abs().max().item())
    if not torch.isfinite(sums).all() or sums.abs().max().item() > allowed:
        return ("dx does not sum to zero over the features at each position: adding a constant to every "
                "feature leaves LayerNorm's output unchanged, so the gradient has no component along "
                "(1, ..., 1). The mean terms are missing or wrong")
    return None


@check("finite_differences", 1,
       "x [3, 4]: each gradient agrees with central finite differences of the forward (gradcheck's test)",
       probe=probe_layer_norm_backward, inputs=layer_norm_inputs((3, 4)), fixed_inputs=True)
def finite_differences(out, inputs, expected):
    tensors = [inputs["x"], inputs["gamma"], inputs["_beta"]]
    return judge_finite_differences(out, LN_NAMES, "layer_norm_backward", tensors, inputs["_directions"],
                                     known_facts(inputs)["numeric"])
