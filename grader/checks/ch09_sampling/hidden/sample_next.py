"""The hidden checks of grader/checks/ch09_sampling/sample_next.py."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.course import F64
from grader.checks.ch09_sampling.sample_next import DRAWS, frequency_problem, probe_sample_calls


def _random_sampling_inputs(g):
    V, R = 7, 3
    logits = torch.randn(R, V, generator=g, dtype=F64) * 1.5
    seed = int(torch.randint(0, 2**31, (1,), generator=g))
    t = float(torch.empty(1).uniform_(0.5, 2.0, generator=g))
    k = int(torch.randint(2, V, (1,), generator=g))
    return {"logits": logits, "repeat": DRAWS,
            "calls": [{"temperature": t, "top_k": k, "seed": seed}, {"temperature": 1.0, "top_k": V + 2, "seed": seed + 1},
                      {"temperature": t, "top_k": None, "seed": seed + 2}]}


@check("random_rows", 2,
       "random logits [N, 3, V] with a random temperature and top_k (also k > V): ids [N, 3] whose "
       "frequencies follow the top-k softmax",
       probe=probe_sample_calls, inputs=_random_sampling_inputs, hidden=True)
def judge_frequencies_hidden(out, inputs, expected):
    return frequency_problem(out, inputs, hidden=True)
