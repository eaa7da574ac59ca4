"""Value.__pow__: a ** k for a plain number k, and the power rule.

The probe and the judge are the six operations' own (probe_value_ops and judge_ops, in
common.py, which says what they do).
"""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.ch00_micro.common import judge_ops, probe_value_ops, task_of, value_cases
from grader.checks.facts import known_facts

TASKS = [task_of("micro_value_pow", "Value.__pow__", "Value: a ** k", numbers_only=True)]


@check("power_rule", 2, "x ** k for k = 3, 2.5, -1, -0.5, 0.5: value x^k, gradient k * x^(k-1)",
       probe=probe_value_ops,
       inputs=lambda g: {"cases": [c for k in (3, 2.5, -1, -0.5, 0.5) for c in value_cases("pow", (1.7,), k=k)]})
def power_rule(out, inputs, expected):
    return judge_ops(out, inputs["cases"], True, known_facts(inputs))
