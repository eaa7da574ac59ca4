"""The parameter ledger: parameter_count(cfg) = 2Vd + Cd + N(4d² + 2df + f + 5d) + 2d.

The checks pin the lesson's two figures (107,776 and 424), random configurations, and
that the count equals what TransformerLM(cfg) registers; a wrong count is matched to
the part it forgot or added (a reused block, a bias on the head, a tied head, ...). The
ledger's counts for the public configurations are data the kit computed
(grader/checks/facts.py).
"""

from __future__ import annotations

from grader.checks._api import Task, check, shown_count
from grader.checks.ch07_model.common import FIGURES, SIZES, count_problem, describe_value
from grader.checks.course import LEDGER, config
from grader.checks.facts import known_facts

TASKS = [
    Task("parameter_count", "model", "parameter_count", "the parameter ledger"),
]


def probe_parameter_count(ns, configs):
    return {"counts": [ns.model.parameter_count(config(ns, SIZES, **sizes)) for sizes in configs]}


def judge_counts(out, inputs, facts, hidden):
    """facts: per configuration, the ledger's count and the known mistakes' (count_problem)."""
    counts = out["counts"]
    for count, sizes, said in zip(counts, inputs["configs"], facts):
        if isinstance(count, bool) or not isinstance(count, int):
            return f"parameter_count should return a Python int, got {type(count).__name__}"
        if count == said["ledger"]:
            continue
        why = count_problem(count, said)
        if hidden:
            return ("for one of the hidden configurations the count differs from the ledger " + LEDGER
                    + (f": {why}" if why else ""))
        return (f"for {describe_value(sizes)} the ledger {LEDGER} gives {said['ledger']:,}, got {shown_count(count)}"
                + (f": {why}" if why else ""))
    return None


@check("published_figures", 2,
       "V=32, C=64, N=2, d=64, h=4, f=256 gives 107,776; V=10, C=6, N=2, d=4, h=2, f=8 gives 424",
       probe=probe_parameter_count, inputs=lambda g: {"configs": FIGURES})
def published_figures(out, inputs, expected):
    return judge_counts(out, inputs, known_facts(inputs), hidden=False)


def probe_parameter_count_vs_model(ns, sizes):
    model = ns.model.TransformerLM(config(ns, SIZES, **sizes))
    return {"count": ns.model.parameter_count(config(ns, SIZES, **sizes)),
            "registered": sum(p.numel() for p in model.parameters())}


@check("matches_model", 1, "parameter_count(cfg) equals the parameters TransformerLM(cfg) registers",
       probe=probe_parameter_count_vs_model, runs_later=("lm_init",),
       inputs=lambda g: {"sizes": dict(vocab_size=27, block_size=16, n_layers=3, d_model=12, n_heads=3, d_ff=48)})
def matches_model(out, inputs, expected):
    if isinstance(out["count"], bool) or not isinstance(out["count"], int):
        return f"parameter_count should return a Python int, got {type(out['count']).__name__}"
    if out["count"] != out["registered"]:
        why = count_problem(out["count"], known_facts(inputs))
        return (f"for {describe_value(inputs['sizes'])} parameter_count gives {shown_count(out['count'])} but TransformerLM "
                f"registers {shown_count(out['registered'])}" + (f": {why}" if why else ""))
    return None
