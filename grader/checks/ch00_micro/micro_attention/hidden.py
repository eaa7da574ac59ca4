"""The hidden checks of the task micro_attention, and the facts its public checks read."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.ch00_micro.common import all_close, off_by
from grader.checks.ch00_micro.hidden.oracles import attention_facts
from grader.checks.ch00_micro.micro_attention import (
    gradients_flow, judge_attention_values, probe_attention, scaled_weights,
)
from grader.checks.facts import facts_for


@facts_for(scaled_weights)
def public_attention_facts(ref, inputs):
    return attention_facts(inputs["query"], inputs["keys"], inputs["values"])


@facts_for(gradients_flow)
def public_attention_gradients(ref, inputs):
    q, keys, values = inputs["query"], inputs["keys"], inputs["values"]
    return {"out": attention_facts(q, keys, values)["out"], "grads": gradients_of(q, keys, values, inputs["c"])}


def gradients_of(q, keys, values, c):
    """d(sum_i c_i * output_i) / d(query, keys, values), by torch's autograd on the float head."""
    import torch
    tq, tk, tv = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (q, keys, values))
    weights = torch.softmax(tk @ tq / len(q) ** 0.5, dim=0)
    (weights @ tv @ torch.tensor(c, dtype=torch.float64)).backward()
    return {"query": tq.grad.tolist(), "keys": tk.grad.tolist(), "values": tv.grad.tolist()}



def _expect_attention(ref, inputs):
    V = ref.micro.Value
    q = [V(x) for x in inputs["query"]]
    ks = [[V(x) for x in k] for k in inputs["keys"]]
    vs = [[V(x) for x in v] for v in inputs["values"]]
    output, weights = ref.micro.attention_head(q, ks, vs)
    terms = [ci * o for ci, o in zip(inputs["c"], output)] + [ei * w for ei, w in zip(inputs["e"], weights)]
    ref.micro.vsum(terms).backward()
    return {"output": [v.data for v in output], "weights": [w.data for w in weights],
            "grads": {"query": [v.grad for v in q], "keys": [[v.grad for v in k] for k in ks],
                      "values": [[v.grad for v in v_] for v_ in vs]}}


def _random_attention(g):
    T = 2 + int(torch.randint(0, 5, (1,), generator=g))  # one position would hide the scale
    d = 2 + int(torch.randint(0, 3, (1,), generator=g))
    r = lambda *shape: (torch.randn(*shape, generator=g, dtype=torch.float64) * 1.5).tolist()  # noqa: E731
    return {"query": r(d), "keys": r(T, d), "values": r(T, d), "c": r(d), "e": r(T)}


@check("matches_reference", 2, "random heads: output, weights and every gradient match the reference",
       probe=probe_attention, inputs=_random_attention, expect=_expect_attention, hidden=True)
def matches_reference(out, inputs, expected):
    q, keys, values = inputs["query"], inputs["keys"], inputs["values"]
    if problem := judge_attention_values(out, q, keys, values, False, attention_facts(q, keys, values)):
        return problem
    for name in ("query", "keys", "values"):
        if not all_close(out["grads"][name], expected["grads"][name], 1e-9):
            return (f"the values are right but the gradients reaching the {name} are off by up to "
                    f"{off_by(out['grads'][name], expected['grads'][name]):.3g}: keep every step in the graph "
                    f"(Values, not .data floats)")
    return None
