"""AdamW written out in plain torch: the oracles the AdamW checks compute with, each
proven equal to torch.optim.AdamW by tests/test_grader_oracles.py. hand_adamw also
reproduces the classic mistakes (ADAMW_MISTAKES) that the diagnoses name.
"""

from __future__ import annotations

import torch


def hand_adamw(params, grads, lrs, hyper, mistake=None):
    """AdamW written out, optionally with one classic mistake, for the diagnoses."""
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
            denom = torch.sqrt(v_hat + eps) if mistake == "eps_inside" else torch.sqrt(v_hat) + eps
            p = p - lr * m_hat / denom
            if mistake == "decay_after":
                p = p * (1 - lr * wd)
            ps[i] = p
        for i, p in enumerate(ps):
            trajectory[i].append(p.clone())
    return [torch.stack(t) for t in trajectory]


ADAMW_MISTAKES = [
    ("no_bias_correction", "there is no bias correction: divide m by (1 - beta1^t) and v by (1 - beta2^t), "
                           "with t the parameter's own step count"),
    ("coupled", "the weight decay is added to the gradient (Adam with L2, coupled); AdamW's decay is decoupled: "
                "p <- p * (1 - lr * weight_decay), applied to p directly, never through m and v"),
    ("eps_inside", "eps is inside the square root; AdamW divides by sqrt(v_hat) + eps"),
    ("betas_swapped", "beta1 and beta2 are swapped: m uses beta1 (the first of betas), v uses beta2"),
    ("restarted_moments", "the moments are not kept from step to step: each parameter needs its own m and v "
                          "(self.exp_avg[i], self.exp_avg_sq[i]), updated in place every step"),
    ("decay_after", "the weight decay is applied after the Adam update; decay first, from the current p"),
    ("decay_without_lr", "the weight decay is not scaled by the learning rate: p <- p * (1 - lr * weight_decay)"),
    ("no_decay", "there is no weight decay: p <- p * (1 - lr * weight_decay) before the update"),
    ("global_t", "the step count t is shared by all parameters; each parameter has its own t, which does not "
                 "advance at a step where its .grad is None"),
    ("missing_as_zero", "a parameter whose .grad is None was updated as if its gradient were zero; skip it "
                        "(no decay, no moment update, its t does not advance)"),
]
