"""The hidden checks of grader/checks/ch03_positions/positions/__init__.py."""

from __future__ import annotations

import math

import torch

from grader.checks._api import check, compare, constant, exception_name, float32_close, matches, numbered
from grader.checks.ch03_positions.positions import (
    adds_rows, cache_offset, float64_precision, full_context, probe_positions, same_rows_per_batch, too_long,
)
from grader.checks.facts import facts_for


def _rows(weight, rows):
    """hidden-shaped [B, T, d] position rows from a [B, T] list of row numbers."""
    return weight[torch.tensor(rows, dtype=torch.long)]


def position_mistakes(hidden, weight, past):
    """(explanation, output) of the classic wrong position embeddings."""
    B, T, _ = hidden.shape
    C = weight.shape[0]
    mistakes = []

    def add(text, rows):
        if all(0 <= r < C for row in rows for r in row):
            mistakes.append((text, hidden + _rows(weight, rows)))

    if past:
        add(constant("past_length is ignored: rows 0..T-1 were added, but the first of these tokens sits at "
                     "position past_length (after the cached tokens)"), [list(range(T))] * B)
    add("the rows are off by one: token t of this call gets row past_length + t, starting at row past_length",
        [list(range(past + 1, past + T + 1))] * B)
    if B > 1:
        add("positions are counted over the flattened B*T tokens, so batch element b gets rows b*T..: "
            "every sequence of the batch starts at position past_length",
            [list(range(past + b * T, past + (b + 1) * T)) for b in range(B)])
        add("the position rows follow the batch index, not the time index: token t gets row past_length + t",
            [[past + b] * T for b in range(B)])
    add("the rows come from the end of the table: token t gets row past_length + t",
        [list(range(C - T, C))] * B)
    mistakes.append(("only the position rows are returned: add them to hidden (hidden + rows)",
                     _rows(weight, [list(range(past, past + T))] * B) if past + T <= C else hidden))
    mistakes.append(("hidden is returned unchanged: the position rows were not added", hidden))
    mistakes.append(("fixed sine and cosine positions are added, as the original Transformer's encoding gives them: "
                     "this model learns its positions, so add the rows of self.weight",
                     hidden + sinusoidal_positions(past, T, hidden.shape[2], hidden.dtype)))
    return mistakes


def sinusoidal_positions(past, T, d, dtype):
    """The original Transformer's fixed encoding of positions past .. past + T - 1: sin at
    the even features, cos at the odd ones, wavelengths from 2π to 10000·2π."""
    position = torch.arange(past, past + T, dtype=dtype)[:, None]
    frequency = torch.exp(torch.arange(0, d, 2, dtype=dtype) * (-math.log(10000.0) / d))
    encoding = torch.zeros(T, d, dtype=dtype)
    encoding[:, 0::2] = torch.sin(position * frequency)
    encoding[:, 1::2] = torch.cos(position * frequency)[:, : d // 2]
    return encoding


def position_facts(weight, hidden, past):
    T = hidden.shape[1]
    return {"right": hidden + weight[past : past + T], "mistakes": position_mistakes(hidden, weight, past)}


@facts_for(adds_rows, cache_offset, same_rows_per_batch, full_context, float64_precision)
def public_position_facts(ref, inputs):
    return [position_facts(inputs["weight"], hidden, past) for hidden, past in inputs["cases"]]


@facts_for(too_long)
def too_long_facts(ref, inputs):
    """What the silent wrong answers to a too-long input give: rows wrapped round, or clamped."""
    weight = inputs["weight"]
    C = weight.shape[0]
    said = []
    for hidden, past in inputs["cases"]:
        positions = torch.arange(past, past + hidden.shape[1])
        said.append({"wrapped": hidden + weight[positions % C], "clamped": hidden + weight[positions.clamp(max=C - 1)]})
    return said


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
def matches_reference(out, inputs, expected):
    weight = inputs["weight"]
    for number, ((hidden, past), result, right) in enumerate(zip(inputs["cases"], out, expected)):
        if "raised" in result:
            return (f"{numbered('random case', number + 1)}: raised {exception_name(result['raised'])} although every position fits "
                    f"in block_size")
        y = result["value"]
        if compare(y, right, atol=1e-9, rtol=1e-9) is None:
            continue
        for text, wrong in position_mistakes(hidden, weight, past):
            if matches(y, wrong, atol=1e-9, rtol=0):
                return f"{numbered('random case', number + 1)}: {text}"
        if float32_close(y, right):
            continue  # float32's precision: float64_precision names it
        return f"{numbered('random case', number + 1)}: " + compare(y, right, "the output", atol=1e-9, rtol=1e-9)
    return None
