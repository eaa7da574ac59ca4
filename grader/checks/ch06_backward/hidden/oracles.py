"""Chapter 06's forwards and gradients, the kit's own: the forwards the backwards belong
to in plain torch, autograd and central finite differences on them (in the grader,
never in the sandbox, where the tasks forbid autograd). The tasks' hidden.py judge with
them and compute with them what each classic mistake gives; on the public checks' fixed
inputs the kit writes what they give into facts.json (grader/generate/facts.py).
"""

from __future__ import annotations

import torch

from grader.checks._api import exact_gelu
from grader.checks.ch05_block.hidden.oracles import layer_norm
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


# ------------------------------------------------------------------ the half-block


def residual_forward(x, gamma, beta, w1, b1, w2, b2):
    """The forward, in plain torch, for autograd and finite differences in the grader."""
    return x + linear_of(exact_gelu(linear_of(layer_norm(x, gamma, beta), w1, b1)), w2, b2)
