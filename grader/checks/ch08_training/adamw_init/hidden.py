"""The hidden checks of grader/checks/ch08_training/adamw_init/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.ch08_training.adamw_init import adamw_state_problem, each_parameter_once, probe_adamw_init
from grader.checks.facts import facts_for


def first_seen(order):
    seen = []
    for i in order:
        if i not in seen:
            seen.append(i)
    return seen


@facts_for(each_parameter_once)
def held_facts(ref, inputs):
    """The distinct parameters an optimizer keeps, in first-seen order."""
    return {"first_seen": first_seen(inputs["order"])}


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
def random_duplicates(out, inputs, expected):
    """The public each_parameter_once, for the hidden check above."""
    return adamw_state_problem(out, inputs, first_seen(inputs["order"]))
