"""The hidden checks of grader/checks/ch06_backward/layer_norm_backward/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.ch05_block.hidden.oracles import layer_norm
from grader.checks.ch06_backward.common import judge_grads
from grader.checks.ch06_backward.hidden.oracles import autograd_of, differences_facts, grads_facts
from grader.checks.ch06_backward.layer_norm_backward import (
    LN_NAMES, MISTAKES, finite_differences, layer_norm_inputs, layer_norm_shapes, matches_autograd,
    probe_layer_norm_backward,
)
from grader.checks.course import EPS
from grader.checks.facts import facts_for


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
    """What each mistake of MISTAKES gives, by gradient and name."""
    positions = max(1, grad_out.numel() // grad_out.shape[-1])
    # dgamma and dbeta from autograd on the grader's LayerNorm (neither depends on beta);
    # the two wrong dgammas from autograd on gamma·x and gamma·(x − mean), the scale
    # applied to an input that was not normalised.
    _, dgamma, dbeta = autograd_of(layer_norm, grad_out, x, gamma, torch.zeros_like(gamma))
    unnormalised = autograd_of(torch.mul, grad_out, gamma, x)[0]
    uncentred = autograd_of(torch.mul, grad_out, gamma, x - x.mean(-1, keepdim=True))[0]
    return {
        "dx": {
            "no_mean_terms": _ln_dx(grad_out, x, gamma, mean_term=False, variance_term=False)[0],
            "no_mean_term": _ln_dx(grad_out, x, gamma, mean_term=False)[0],
            "no_variance_term": _ln_dx(grad_out, x, gamma, variance_term=False)[0],
            "no_gamma": _ln_dx(grad_out, x, torch.ones_like(gamma))[0],
            "no_eps": _ln_dx(grad_out, x, gamma, eps=0.0)[0],
            "unbiased_variance": _ln_dx(grad_out, x, gamma, unbiased=True)[0],
        },
        "dgamma": {
            "from_x": unnormalised,
            "from_centred_x": uncentred,
            "averaged": dgamma / positions,
            "times_gamma": dgamma * gamma,
        },
        "dbeta": {
            "averaged": dbeta / positions,
            "times_gamma": dbeta * gamma,
        },
    }


@facts_for(matches_autograd)
def autograd_facts(ref, inputs):
    g, x, gamma = inputs["grad_out"], inputs["x"], inputs["gamma"]
    return grads_facts(layer_norm, g, [x, gamma, inputs["_beta"]], lambda right: layer_norm_mistakes(g, x, gamma))


@facts_for(finite_differences)
def finite_difference_facts(ref, inputs):
    return differences_facts(layer_norm, inputs["grad_out"], [inputs["x"], inputs["gamma"], inputs["_beta"]],
                             inputs["_directions"])


def _expect_layer_norm(ref, inputs):
    return list(ref.backward.layer_norm_backward(inputs["grad_out"], inputs["x"], inputs["gamma"]))


@check("matches_reference", 2, "4-D inputs with random gamma match the reference gradients",
       probe=probe_layer_norm_backward, inputs=layer_norm_inputs((2, 2, 3, 7)), expect=_expect_layer_norm,
       hidden=True)
def matches_reference(out, inputs, expected):
    g, x, gamma = inputs["grad_out"], inputs["x"], inputs["gamma"]
    return judge_grads(out, LN_NAMES, "layer_norm_backward", expected, layer_norm_shapes(x),
                        layer_norm_mistakes(g, x, gamma), MISTAKES, hidden=True)


single_vector = check(
    "single_vector", 1, "a single vector x [d] gives dx, dgamma, dbeta of shape [d]",
    probe=probe_layer_norm_backward, inputs=layer_norm_inputs((6,)), expect=_expect_layer_norm,
    hidden=True)(matches_reference)
