"""The hidden checks of grader/checks/ch08_training/clipping.py."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.course import F64
from grader.checks.ch08_training.clipping import clip_problem, probe_clip


def _random_clip_inputs(g):
    cases = []
    for _ in range(4):
        count = int(torch.randint(2, 5, (1,), generator=g))
        grads = []
        for i in range(count):
            shape = [int(n) for n in torch.randint(1, 5, (int(torch.randint(1, 3, (1,), generator=g)),), generator=g)]
            grads.append(None if i == 1 and count > 2 else torch.randn(*shape, generator=g, dtype=F64)
                         * 10 ** float(torch.empty(1).uniform_(-1, 1, generator=g)))
        order = list(range(count)) + [count - 1]
        max_norm = 10 ** float(torch.empty(1).uniform_(-1, 1, generator=g))
        cases.append({"grads": grads, "order": order, "max_norm": max_norm})
    return {"cases": cases}


@check("random_matches_torch", 2, "random shapes, scales and max_norm match torch.nn.utils.clip_grad_norm_",
       probe=probe_clip, inputs=_random_clip_inputs, hidden=True)
def judge_clip_hidden(out, inputs, expected):
    return clip_problem(out, inputs, hidden=True)
