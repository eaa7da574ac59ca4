"""Value.relu: max(0, x), local gradient 1 above zero and 0 at or below it.

The probe and the judge are the six operations' own (probe_value_ops and judge_ops, in
common.py, which says what they do).
"""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.ch00_micro.common import judge_ops, probe_value_ops, task_of, value_cases
from grader.checks.facts import known_facts

TASKS = [task_of("micro_value_relu", "Value.relu", "Value: relu", numbers_only=True)]


# One judge for both, declared in the lesson's order (value_and_gradient before at_zero).
@check("value_and_gradient", 2, "relu at 1.3 and -0.8: (1.3, gradient 1) and (0, gradient 0)",
       probe=probe_value_ops, inputs=lambda g: {"cases": value_cases("relu", (1.3,), (-0.8,), (2.5,), (-3.0,))})
def value_and_gradient(out, inputs, expected):
    return judge_ops(out, inputs["cases"], True, known_facts(inputs))


at_zero = check(
    "at_zero", 1, "relu(0) = 0 with gradient 0 (the convention of the docstring)",
    probe=probe_value_ops, inputs=lambda g: {"cases": value_cases("relu", (0.0,))})(value_and_gradient)
