"""Learned absolute positions, offset by the length of the KV cache.

The contract the checks pin: forward(hidden [B, T, d], past_length) returns
hidden + rows past_length .. past_length + T - 1 of the position table, the same rows
for every sequence of the batch; past_length + T > block_size is a ValueError (there
is no row to add), never a silent wrap to the first rows or an opaque broadcasting
error; past_length + T == block_size fits exactly; the gradient reaches the rows used.

The right outputs of the checks that add rows, and what the classic mistakes give, are
data the kit computed on their fixed inputs (grader/checks/facts.py; hidden/positions.py).
"""

from __future__ import annotations

import torch

from grader.checks._api import (
    Task, check, compare, exception_name, float32_close, float32_verdict, matches, shape_problem, try_call,
)
from grader.checks.facts import known_facts

TASKS = [
    Task("positions", "model", "PositionEmbedding.forward", "position rows offset by the cache length",
         takes=(("hidden", 3),)),
]

# ----------------------------------------------------------------------- helpers


def _positions(ns, weight):
    C, d = weight.shape
    module = ns.model.PositionEmbedding(C, d).double()
    with torch.no_grad():
        module.weight.copy_(weight)
    return module


def _distinct_weight(C, d):
    """Row p = 100 (p + 1) + j: every row different, so a wrong row shows."""
    return (100.0 * torch.arange(1, C + 1, dtype=torch.float64)[:, None]
            + torch.arange(d, dtype=torch.float64)[None, :])


WEIGHT6, WEIGHT8, WEIGHT4 = _distinct_weight(6, 4), _distinct_weight(8, 4), _distinct_weight(4, 3)


def _h(g, B, T, d):
    return torch.randn(B, T, d, generator=g, dtype=torch.float64)


def _diagnose(y, hidden, facts, what) -> "str | None":
    """facts: the right output ("right") and the classic mistakes' ("mistakes", [(text, output)])."""
    if problem := shape_problem(y, hidden.shape, what):
        return f"{problem}: adding positions keeps hidden's shape [B, T, d]"
    right = facts["right"]
    if compare(y, right, atol=1e-9, rtol=0) is None:
        return None
    for text, wrong in facts["mistakes"]:
        if matches(y, wrong, atol=1e-9, rtol=0):
            return text
    if float32_close(y, right):
        return None  # float32's precision: float64_precision names it
    return compare(y, right, what, atol=1e-9, rtol=0)


# ----------------------------------------------------------------- adding rows


def probe_positions(ns, weight, cases):
    module = _positions(ns, weight)
    results = []
    for hidden, past in cases:
        attempt = try_call(module, hidden.clone(), past)
        if "value" in attempt:
            value = attempt["value"]
            attempt["value"] = value.detach() if isinstance(value, torch.Tensor) else repr(value)[:80]
        results.append(attempt)
    return results


def _span(past, T) -> str:
    return f"position {past} has a row" if T == 1 else f"positions {past}..{past + T - 1} all have rows"


def _raised_on_valid(raised, T, past, C) -> str:
    if raised["value_error"] and past + T == C:
        return (f"raised ValueError, but {_span(past, T)}: the length check is off by one "
                f"(past_length + T == block_size fits; only past_length + T > block_size is too long)")
    return f"raised {exception_name(raised)}, though {_span(past, T)}"


# One judge for adds_rows, cache_offset and same_rows_per_batch, in that order; full_context,
# judged by it too, is declared after too_long below.
@check("adds_rows", 3, "block_size 6, hidden [2, 3, 4]: the output keeps the shape and is hidden + rows 0, 1, 2",
       probe=probe_positions, inputs=lambda g: {"weight": WEIGHT6.clone(), "cases": [[_h(g, 2, 3, 4), 0]]},
       fixed_inputs=True)
def adds_rows(out, inputs, expected):
    weight = inputs["weight"]
    C = weight.shape[0]
    for (hidden, past), result, facts in zip(inputs["cases"], out, known_facts(inputs)):
        B, T, _ = hidden.shape
        where = f"hidden [{B}, {T}, d] with past_length={past} and block_size={C}"
        if "raised" in result:
            return f"{where}: {_raised_on_valid(result['raised'], T, past, C)}"
        if problem := _diagnose(result["value"], hidden, facts, "the output"):
            return f"{where}: {problem}"
    return None


cache_offset = check(
    "cache_offset", 2,
    "with past_length cached tokens the rows start at past_length: T=2 after 3 gives rows 3, 4; "
    "one new token after 7 gives row 7",
    probe=probe_positions, fixed_inputs=True,
    inputs=lambda g: {"weight": WEIGHT8.clone(), "cases": [[_h(g, 2, 2, 4), 3], [_h(g, 2, 1, 4), 7]]})(adds_rows)

same_rows_per_batch = check(
    "same_rows_per_batch", 2,
    "every sequence of a batch of 3 gets the same rows 0, 1 (positions do not run on across the batch)",
    probe=probe_positions, fixed_inputs=True,
    inputs=lambda g: {"weight": WEIGHT8.clone(), "cases": [[_h(g, 3, 2, 4), 0], [_h(g, 3, 2, 4), 2]]},
    gated_by="adds_rows")(adds_rows)


@check("float64_precision", 1, "block_size 6, hidden [2, 3, 4]: hidden + rows 0, 1, 2 to float64's precision",
       probe=probe_positions, inputs=lambda g: {"weight": WEIGHT6.clone(), "cases": [[_h(g, 2, 3, 4), 0]]},
       fixed_inputs=True, gated_by="adds_rows")
