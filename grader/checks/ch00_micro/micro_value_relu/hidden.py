"""The hidden checks of the task micro_value_relu, and the facts its public checks read."""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.ch00_micro.common import judge_ops, probe_value_ops, value_cases
from grader.checks.ch00_micro.hidden.common import uniform
from grader.checks.ch00_micro.hidden.oracles import op_facts
from grader.checks.ch00_micro.micro_value_relu import at_zero, value_and_gradient
from grader.checks.facts import facts_for


@facts_for(value_and_gradient, at_zero)
def public_op_facts(ref, inputs):
    return op_facts(inputs["cases"])


def _random_cases(g):
    u = lambda lo, hi: uniform(g, lo, hi)  # noqa: E731
    cases = value_cases("relu", (u(-3, -0.05),), (u(0.05, 3),), (u(-3, -0.05),), (u(0.05, 3),))
    return {"cases": cases}


@check("random_values", 1, "random inputs of both signs: exact",
       probe=probe_value_ops, inputs=_random_cases, hidden=True)
def random_values(out, inputs, expected):
    return judge_ops(out, inputs["cases"], False, op_facts(inputs["cases"]))
