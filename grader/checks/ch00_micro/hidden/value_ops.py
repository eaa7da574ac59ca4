"""The hidden checks of grader/checks/ch00_micro/value_ops.py."""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.ch00_micro.hidden.common import uniform
from grader.checks.ch00_micro.hidden.oracles import op_facts
from grader.checks.ch00_micro.value_ops import value_cases, judge_ops, probe_value_ops
from grader.checks.facts import facts_for


@facts_for(*(f"ch00.micro_value_{name}" for name in ("add.value_and_gradients", "mul.value_and_gradients",
                                                      "pow.power_rule", "exp.value_and_gradient",
                                                      "log.value_and_gradient", "relu.value_and_gradient",
                                                      "relu.at_zero")))
def public_op_facts(ref, inputs):
    return op_facts(inputs["cases"])


def _random_cases(kind):
    def make(g):
        u = lambda lo, hi: uniform(g, lo, hi)  # noqa: E731
        if kind == "add":
            cases = value_cases("add", *[(u(-4, 4), u(-4, 4)) for _ in range(3)]) + value_cases("add_self", (u(-4, 4),))
        elif kind == "mul":
            cases = value_cases("mul", *[(u(-4, 4), u(-4, 4)) for _ in range(3)]) + value_cases("square", (u(-4, 4),))
        elif kind == "pow":
            cases = [c for k in (3, 2.5, -1, -0.5, 0.5, 1.5) for c in value_cases("pow", (u(0.2, 3.0),), k=k)]
        elif kind == "exp":
            cases = value_cases("exp", *[(u(-3, 3),) for _ in range(4)])
        elif kind == "log":
            cases = value_cases("log", *[(u(0.05, 6.0),) for _ in range(4)])
        else:
            cases = value_cases("relu", (u(-3, -0.05),), (u(0.05, 3),), (u(-3, -0.05),), (u(0.05, 3),))
        return {"cases": cases}
    return make


@check("random_values", 1, "random inputs of both signs: exact", task="micro_value_relu", probe=probe_value_ops,
       inputs=_random_cases("relu"), hidden=True)
@check("random_values", 1, "random positive x: exact", task="micro_value_log", probe=probe_value_ops,
       inputs=_random_cases("log"), hidden=True)
@check("random_values", 1, "random x: exact", task="micro_value_exp", probe=probe_value_ops,
       inputs=_random_cases("exp"), hidden=True)
@check("random_values", 1, "random positive bases and several exponents: exact", task="micro_value_pow",
       probe=probe_value_ops, inputs=_random_cases("pow"), hidden=True)
@check("random_values", 1, "random a, b: value and gradients exact", task="micro_value_mul", probe=probe_value_ops,
       inputs=_random_cases("mul"), hidden=True)
@check("random_values", 1, "random a, b: value and gradients exact", task="micro_value_add", probe=probe_value_ops,
       inputs=_random_cases("add"), hidden=True)
def judge_ops_hidden(out, inputs, expected):
    return judge_ops(out, inputs["cases"], False, op_facts(inputs["cases"]))
