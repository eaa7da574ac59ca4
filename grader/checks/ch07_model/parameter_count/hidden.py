"""The hidden checks of grader/checks/ch07_model/parameter_count/__init__.py."""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.course import LEDGER
from grader.checks.ch07_model.hidden.common import count_facts, random_lm_configs
from grader.checks.ch07_model.parameter_count import (
    judge_counts, matches_model, probe_parameter_count, published_figures,
)
from grader.checks.facts import facts_for


@facts_for(published_figures)
def figures_facts(ref, inputs):
    return [count_facts(sizes) for sizes in inputs["configs"]]


@facts_for(matches_model)
def model_count_facts(ref, inputs):
    return count_facts(inputs["sizes"])


@check("random_configs", 2, "random configurations follow the ledger " + LEDGER,
       probe=probe_parameter_count, inputs=lambda g: {"configs": random_lm_configs(g)}, hidden=True)
def random_configs(out, inputs, expected):
    return judge_counts(out, inputs, [count_facts(sizes) for sizes in inputs["configs"]], hidden=True)
