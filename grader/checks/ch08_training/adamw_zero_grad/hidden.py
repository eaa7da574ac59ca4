"""The hidden checks of grader/checks/ch08_training/adamw_zero_grad/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check, matches
from grader.checks.ch08_training.common import leaves_of
from grader.checks.ch08_training.hidden.oracles import adamw_loop, quadratic_loss
from grader.checks.course import F64


def probe_zero_grad_loop(ns, params, weights, centres, lr):
    """The usual loop: zero_grad, backward, step, with the certified step."""
    leaves = leaves_of(params)
    optimizer = ns.train.AdamW(leaves, lr=lr, weight_decay=0.1)
    trajectory = []
    for w, c in zip(weights, centres):
        optimizer.zero_grad()
        quadratic_loss(leaves, w, c).backward()
        optimizer.step()
        trajectory.append([p.detach().clone() for p in leaves])
    return {"trajectory": trajectory}


def zero_grad_loop_inputs(g):
    shapes, steps = [(3, 2), (4,), (2, 2)], 6
    return {"params": [torch.randn(*s, generator=g, dtype=F64) for s in shapes],
            "weights": [[torch.rand(*s, generator=g, dtype=F64) + 0.5 for s in shapes] for _ in range(steps)],
            "centres": [[torch.randn(*s, generator=g, dtype=F64) for s in shapes] for _ in range(steps)],
            "lr": 0.05}


@check("training_loop", 1, "six zero_grad / backward / step rounds follow torch.optim.AdamW's",
       task="adamw_zero_grad", probe=probe_zero_grad_loop, inputs=zero_grad_loop_inputs, hidden=True)
def training_loop(out, inputs, expected):
    def same(a, b):
        return all(matches(x, y, atol=1e-10, rtol=1e-9) for row_a, row_b in zip(a, b) for x, y in zip(row_a, row_b))

    if len(out["trajectory"]) != len(inputs["weights"]):
        return "the loop did not run every step"
    if same(out["trajectory"], adamw_loop(inputs)):
        return None
    if same(out["trajectory"], adamw_loop(inputs, zero=False)):
        return "gradients accumulate across steps: zero_grad() must set every .grad to None"
    return "a zero_grad / backward / step loop does not follow torch.optim.AdamW's: zero_grad must only clear .grad"
