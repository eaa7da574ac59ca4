"""The hidden checks of grader/checks/ch09_sampling/sample_next/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.course import F64
from grader.checks.ch09_sampling.sample_next import (
    DRAWS, follows_softmax, frequency_problem, greedy_at_zero_temperature, probe_sample_calls, temperature_scaling,
    top_k_support,
)
from grader.checks.facts import facts_for


def _probabilities(logits, temperature, top_k=None):
    rows = logits.double()
    if top_k is not None and top_k < rows.shape[-1]:
        keep = torch.topk(rows, top_k, dim=-1).indices
        rows = torch.full_like(rows, float("-inf")).scatter(-1, keep, rows.gather(-1, keep))
    return torch.softmax(rows / temperature, dim=-1)


def frequency_facts(inputs):
    """Per call, for every row: what the right sampler draws from and the classic wrong ones."""
    logits = inputs["logits"]
    rows = logits.reshape(-1, logits.shape[-1])
    said = []
    for call in inputs["calls"]:
        t, k = call["temperature"], call.get("top_k")
        said.append({name: torch.stack([_probabilities(row, temperature, top_k) for row in rows])
                     for name, temperature, top_k in (("want", t, k), ("no_temperature", 1.0, k),
                                                      ("multiplied", 1.0 / t, k), ("no_top_k", t, None))})
    return said


@facts_for(follows_softmax, temperature_scaling)
def public_frequency_facts(ref, inputs):
    return frequency_facts(inputs)


@facts_for(greedy_at_zero_temperature)
def greedy_facts(ref, inputs):
    return {"greedy": inputs["logits"].argmax(dim=-1)}


@facts_for(top_k_support)
def top_k_facts(ref, inputs):
    return {"top_k": [torch.topk(inputs["logits"], call["top_k"]).indices.tolist() for call in inputs["calls"]]}


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
def random_rows(out, inputs, expected):
    return frequency_problem(out, inputs, frequency_facts(inputs), hidden=True)
