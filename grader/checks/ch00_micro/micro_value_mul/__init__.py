"""Value.__mul__: a * b, with a constant on either side, and a Value times itself.

The probe and the judge are the six operations' own (probe_value_ops and judge_ops, in
common.py, which says what they do).
"""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.ch00_micro.common import judge_ops, probe_value_ops, task_of, value_cases
from grader.checks.facts import known_facts

TASKS = [task_of("micro_value_mul", "Value.__mul__", "Value: a * b", numbers_only=True)]


@check("value_and_gradients", 2,
       "a * b gives a the gradient b and b the gradient a; a * a gives 2a; constants work on both sides",
       probe=probe_value_ops,
       inputs=lambda g: {"cases": value_cases("mul", (1.5, -2.25)) + value_cases("square", (1.25,))
                         + value_cases("mul_const", (0.5,)) + value_cases("rmul", (0.5,))})
def value_and_gradients(out, inputs, expected):
    return judge_ops(out, inputs["cases"], True, known_facts(inputs))
