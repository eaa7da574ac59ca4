"""The oracles of the hidden AdamW checks alone: a quadratic loss and the zero_grad /
backward / step loop with default AdamW, proven equal to torch's by
tests/test_grader_oracles.py."""

from __future__ import annotations

import torch


def quadratic_loss(leaves, weights, centres):
    return sum((w * (p - c) ** 2).sum() / 2 + (p ** 3).sum() / 30 for p, w, c in zip(leaves, weights, centres))


def adamw_loop(inputs, zero=True):
    """The zero_grad / backward / step loop with default AdamW (betas 0.9/0.999, eps
    1e-8, weight decay 0.1), written out as torch.optim.AdamW computes it; with
    zero=False the gradients pile up the way they do when zero_grad is forgotten."""
    beta1, beta2, eps, wd, lr = 0.9, 0.999, 1e-8, 0.1, inputs["lr"]
    params = [p.clone() for p in inputs["params"]]
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    piled = [torch.zeros_like(p) for p in params]
    trajectory = []
    for t, (w, c) in enumerate(zip(inputs["weights"], inputs["centres"]), start=1):
        leaves = [p.clone().requires_grad_(True) for p in params]
        grads = torch.autograd.grad(quadratic_loss(leaves, w, c), leaves)
        piled = [a + g for a, g in zip(piled, grads)]
        for i, g in enumerate(grads if zero else piled):
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            step = lr * (m[i] / (1 - beta1**t)) / (torch.sqrt(v[i] / (1 - beta2**t)) + eps)
            params[i] = params[i] * (1 - lr * wd) - step
        trajectory.append([p.clone() for p in params])
    return trajectory
