"""The oracles the checks compute with are themselves right: each equals the torch
implementation it stands in for."""

from __future__ import annotations

import torch

from grader.checks.ch08_training.hidden.oracles import hand_adamw


def test_hand_adamw_is_torch_adamw_step_for_step():
    g = torch.Generator().manual_seed(0)
    params = [torch.randn(3, 4, generator=g, dtype=torch.float64), torch.randn(5, generator=g, dtype=torch.float64)]
    steps = 60
    grads = [[torch.randn(3, 4, generator=g, dtype=torch.float64),
              None if step % 7 == 3 else torch.randn(5, generator=g, dtype=torch.float64)] for step in range(steps)]
    lrs = [1e-2 * (1 - step / steps) + 1e-4 for step in range(steps)]
    hyper = {"betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1}

    leaves = [p.clone().requires_grad_(True) for p in params]
    optimizer = torch.optim.AdamW(leaves, lr=lrs[0], betas=hyper["betas"], eps=hyper["eps"],
                                  weight_decay=hyper["weight_decay"])
    expected = [[] for _ in leaves]
    for lr, step_grads in zip(lrs, grads):
        optimizer.param_groups[0]["lr"] = lr
        for p, grad in zip(leaves, step_grads):
            p.grad = None if grad is None else grad.clone()
        optimizer.step()
        for i, p in enumerate(leaves):
            expected[i].append(p.detach().clone())

    ours = hand_adamw(params, grads, lrs, hyper)
    for trajectory, reference in zip(ours, expected):
        torch.testing.assert_close(trajectory, torch.stack(reference), rtol=0, atol=1e-12)


def test_the_zero_grad_loop_oracle_is_torch_adamw():
    from grader.checks.ch08_training.adamw_zero_grad.hidden import zero_grad_loop_inputs
    from grader.checks.ch08_training.hidden.oracles import adamw_loop, quadratic_loss

    inputs = zero_grad_loop_inputs(torch.Generator().manual_seed(3))
    for zero in (True, False):
        leaves = [p.clone().requires_grad_(True) for p in inputs["params"]]
        optimizer = torch.optim.AdamW(leaves, lr=inputs["lr"], weight_decay=0.1)
        expected = []
        for w, c in zip(inputs["weights"], inputs["centres"]):
            if zero:
                optimizer.zero_grad()
            quadratic_loss(leaves, w, c).backward()
            optimizer.step()
            expected.append([p.detach().clone() for p in leaves])
        for ours, theirs in zip(adamw_loop(inputs, zero=zero), expected):
            for a, b in zip(ours, theirs):
                torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
