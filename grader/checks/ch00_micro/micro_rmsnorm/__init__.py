"""RMSNorm without gain, built from Values.

The judges compare it with its float value, name the classic mistakes (eps outside the
root, the wrong statistic), and check the gradients against the analytic ones, so a
scale taken from .data (outside the graph) shows. On the public checks' inputs those
values are data the kit computed (grader/checks/facts.py).
"""

from __future__ import annotations

from grader.checks._api import check, constant, standard_message
from grader.checks.ch00_micro.common import NEAR, all_close, grid_confusion, off_by, probe_vector_function, task_of
from grader.checks.facts import known_facts

TASKS = [task_of("micro_rmsnorm", "rmsnorm", "RMSNorm without gain", numbers_only=True)]


def probe_rmsnorm(ns, x, w=None):
    return probe_vector_function(ns, "rmsnorm", x, w, ZeroDivisionError, "zero_division")


def judge_rmsnorm(out, x, w, reveal, facts):
    """facts: RMSNorm of x ("want"), the classic mistakes' ("mistakes", [(text, values)]) and,
    with weights w, the gradients of sum(w·out) ("grads") and those a scale taken outside
    the graph gives ("constant_scale")."""
    if "zero_division" in out:
        return (f"rmsnorm divided by zero{standard_message(out['zero_division'])}: eps = 1e-5 goes inside the "
                f"square root, "
                f"so an all-zero vector stays finite")
    if not out["values"]:
        return "rmsnorm should return a list of Values (the graph needs them for backward)"
    want = facts["want"]
    if len(out["data"]) != len(x):
        return f"rmsnorm of {len(x)} values returned {len(out['data'])}"
    if not all_close(out["data"], want, 1e-12):
        for text, wrong in facts["mistakes"]:
            if all_close(out["data"], wrong, NEAR):
                return text
        if slip := grid_confusion("rmsnorm", out["data"], facts):
            return slip
        if reveal:
            return f"rmsnorm({x}) gave {out['data']}, expected x / sqrt(mean(x²) + 1e-5) = {want}"
        return f"rmsnorm is off by up to {off_by(out['data'], want):.3g}: x / sqrt(mean(x²) + 1e-5), no gain"
    if w is not None:
        grads = facts["grads"]
        if not all_close(out["grads"], grads, 1e-10):
            if all_close(out["grads"], facts["constant_scale"], NEAR):
                return constant("the values are right but the gradients are not: the scale 1/sqrt(mean(x²) + eps) "
                                "is treated as a constant (computed from .data); build it from Values so it is in "
                                "the graph")
            if reveal:
                return f"the gradients through rmsnorm are {out['grads']}, expected {grads}"
            return f"the gradients through rmsnorm are off by up to {off_by(out['grads'], grads):.3g}"
    return None


@check("figure", 2, "(1, 3) normalises to (1, 3) / sqrt(5.00001): mean of squares, eps 1e-5 inside, no gain",
       probe=probe_rmsnorm, inputs=lambda g: {"x": [1.0, 3.0]})
def figure(out, inputs, expected):
    problem = judge_rmsnorm(out, inputs["x"], None, True, known_facts(inputs))
    return f"(1, 3) should normalise to (1, 3) / sqrt(5.00001): {problem}" if problem else None


# One judge for both, declared in the lesson's order.
@check("zero_vector", 1, "an all-zero vector stays 0 (eps keeps it finite)",
       probe=probe_rmsnorm, inputs=lambda g: {"x": [0.0, 0.0, 0.0]}, gated_by="figure")
def zero_vector(out, inputs, expected):
    return judge_rmsnorm(out, inputs["x"], inputs.get("w"), True, known_facts(inputs))


gradient = check(
    "gradient", 2, "the gradient through rmsnorm equals the analytic one (the scale is part of the graph)",
    probe=probe_rmsnorm,
    inputs=lambda g: {"x": [0.5, -1.2, 2.0, 0.1], "w": [0.3, -0.8, 1.1, 0.4]})(zero_vector)
