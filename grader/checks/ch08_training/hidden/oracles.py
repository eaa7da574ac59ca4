"""AdamW written out in plain torch, the kit's own: hand_adamw (with a switch for each
classic mistake) gives the trajectories the AdamW checks compare with, and a quadratic
loss and the zero_grad / backward / step loop with default AdamW serve the hidden
zero_grad check; each is proven equal to torch.optim.AdamW by tests/test_grader_oracles.py.
The public checks read what hand_adamw gives on their fixed inputs as data (facts.json)."""

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


def hand_adamw(params, grads, lrs, hyper, mistake=None):
    """AdamW written out, optionally with a classic mistake (or two, joined by "+"), for the
    diagnoses."""
    eps_early = mistake in ("eps_before_correction", "eps_before_correction+decay_after")
    if mistake == "eps_before_correction+decay_after":
        mistake = "decay_after"
    beta1, beta2 = hyper["betas"]
    if mistake == "betas_swapped":
        beta1, beta2 = beta2, beta1
    eps, wd = hyper["eps"], hyper["weight_decay"]
    ps = [p.clone() for p in params]
    m = [torch.zeros_like(p) for p in ps]
    v = [torch.zeros_like(p) for p in ps]
    t = [0 for _ in ps]
    trajectory = [[] for _ in ps]
    for step, (lr, step_grads) in enumerate(zip(lrs, grads)):
        for i, g in enumerate(step_grads):
            if g is None:
                if mistake != "missing_as_zero":
                    continue
                g = torch.zeros_like(ps[i])
            t[i] += 1
            tt = step + 1 if mistake == "global_t" else t[i]
            p = ps[i]
            if mistake == "coupled":
                g = g + wd * p
            elif mistake == "decay_without_lr":
                p = p * (1 - wd)
            elif mistake == "vectors_not_decayed" and p.dim() < 2:
                pass  # GPT-2's habit: biases and gains in a group without decay
            elif mistake not in ("decay_after", "no_decay"):
                p = p * (1 - lr * wd)
            if mistake == "restarted_moments":
                m[i] = (1 - beta1) * g
                v[i] = (1 - beta2) * g * g
            else:
                m[i] = beta1 * m[i] + (1 - beta1) * g
                v[i] = beta2 * v[i] + (1 - beta2) * g * g
            if mistake == "no_bias_correction":
                m_hat, v_hat = m[i], v[i]
            else:
                m_hat, v_hat = m[i] / (1 - beta1**tt), v[i] / (1 - beta2**tt)
            if mistake == "eps_inside":
                denom = torch.sqrt(v_hat + eps)
            elif eps_early:  # eps on sqrt(v), then the bias correction folded into the step size
                denom = (torch.sqrt(v[i]) + eps) / (1 - beta2**tt) ** 0.5
            else:
                denom = torch.sqrt(v_hat) + eps
            p = p - lr * m_hat / denom
            if mistake == "decay_after":
                p = p * (1 - lr * wd)
            ps[i] = p
        for i, p in enumerate(ps):
            trajectory[i].append(p.clone())
    return [torch.stack(t) for t in trajectory]
