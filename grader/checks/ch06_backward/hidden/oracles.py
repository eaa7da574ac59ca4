"""Chapter 06's forwards and gradients, the kit's own: the forwards the backwards belong
to in plain torch, autograd and central finite differences on them (in the grader,
never in the sandbox, where the tasks forbid autograd), and what each classic mistake
gives. The hidden checks judge with them; on the public checks' fixed inputs the kit
writes what they give into facts.json (grader/generate/facts.py).
"""

from __future__ import annotations

import math

import torch

from grader.checks._api import exact_gelu, tanh_gelu
from grader.checks.ch05_block.hidden.oracles import layer_norm
from grader.checks.course import EPS
from grader.checks.facts import significant


def linear_of(x, weight, bias):
    return x @ weight.T + bias


def autograd_of(forward, grad_out, *tensors):
    """The gradients autograd gives for sum(grad_out * forward(*tensors))."""
    leaves = [t.detach().clone().double().requires_grad_(True) for t in tensors]
    with torch.enable_grad():
        y = forward(*leaves)
        # <y, grad_out> as a scalar: the same vector-Jacobian product, without the
        # grad_outputs path that makes torch import its symbolic-shape machinery (~0.3 s).
        return [g.detach() for g in torch.autograd.grad((y * grad_out.double()).sum(), leaves)]


def directional(forward, grad_out, tensors, which, direction, h=1e-6):
    """Central finite difference of sum(grad_out * forward) along `direction` in input `which`."""
    plus = [t.clone() for t in tensors]
    minus = [t.clone() for t in tensors]
    plus[which] = plus[which] + h * direction
    minus[which] = minus[which] - h * direction
    with torch.no_grad():
        return ((grad_out * (forward(*plus) - forward(*minus))).sum() / (2 * h)).item()


def grads_facts(forward, grad_out, tensors, mistakes_of):
    """Autograd's gradients of sum(grad_out * forward(*tensors)) ("right") and the classic
    mistakes' (mistakes_of(right): {gradient name: {mistake name: tensor}}, the names of the
    task's mistakes table), which the judges only ever match to 1e-6 (NEAR)."""
    right = autograd_of(forward, grad_out, *tensors)
    return {"right": right, "mistakes": significant(mistakes_of(right))}


def differences_facts(forward, grad_out, tensors, directions):
    """The central difference of sum(grad_out * forward) along each direction, one input each."""
    return {"numeric": [directional(forward, grad_out, tensors, which, direction)
                        for which, direction in enumerate(directions)]}


# ------------------------------------------------------------------ LayerNorm


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
    """What each mistake of layer_norm_backward's LN_MISTAKES gives, by gradient and name."""
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


# ------------------------------------------------------------------ GELU


def gelu_mistakes(grad_out, x):
    """What each mistake of gelu_backward's GELU_BACKWARD_MISTAKES gives dx, by its name."""
    # GELU'(x) from autograd on the exact forward, Φ(x) from torch.special.ndtr, and the
    # product rule's other term as their difference: x·φ(x) = GELU'(x) − Φ(x).
    slope = autograd_of(exact_gelu, torch.ones_like(x), x)[0]
    cdf = torch.special.ndtr(x.double())
    x_pdf = slope - cdf
    return {
        "no_x_pdf_term": grad_out * cdf,
        "no_cdf_term": grad_out * x_pdf,
        "no_chain_rule": slope,
        "pdf_unnormalised": grad_out * (cdf + x_pdf * math.sqrt(2.0 * math.pi)),
        "pdf_without_half": grad_out * (cdf + x_pdf * torch.exp(-x * x / 2)),  # exp(−x²) = exp(−x²/2)·exp(−x²/2)
        "tanh_derivative": autograd_of(tanh_gelu, grad_out, x)[0],
        "at_output": grad_out * autograd_of(exact_gelu, torch.ones_like(x), exact_gelu(x))[0],
        "relu_derivative": grad_out * (x > 0).double(),
        "forward": grad_out * exact_gelu(x),
    }


# ------------------------------------------------------------------ linear


