"""Value.log: the natural log, local gradient 1/x.

The probe and the judge are common to the six operations (common.py): the probe builds
Values, applies the op, runs the (certified) backward and returns the value and the input
gradients; the judge compares them with the hand-computed truth and names the classic
mistake a wrong gradient reproduces. On the public check's inputs both are data the kit
computed (grader/checks/facts.py).
"""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.ch00_micro.common import judge_ops, probe_value_ops, task_of, value_cases
from grader.checks.facts import known_facts

TASKS = [task_of("micro_value_log", "Value.log", "Value: log")]


@check("value_and_gradient", 2, "log(x) at 2.5, 0.3, 1.0: value log x, gradient 1/x",
       probe=probe_value_ops, inputs=lambda g: {"cases": value_cases("log", (2.5,), (0.3,), (1.0,))})
def judge_ops_public(out, inputs, expected):
    return judge_ops(out, inputs["cases"], True, known_facts(inputs))
