"""The hidden checks of grader/checks/ch08_training/clip_grad_norm/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check, matches
from grader.checks.course import F64
from grader.checks.ch08_training.clip_grad_norm import (
    MISTAKES, below_limit_untouched, clip_problem, global_norm, grads_match, matches_torch, missing_and_shared,
    probe_clip,
)
from grader.checks.ch08_training.common import CLIP_EPS
from grader.checks.facts import facts_for


def torch_clip(case):
    """torch.nn.utils.clip_grad_norm_ on the distinct tensors that have a gradient (the oracle)."""
    used = sorted(set(case["order"]))
    tensors = []
    for i in used:
        g = case["grads"][i]
        if g is not None:
            t = torch.zeros(g.shape, dtype=F64, requires_grad=True)
            t.grad = g.clone()
            tensors.append((i, t))
    total = torch.nn.utils.clip_grad_norm_([t for _, t in tensors], case["max_norm"])
    grads = [None if g is None else g.clone() for g in case["grads"]]
    for i, t in tensors:
        grads[i] = t.grad.clone()
    return total.detach(), grads


def _clip_mistakes(case):
    """{name in MISTAKES: (total it would return, grads it would leave)} for the classic wrong clippings."""
    used = [i for i in sorted(set(case["order"])) if case["grads"][i] is not None]
    g = {i: case["grads"][i] for i in used}
    max_norm = case["max_norm"]
    norms = {i: torch.linalg.vector_norm(g[i]) for i in used}
    total = torch.sqrt(sum(n * n for n in norms.values())) if used else torch.tensor(0.0, dtype=F64)
    counted = [i for i in case["order"] if case["grads"][i] is not None]
    total_dup = torch.sqrt(sum(norms[i] ** 2 for i in counted)) if counted else total
    repeats = {i: case["order"].count(i) for i in used}

    def grads_with(scale_of):
        out = [None if x is None else x.clone() for x in case["grads"]]
        for i in used:
            out[i] = g[i] * scale_of(i)
        return out

    clamp = lambda s: torch.clamp(s, max=1.0)  # noqa: E731
    scale = clamp(max_norm / (total + CLIP_EPS))
    return {
        "own_norm": (total, grads_with(lambda i: clamp(max_norm / (norms[i] + CLIP_EPS)))),
        "always_scaled": (total, grads_with(lambda i: max_norm / (total + CLIP_EPS))),
        "squared_norm": (total * total, grads_with(lambda i: scale)),
        "norm_after": (torch.minimum(total, total * scale), grads_with(lambda i: scale)),
        "no_eps": (total, grads_with(lambda i: clamp(max_norm / total))),
        "shared_counted_twice": (total_dup, grads_with(lambda i: clamp(max_norm / (total_dup + CLIP_EPS)))),
        "shared_scaled_twice": (total, grads_with(lambda i: scale ** repeats[i])),
        "shared_counted_and_scaled_twice": (total_dup, grads_with(
            lambda i: clamp(max_norm / (total_dup + CLIP_EPS)) ** repeats[i])),
        "by_value": (total, [None if x is None else x.clamp(-max_norm, max_norm) for x in case["grads"]]),
    }


def clip_facts(inputs):
    """Per case: torch's clipping, and each classic mistake's (None where it is the same)."""
    said = []
    for case in inputs["cases"]:
        right_total, right_grads = torch_clip(case)
        mistakes = {}
        computed = _clip_mistakes(case)
        if computed.keys() != MISTAKES.keys():
            raise ValueError(f"MISTAKES names {sorted(MISTAKES)}, _clip_mistakes computes {sorted(computed)}")
        for name, (wrong_total, wrong_grads) in computed.items():
            same = matches(wrong_total, right_total, atol=1e-12, rtol=1e-12) and grads_match(wrong_grads, right_grads)
            mistakes[name] = None if same else [wrong_total, wrong_grads]
        said.append({"right": [right_total, right_grads], "mistakes": mistakes})
    return said


@facts_for(matches_torch, global_norm, below_limit_untouched, missing_and_shared)
def public_clip_facts(ref, inputs):
    return clip_facts(inputs)


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
def random_matches_torch(out, inputs, expected):
    return clip_problem(out, inputs, clip_facts(inputs), hidden=True)
