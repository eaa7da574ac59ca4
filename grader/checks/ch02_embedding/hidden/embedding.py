"""The hidden checks of grader/checks/ch02_embedding/embedding.py."""

from __future__ import annotations

import torch

from grader.checks._api import check, compare, matches, shape_problem
from grader.checks.ch02_embedding.embedding import lookup_mistakes, probe_lookup


def _random_lookup_inputs(g):
    V = int(torch.randint(5, 40, (1,), generator=g))
    d = int(torch.randint(3, 10, (1,), generator=g))
    B, T = int(torch.randint(1, 4, (1,), generator=g)), int(torch.randint(1, 9, (1,), generator=g))
    return {"weight": torch.randn(V, d, generator=g, dtype=torch.float64),
            "idx": torch.randint(0, V, (B, T), generator=g)}


def _expect_lookup(ref, inputs):
    emb = ref.model.TokenEmbedding(*inputs["weight"].shape).double()
    with torch.no_grad():
        emb.weight.copy_(inputs["weight"])
        return emb(inputs["idx"])


@check("matches_reference", 2, "random weights and ids of random sizes give exactly the reference lookup",
       probe=probe_lookup, inputs=_random_lookup_inputs, expect=_expect_lookup, hidden=True)
def judge_lookup_reference(out, inputs, expected):
    y = out["y"]
    if problem := shape_problem(y, expected.shape, "the embedding of random ids"):
        return problem
    if compare(y, expected, atol=1e-12, rtol=0) is None:
        return None
    for text, wrong in lookup_mistakes(inputs["weight"], inputs["idx"]):
        if matches(y, wrong, atol=1e-12, rtol=0):
            return text
    return "for random ids the vectors differ from the weight rows: " + compare(y, expected, "the embedding",
                                                                               atol=1e-12, rtol=0)