def float64_precision(out, inputs, expected):
    (hidden, past), result = inputs["cases"][0], out[0]
    right = known_facts(inputs)[0]["right"]
    y = result.get("value") if isinstance(result, dict) else None
    if shape_problem(y, right.shape) or matches(y, right, atol=1e-9, rtol=0) or not float32_close(y, right):
        return None  # right, or wrong beyond float32's precision (adds_rows says how)
    return float32_verdict("the output", "your position embedding", "hidden's dtype (float64 here)", y, right)


# -------------------------------------------------------------- too long / fits


@check("too_long", 2,
       "block_size 4: T=5, or T=2 after 3 cached, or T=1 after 4 raise a clear ValueError, not a silent wrap",
       probe=probe_positions, fixed_inputs=True,
       inputs=lambda g: {"weight": WEIGHT4.clone(),
                         "cases": [[_h(g, 1, 5, 3), 0], [_h(g, 2, 2, 3), 3], [_h(g, 1, 1, 3), 4]]})
def too_long(out, inputs, expected):
    weight = inputs["weight"]
    C = weight.shape[0]
    for (hidden, past), result, facts in zip(inputs["cases"], out, known_facts(inputs)):
        T = hidden.shape[1]
        where = f"T={T} with past_length={past} and block_size={C} (positions up to {past + T - 1})"
        if "raised" in result:
            raised = result["raised"]
            if raised["value_error"]:
                if not raised["message"].strip():
                    return f"{where}: the ValueError has no message; say which position is past block_size"
                continue
            if raised["type"] == "AssertionError":
                return (f"{where} raised AssertionError: an assert is a check the program may drop (python -O "
                        f"removes it), not the error the lesson asks for; raise a ValueError that says which "
                        f"position is past block_size")
            return (f"{where} raised {exception_name(raised)}: the too-long input reached "
                    f"torch; check past_length + T <= block_size first and raise a clear ValueError")
        y = result["value"]
        if not isinstance(y, torch.Tensor) or tuple(y.shape) != tuple(hidden.shape):
            return f"{where} returned something instead of raising a ValueError: there is no row past {C - 1}"
        if matches(y, facts["wrapped"], atol=1e-9, rtol=0):
            return (f"{where} wrapped round to the first rows (modulo block_size) silently: positions past "
                    f"block_size have no row; raise a ValueError")
        if matches(y, facts["clamped"], atol=1e-9, rtol=0):
            return (f"{where} reused the last row for every position past the table (clamped) silently: "
                    f"raise a ValueError")
        return f"{where} returned an output without error: there is no row past {C - 1}; raise a ValueError"
    return None


# Judged like adds_rows; declared here, after too_long, to keep the table's order.
full_context = check(
    "full_context", 1,
    "block_size 4: T=4, T=2 after 2 cached and T=1 after 3 fit exactly (past_length + T == block_size)",
    probe=probe_positions, fixed_inputs=True,
    inputs=lambda g: {"weight": WEIGHT4.clone(),
                      "cases": [[_h(g, 2, 4, 3), 0], [_h(g, 1, 2, 3), 2], [_h(g, 2, 1, 3), 3]]})(adds_rows)


# ------------------------------------------------------------------- gradient


def probe_gradient(ns, weight, hidden, past):
    module = _positions(ns, weight)
    y = module(hidden.clone(), past)
    if not isinstance(y, torch.Tensor) or not y.requires_grad:
        return {"grad": None}
    y.sum().backward()
    return {"grad": None if module.weight.grad is None else module.weight.grad.clone()}


@check("gradient", 1, "the gradient reaches exactly the rows used, once per sequence of the batch",
       probe=probe_gradient, inputs=lambda g: {"weight": WEIGHT8.clone(), "hidden": _h(g, 3, 2, 4), "past": 4})
def gradient(out, inputs, expected):
    hidden, past, weight = inputs["hidden"], inputs["past"], inputs["weight"]
    B, T, _ = hidden.shape
    if out["grad"] is None:
        return ("no gradient reaches the position table: add rows of self.weight itself "
                "(not self.weight.data, .detach(), a copy or torch.no_grad()), or the positions cannot learn")
    right = torch.zeros_like(weight)
    right[past : past + T] = B
    if problem := compare(out["grad"], right, "the position table's gradient", atol=1e-12, rtol=0):
        return (f"{problem}: with loss = sum of the output, rows {past}..{past + T - 1} should each get "
                f"{B} (one per sequence of the batch) and the others 0")
    return None


# ------------------------------------------------------------ input unchanged


def probe_positions_input(ns, weight, hidden, past):
    module = _positions(ns, weight)
    given = hidden.clone()
    with torch.no_grad():
        out = module(given, past)
    return {"given_after": given, "same_object": out is given}


@check("input_unchanged", 1,
       "the caller's hidden tensor is left as it was: the rows are added out of place (hidden + rows)",
       probe=probe_positions_input,
       inputs=lambda g: {"weight": torch.randn(6, 4, generator=g, dtype=torch.float64),
                         "hidden": torch.randn(2, 3, 4, generator=g, dtype=torch.float64), "past": 1}, gated_by="adds_rows")
def input_unchanged(out, inputs, expected):
    if not torch.equal(out["given_after"], inputs["hidden"]):
        return ("the caller's hidden tensor changed: the rows were added in place (hidden += ...); return "
                "hidden + rows, a new tensor, so the token embeddings the caller holds stay as they were")
    if out["same_object"]:
        return "forward returned the very tensor it was given: return hidden + rows, a new tensor"
    return None
