"""The hidden checks of grader/checks/ch02_embedding/embedding/__init__.py."""

from __future__ import annotations

import math

import torch

from grader.checks._api import check, compare, constant, float32_close, matches, shape_problem
from grader.checks.ch02_embedding.embedding import float64_precision, integer_dtypes, lookup, probe_lookup
from grader.checks.facts import facts_for


def lookup_mistakes(weight, idx):
    V = weight.shape[0]
    mistakes = []
    if (idx + 1).max() < V:
        mistakes.append((constant("every id reads the next row (id + 1), an off by one: row v belongs to id v"),
                         weight[idx + 1]))
    mistakes.append((constant("every id reads the previous row (id - 1, so id 0 wraps round to the last row), an off "
                              "by one: row v belongs to id v"), weight[idx - 1]))
    mistakes.append(("the output is the ids' one-hot vectors, not the weight rows",
                     torch.nn.functional.one_hot(idx, V).double()))
    d = weight.shape[1]
    mistakes.append((f"every row is multiplied by sqrt(d) = sqrt({d}), as the original Transformer scales its "
                     f"embeddings: this embedding is the rows themselves", weight[idx] * math.sqrt(d)))
    return mistakes


@facts_for(lookup, float64_precision)
def lookup_facts(ref, inputs):
    weight, idx = inputs["weight"], inputs["idx"]
    return {"right": weight[idx], "one_hot": torch.nn.functional.one_hot(idx, weight.shape[0]).double(),
            "mistakes": lookup_mistakes(weight, idx)}


@facts_for(integer_dtypes)
def integer_dtype_facts(ref, inputs):
    return {"rows": [inputs["weight"][idx.long()] for idx in inputs["cases"]]}


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
def matches_reference(out, inputs, expected):
    y = out["y"]
    if problem := shape_problem(y, expected.shape, "the embedding of random ids"):
        return problem
    if compare(y, expected, atol=1e-12, rtol=0) is None:
        return None
    for text, wrong in lookup_mistakes(inputs["weight"], inputs["idx"]):
        if matches(y, wrong, atol=1e-12, rtol=0):
            return text
    if float32_close(y, expected):
        return None  # float32's precision: float64_precision names it
    return "for random ids the vectors differ from the weight rows: " + compare(y, expected, "the embedding",
                                                                               atol=1e-12, rtol=0)
