"""Value.__add__: a + b, with a constant on either side, and a Value added to itself.

The probe and the judge are the six operations' own (probe_value_ops and judge_ops, in
common.py, which says what they do).
"""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.ch00_micro.common import judge_ops, probe_value_ops, task_of, value_cases
from grader.checks.facts import known_facts

TASKS = [task_of("micro_value_add", "Value.__add__", "Value: a + b", numbers_only=True)]


@check("value_and_gradients", 2, "a + b, a + 2.5, 2.5 + a and a + a: right values, local gradients 1 (a + a gives 2)",
       probe=probe_value_ops,
       inputs=lambda g: {"cases": value_cases("add", (1.5, -2.25)) + value_cases("add_const", (1.5,))
                         + value_cases("radd", (-0.75,)) + value_cases("add_self", (1.5,))})
def value_and_gradients(out, inputs, expected):
    return judge_ops(out, inputs["cases"], True, known_facts(inputs))
