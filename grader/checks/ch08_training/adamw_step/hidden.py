"""The hidden checks of grader/checks/ch08_training/adamw_step/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.course import F64
from grader.checks.ch08_training.adamw_step import (
    MISTAKES, decoupled_decay, matches_torch, probe_adamw_trajectory, same_trajectory, schedule, skipped_steps,
    trajectory_problem,
)
from grader.checks.ch08_training.hidden.oracles import hand_adamw
from grader.checks.facts import facts_for, significant


def adamw_facts(inputs):
    """torch.optim.AdamW's trajectory on the inputs, and each classic mistake's (None where
    the mistake changes nothing on these inputs, so it can never be the diagnosis)."""
    args = inputs["params"], inputs["grads"], inputs["lrs"], inputs["hyper"]
    right = hand_adamw(*args)
    mistakes = {}
    for name in MISTAKES:
        wrong = hand_adamw(*args, mistake=name)
        mistakes[name] = None if same_trajectory(wrong, right) else wrong
    return {"right": right, "mistakes": mistakes}


@facts_for(matches_torch, skipped_steps)
def trajectory_facts(ref, inputs):
    """The mistakes' trajectories are only ever matched to 1e-7 (trajectory_problem)."""
    facts = adamw_facts(inputs)
    return {"right": facts["right"], "mistakes": significant(facts["mistakes"])}


@facts_for(decoupled_decay)
def decay_facts(ref, inputs):
    """With all-zero gradients: what coupled decay (Adam with L2) would do."""
    return {"coupled": hand_adamw(inputs["params"], inputs["grads"], inputs["lrs"], inputs["hyper"],
                                  mistake="coupled")}


def _random_adamw_inputs(g):
    """Random shapes, scales and hyper-parameters; some parameters skip some steps."""
    count, steps = 4, 55
    shapes = [tuple(int(n) for n in torch.randint(1, 5, (int(torch.randint(1, 4, (1,), generator=g)),),
                                                  generator=g)) for _ in range(count)]
    scales = [10 ** float(torch.empty(1).uniform_(-3, 1, generator=g)) for _ in range(count)]
    params = [torch.randn(*s, generator=g, dtype=F64) for s in shapes]
    grads = []
    for step in range(steps):
        row = []
        for i, (s, k) in enumerate(zip(shapes, scales)):
            skip = (i == 1 and step % 3 != 0) or (i == 3 and step % 5 == 2)
            row.append(None if skip else torch.randn(*s, generator=g, dtype=F64) * k)
        grads.append(row)
    hyper = {"lr": 0.0, "betas": [float(torch.empty(1).uniform_(0.8, 0.95, generator=g)),
                                  float(torch.empty(1).uniform_(0.95, 0.999, generator=g))],
             "eps": 10 ** float(torch.empty(1).uniform_(-8, -5, generator=g)),
             "weight_decay": float(torch.empty(1).uniform_(0.05, 0.3, generator=g))}
    lr = 10 ** float(torch.empty(1).uniform_(-3, -1.5, generator=g))
    return {"params": params, "grads": grads, "lrs": schedule(steps, lr, 4), "hyper": hyper}


@check("random_matches_torch", 3,
       "random shapes, betas, eps, lr and weight decay, some parameters without a gradient at some steps: "
       "55 steps follow torch.optim.AdamW",
       task="adamw_step", probe=probe_adamw_trajectory, inputs=_random_adamw_inputs, hidden=True)
def random_matches_torch(out, inputs, expected):
    """The public matches_torch, for the hidden check above."""
    return trajectory_problem(out, inputs, adamw_facts(inputs))
