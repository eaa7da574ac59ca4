"""Value.exp: e to the Value, whose local gradient is itself.

The probe and the judge are the six operations' own (probe_value_ops and judge_ops, in
common.py, which says what they do).
"""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.ch00_micro.common import judge_ops, probe_value_ops, task_of, value_cases
from grader.checks.facts import known_facts

TASKS = [task_of("micro_value_exp", "Value.exp", "Value: exp", numbers_only=True)]


@check("value_and_gradient", 2, "exp(x) at 0.7, -1.3, 2.0: value and gradient both exp(x)",
       probe=probe_value_ops, inputs=lambda g: {"cases": value_cases("exp", (0.7,), (-1.3,), (2.0,))})
def value_and_gradient(out, inputs, expected):
    return judge_ops(out, inputs["cases"], True, known_facts(inputs))
