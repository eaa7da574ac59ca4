"""The hidden checks of the task micro_value_mul, and the facts its public checks read."""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.ch00_micro.common import judge_ops, probe_value_ops, value_cases
from grader.checks.ch00_micro.hidden.common import uniform
from grader.checks.ch00_micro.hidden.oracles import op_facts
from grader.checks.ch00_micro.micro_value_mul import value_and_gradients
from grader.checks.facts import facts_for


@facts_for(value_and_gradients)
def public_op_facts(ref, inputs):
    return op_facts(inputs["cases"])


def _random_cases(g):
    u = lambda lo, hi: uniform(g, lo, hi)  # noqa: E731
    cases = value_cases("mul", *[(u(-4, 4), u(-4, 4)) for _ in range(3)]) + value_cases("square", (u(-4, 4),))
    return {"cases": cases}


@check("random_values", 1, "random a, b: value and gradients exact",
       probe=probe_value_ops, inputs=_random_cases, hidden=True)
def random_values(out, inputs, expected):
    return judge_ops(out, inputs["cases"], False, op_facts(inputs["cases"]))