def linear_mistakes(grad_out, x, weight):
    """What each mistake of linear_backward's LINEAR_MISTAKES gives, by gradient and name;
    the transposes only where the weight is square, where they have the right shape."""
    # dweight and dbias from autograd on x Wᵀ + b (neither depends on b).
    positions = grad_out.numel() // grad_out.shape[-1]
    _, dweight, dbias = autograd_of(linear_of, grad_out, x, weight, grad_out.new_zeros(weight.shape[0]))
    square = weight.shape[0] == weight.shape[1]
    return {
        "dx": {"weight_transposed": grad_out @ weight.T} if square else {},
        "dweight": {**({"transposed": dweight.T} if square else {}), "averaged": dweight / positions},
        "dbias": {"averaged": dbias / positions},
    }


# ------------------------------------------------------------------ the half-block


def residual_forward(x, gamma, beta, w1, b1, w2, b2):
    """The forward, in plain torch, for autograd and finite differences in the grader."""
    return x + linear_of(exact_gelu(linear_of(layer_norm(x, gamma, beta), w1, b1)), w2, b2)


def _gelu_slope(z):
    """GELU′ at z, from autograd on the exact forward."""
    return autograd_of(exact_gelu, torch.ones_like(z), z)[0]


def _flat(t):
    return t.reshape(-1, t.shape[-1])


def residual_chain(grad_out, x, gamma, beta, w1, b1, w2, b2, slip=None):
    """The half-block's seven gradients by the chain rule, stage by stage, with one slip
    (a tensor taken from the wrong place) or none; None when the slip does not fit these
    shapes. The stages: fc2 (dw2, db2, dact), GELU (dpre), fc1 (dw1, db1, dnormed),
    LayerNorm (dgamma, dbeta, the branch's dx), the skip (dx)."""
    normed = layer_norm(x, gamma, beta)
    plain = normed @ w1.T
    pre = plain + b1
    act = exact_gelu(pre)
    fc2_input = {"dw2_from_pre": pre, "dw2_from_normed": normed}.get(slip, act)
    if fc2_input.shape[-1] != w2.shape[1]:
        return None
    dw2, db2 = _flat(grad_out).T @ _flat(fc2_input), _flat(grad_out).sum(0)
    dact = grad_out @ w2
    at = {"gelu_at_output": act, "gelu_at_no_bias": plain}.get(slip, pre)
    dpre = dact if slip == "no_gelu_slope" else dact * _gelu_slope(at)
    fc1_grad = dact if slip == "dw1_before_gelu" else dpre
    fc1_input = {"dw1_from_x": x}.get(slip, normed)
    dw1, db1 = _flat(fc1_grad).T @ _flat(fc1_input), _flat(fc1_grad).sum(0)
    dnormed = dpre @ w1
    ln_point = normed if slip == "layer_norm_at_output" else x
    dx_branch, dgamma, dbeta = autograd_of(layer_norm, dnormed, ln_point, gamma, beta)
    return [grad_out + dx_branch, dgamma, dbeta, dw1, db1, dw2, db2]


def residual_mistakes(grad_out, tensors, right):
    """{gradient name: {mistake name: tensor}}: the skip-path mistakes of residual_backward's
    SKIP_MISTAKES on dx, and for each slip of its RESIDUAL_SLIPS the value it gives every
    gradient it changes (a later gradient a slip changes is named with the slip too: the
    judge names the first wrong one)."""
    from grader.checks.ch06_backward.residual_backward import RESIDUAL_NAMES, RESIDUAL_SLIPS

    dx = right[0]
    table = {"dx": {"skip_missing": dx - grad_out, "skip_only": grad_out, "skip_twice": dx + grad_out}}
    for slip in RESIDUAL_SLIPS:
        grads = residual_chain(grad_out, *tensors, slip=slip)
        if grads is None:
            continue
        for name, wrong, want in zip(RESIDUAL_NAMES, grads, right):
            if wrong.shape == want.shape and not torch.allclose(wrong, want, atol=1e-8, rtol=1e-6):
                table.setdefault(name, {})[slip] = wrong
    return table
