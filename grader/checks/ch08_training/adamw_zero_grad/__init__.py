"""AdamW's zero_grad: forgetting the gradients, and nothing else.

Every .grad becomes None, the parameters and the optimizer's state stay as they were, and
the next backward() gives the new gradient only.
"""

from __future__ import annotations

import torch

from grader.checks._api import Task, check, matches
from grader.checks.ch08_training.common import leaves_of
from grader.checks.course import F64

TASKS = [
    Task("adamw_zero_grad", "train", "AdamW.zero_grad", "forgetting the gradients"),
]


def probe_zero_grad(ns, params, grads, fresh):
    leaves = leaves_of(params)
    optimizer = ns.train.AdamW(leaves, lr=0.1, weight_decay=0.1)
    for p, g in zip(leaves, grads):
        p.grad = g.clone()
    optimizer.step()  # some state to keep
    for p, g in zip(leaves, grads):
        p.grad = g.clone()
    before = [p.detach().clone() for p in leaves]
    state = [(m.clone(), v.clone()) for m, v in zip(optimizer.exp_avg, optimizer.exp_avg_sq)]
    steps = list(optimizer.steps)
    optimizer.zero_grad()
    cleared = [None if p.grad is None else p.grad.detach().clone() for p in leaves]
    unchanged = all(torch.equal(b, p.detach()) for b, p in zip(before, leaves))
    kept = (all(torch.equal(m, m2) and torch.equal(v, v2)
                for (m, v), m2, v2 in zip(state, optimizer.exp_avg, optimizer.exp_avg_sq))
            and list(optimizer.steps) == steps)
    loss = sum((p * f).sum() for p, f in zip(leaves, fresh))
    loss.backward()
    return {"cleared": cleared, "params_unchanged": unchanged, "state_kept": kept,
            "after_backward": [None if p.grad is None else p.grad.detach().clone() for p in leaves]}


def _zero_grad_inputs(g):
    shapes = [(3, 2), (4,)]
    return {"params": [torch.randn(*s, generator=g, dtype=F64) for s in shapes],
            "grads": [torch.randn(*s, generator=g, dtype=F64) for s in shapes],
            "fresh": [torch.randn(*s, generator=g, dtype=F64) for s in shapes]}


@check("clears_gradients", 2,
       "zero_grad() clears every .grad (and nothing else), so the next backward() gives the new gradient only",
       task="adamw_zero_grad", probe=probe_zero_grad, inputs=_zero_grad_inputs)
def clears_gradients(out, inputs, expected):
    for i, g in enumerate(out["cleared"]):
        if g is not None and not (isinstance(g, torch.Tensor) and torch.count_nonzero(g) == 0):
            return ("after zero_grad() a parameter still has its old gradient: set every p.grad to None "
                    "(for p in self.params)")
    if not out["params_unchanged"]:
        return "zero_grad() changed the parameters' values: it must only forget the gradients (p.grad = None)"
    if not out["state_kept"]:
        return "zero_grad() changed the optimizer's state (m, v or the step counts): it must only touch p.grad"
    for i, (g, f) in enumerate(zip(out["after_backward"], inputs["fresh"])):
        if matches(g, inputs["grads"][i] + f, atol=1e-12, rtol=1e-12):
            return ("the next backward() added to the old gradient: zero_grad must clear p.grad itself, not a "
                    "copy of it")
        if not matches(g, f, atol=1e-12, rtol=1e-12):
            return "after zero_grad() and backward() the gradient should be the new one only"
    return None


@check("sets_none", 1, "zero_grad() sets every .grad to None (not a tensor of zeros), as torch.optim.AdamW does",
       task="adamw_zero_grad", probe=probe_zero_grad, inputs=_zero_grad_inputs)
def sets_none(out, inputs, expected):
    for i, g in enumerate(out["cleared"]):
        if g is None:
            continue
        if isinstance(g, torch.Tensor) and torch.count_nonzero(g) == 0:
            return (f"after zero_grad() parameter {i}'s .grad is a tensor of zeros; set it to None, as the docstring "
                    f"and torch.optim.AdamW do: a zero gradient is still a gradient, so a parameter that gets no new "
                    f"gradient would go on being decayed and moved by step(); and p.grad.zero_() with no test raises "
                    f"AttributeError on a parameter that has no gradient yet")
        return f"after zero_grad() parameter {i} still has its old gradient: set every p.grad to None"
    return None


def probe_zero_grad_fresh(ns, shapes):
    leaves = [torch.randn(*s, dtype=F64).requires_grad_(True) for s in shapes]
    optimizer = ns.train.AdamW(leaves, lr=0.1)
    optimizer.zero_grad()
    return {"grads": [None if p.grad is None else p.grad.detach().clone() for p in leaves]}


@check("before_any_backward", 1, "zero_grad() works on a fresh optimizer, before any gradient exists",
       task="adamw_zero_grad", probe=probe_zero_grad_fresh, inputs=lambda g: {"shapes": [[2, 3], [4]]},
       gated_by="clears_gradients")
def before_any_backward(out, inputs, expected):
    for g in out["grads"]:
        if g is not None and not (isinstance(g, torch.Tensor) and torch.count_nonzero(g) == 0):
            return "zero_grad() before any backward() should leave every .grad None (or zero)"
    return None
