"""LayerNorm's backward: layer_norm_backward(grad_out, x, gamma) gives (dx, dgamma, dbeta)
for LayerNorm over the last axis of x [..., d], with the course's eps inside the root.

Judged against autograd on the same forward, by dx summing to zero at every position
(LayerNorm ignores a constant shift), and by finite differences; the mistakes tables
name the missing mean and variance terms, a forgotten gamma or eps, the unbiased
variance, and per-feature gradients averaged or summed over the wrong axes.
"""

from __future__ import annotations

import torch

from grader.checks._api import Task, check, layer_norm, shape_problem
from grader.checks.ch06_backward.common import (
    BY_HAND, NO_AUTOGRAD, autograd_of, judge_finite_differences, judge_grads, random_tensor, reduced_shapes, returned_of,
    shipped,
)
from grader.checks.course import EPS

TASKS = [
    Task("layer_norm_backward", "backward", "layer_norm_backward", "LayerNorm's backward",
         forbidden=NO_AUTOGRAD, forbidden_methods=("backward",), **BY_HAND),
]


def probe_layer_norm_backward(ns, grad_out, x, gamma):
    out = ns.backward.layer_norm_backward(grad_out.clone(), x.clone(), gamma.clone())
    return shipped(out)


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


def layer_norm_mistakes(grad_out, x, gamma):
    positions = max(1, grad_out.numel() // grad_out.shape[-1])
    # dgamma and dbeta from autograd on the grader's LayerNorm (neither depends on beta);
    # the two wrong dgammas from autograd on gamma·x and gamma·(x − mean), the scale
    # applied to an input that was not normalised.
    _, dgamma, dbeta = autograd_of(layer_norm, grad_out, x, gamma, torch.zeros_like(gamma))
    unnormalised = autograd_of(torch.mul, grad_out, gamma, x)[0]
    uncentred = autograd_of(torch.mul, grad_out, gamma, x - x.mean(-1, keepdim=True))[0]
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
            ("dgamma uses x instead of the normalised x̂: dgamma = Σ grad_out·x̂", unnormalised),
            ("dgamma uses x − mean without dividing by σ: dgamma = Σ grad_out·x̂", uncentred),
            ("dgamma averages over the positions; it must sum over batch and time", dgamma / positions),
            ("dgamma is multiplied by gamma; dgamma = Σ grad_out·x̂", dgamma * gamma),
        ],
        "dbeta": [
            ("dbeta averages over the positions; it must sum over batch and time", dbeta / positions),
            ("dbeta is multiplied by gamma; dbeta = Σ grad_out", dbeta * gamma),
        ],
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
       "x [2, 3, 5]: dx, dgamma, dbeta equal autograd's gradients of the same LayerNorm (float64)",
       probe=probe_layer_norm_backward, inputs=layer_norm_inputs((2, 3, 5)))
def judge_layer_norm_autograd(out, inputs, expected):
    g, x, gamma = inputs["grad_out"], inputs["x"], inputs["gamma"]
    right = autograd_of(layer_norm, g, x, gamma, inputs["_beta"])
    return judge_grads(out, LN_NAMES, "layer_norm_backward", right, layer_norm_shapes(x),
                        layer_norm_mistakes(g, x, gamma))


@check("dx_sums_to_zero", 1,
       "dx sums to zero over the features at every position (LayerNorm ignores a constant shift)",
       probe=probe_layer_norm_backward, inputs=layer_norm_inputs((4, 6)))
def judge_layer_norm_dx_sums_to_zero(out, inputs, expected):
    if problem := returned_of(out, LN_NAMES, "layer_norm_backward"):
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


@check("finite_differences", 1,
       "each gradient agrees with central finite differences of the forward (gradcheck's test)",
       probe=probe_layer_norm_backward, inputs=layer_norm_inputs((3, 4)))
def judge_layer_norm_finite_differences(out, inputs, expected):
    tensors = [inputs["x"], inputs["gamma"], inputs["_beta"]]
    return judge_finite_differences(out, LN_NAMES, "layer_norm_backward", layer_norm, tensors,
                                     inputs["grad_out"], inputs["_directions"])
