"""The hidden checks of grader/checks/ch07_model/lm_init/__init__.py."""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.ch07_model.hidden.common import count_facts, random_lm_configs
from grader.checks.ch07_model.lm_init import (
    heads_do_not_change_count, judge_lm_counts, parameter_ledger, probe_lm_counts,
)
from grader.checks.facts import facts_for


@facts_for(parameter_ledger, heads_do_not_change_count)
def ledger_facts(ref, inputs):
    return [count_facts(sizes) for sizes in inputs["configs"]]


@check("ledger_random_configs", 2, "random configurations register exactly the ledger's count",
       probe=probe_lm_counts, inputs=lambda g: {"configs": random_lm_configs(g, 3)}, hidden=True)
def ledger_random_configs(out, inputs, expected):
    return judge_lm_counts(out, inputs, [count_facts(sizes) for sizes in inputs["configs"]], hidden=True)
