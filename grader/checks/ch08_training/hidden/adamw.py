"""The hidden checks of grader/checks/ch08_training/adamw.py."""

from __future__ import annotations

import torch

from grader.checks._api import check, matches
from grader.checks.course import F64
from grader.checks.ch08_training.adamw import (
    adamw_state_problem, leaves_of, schedule, probe_adamw_init, probe_adamw_trajectory, trajectory_problem,
)
from grader.checks.ch08_training.hidden.oracles import adamw_facts, adamw_loop, hand_adamw, quadratic_loss
from grader.checks.facts import facts_for, significant


def first_seen(order):
    seen = []
    for i in order:
        if i not in seen:
            seen.append(i)
    return seen


@facts_for("ch08.adamw_init.each_parameter_once")
def held_facts(ref, inputs):
    """The distinct parameters an optimizer keeps, in first-seen order."""
    return {"first_seen": first_seen(inputs["order"])}


@facts_for("ch08.adamw_step.matches_torch", "ch08.adamw_step.skipped_steps")
def trajectory_facts(ref, inputs):
    """The mistakes' trajectories are only ever matched to 1e-7 (trajectory_problem)."""
    facts = adamw_facts(inputs)
    return {"right": facts["right"], "mistakes": significant(facts["mistakes"])}


@facts_for("ch08.adamw_step.decoupled_decay")
def decay_facts(ref, inputs):
    """With all-zero gradients: what coupled decay (Adam with L2) would do."""
    return {"coupled": hand_adamw(inputs["params"], inputs["grads"], inputs["lrs"], inputs["hyper"],
                                  mistake="coupled")}


def _random_init_inputs(g):
    count = 6
    shapes = [[int(n) for n in torch.randint(1, 5, (int(torch.randint(1, 4, (1,), generator=g)),), generator=g)]
              for _ in range(count)]
    order = torch.randperm(count, generator=g).tolist()
    order += torch.randint(0, count, (4,), generator=g).tolist()
    return {"shapes": shapes, "order": order, "as_generator": True}


@check("random_duplicates", 1,
       "random tensors with random repeats, passed as a generator: each held once, in first-seen order",
       task="adamw_init", probe=probe_adamw_init, inputs=_random_init_inputs, hidden=True)
def judge_adamw_state_random(out, inputs, expected):
    """The public judge_adamw_state, for the hidden check above."""
    return adamw_state_problem(out, inputs, first_seen(inputs["order"]))


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
def judge_adamw_random_runs(out, inputs, expected):
    """The public judge_adamw_matches_torch, for the hidden check above."""
    return trajectory_problem(out, inputs, adamw_facts(inputs))


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
def judge_zero_grad_loop(out, inputs, expected):
    def same(a, b):
        return all(matches(x, y, atol=1e-10, rtol=1e-9) for row_a, row_b in zip(a, b) for x, y in zip(row_a, row_b))

    if len(out["trajectory"]) != len(inputs["weights"]):
        return "the loop did not run every step"
    if same(out["trajectory"], adamw_loop(inputs)):
        return None
    if same(out["trajectory"], adamw_loop(inputs, zero=False)):
        return "gradients accumulate across steps: zero_grad() must set every .grad to None"
    return "a zero_grad / backward / step loop does not follow torch.optim.AdamW's: zero_grad must only clear .grad"
