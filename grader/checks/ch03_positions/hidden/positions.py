"""The hidden checks of grader/checks/ch03_positions/positions.py."""

from __future__ import annotations

import torch

from grader.checks._api import check, compare, exception_name, matches
from grader.checks.ch03_positions.positions import position_mistakes, probe_positions


def _random_position_inputs(g):
    C = int(torch.randint(4, 17, (1,), generator=g))
    d = int(torch.randint(2, 9, (1,), generator=g))
    cases = []
    for _ in range(4):
        T = int(torch.randint(1, C + 1, (1,), generator=g))
        past = int(torch.randint(0, C - T + 1, (1,), generator=g))
        B = int(torch.randint(1, 4, (1,), generator=g))
        cases.append([torch.randn(B, T, d, generator=g, dtype=torch.float64), past])
    return {"weight": torch.randn(C, d, generator=g, dtype=torch.float64), "cases": cases}


def _expect_positions(ref, inputs):
    module = ref.model.PositionEmbedding(*inputs["weight"].shape).double()
    with torch.no_grad():
        module.weight.copy_(inputs["weight"])
        return [module(hidden, past) for hidden, past in inputs["cases"]]


@check("matches_reference", 2, "random tables, batches, lengths and cache offsets give the reference output",
       probe=probe_positions, inputs=_random_position_inputs, expect=_expect_positions, hidden=True)
def judge_positions_reference(out, inputs, expected):
    weight = inputs["weight"]
    for number, ((hidden, past), result, right) in enumerate(zip(inputs["cases"], out, expected)):
        if "raised" in result:
            return (f"random case {number + 1}: raised {exception_name(result['raised'])} although every position fits "
                    f"in block_size")
        y = result["value"]
        if compare(y, right, atol=1e-9, rtol=1e-9) is None:
            continue
        for text, wrong in position_mistakes(hidden, weight, past):
            if matches(y, wrong, atol=1e-9, rtol=0):
                return f"random case {number + 1}: {text}"
        return f"random case {number + 1}: " + compare(y, right, "the output", atol=1e-9, rtol=1e-9)
    return None
