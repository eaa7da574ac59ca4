"""RMSNorm without gain, and a stable softmax, both built from Values.

The judges compare each with its float value, name the classic mistakes (eps outside the
root, the wrong statistic, no max subtracted), and check the gradients against the
analytic ones, so a scale or total taken from .data (outside the graph) shows. On the
public checks' inputs those values are data the kit computed (grader/checks/facts.py).
"""

from __future__ import annotations

from grader.checks._api import check, standard_message
from grader.checks.confusions import formula_confusion
from grader.checks.ch00_micro.common import NEAR, all_close, data_of, is_number, off_by, task_of, values_of
from grader.checks.facts import known_facts

TASKS = [
    task_of("micro_rmsnorm", "rmsnorm", "RMSNorm without gain"),
    task_of("micro_softmax", "softmax", "a stable softmax"),
]


# -------------------------------------------------------------------- RMSNorm


def _grid_confusion(formula, data, facts) -> "str | None":
    """The parts a wrong output was built with, among the other choices for the formula's
    parts whose outputs the facts hold ("grid", [(parts, values)]), in the words of
    grader.checks.confusions."""
    for parts, wrong in facts.get("grid") or ():
        if all_close(data, wrong, NEAR) and (said := formula_confusion(formula, parts)):
            return said
    return None


def _probe_vector_function(ns, name, numbers, w, error, key):
    """Call micro.<name> on Values of `numbers`: its data, whether it returned Values, and
    with weights w the inputs' gradients of sum(w·out). `error` raised is the answer {key: ...}."""
    inputs = values_of(ns, numbers)
    try:
        out = getattr(ns.micro, name)(inputs)
    except error as raised:
        return {key: str(raised)}
    result = {"data": data_of(out, f"{name}'s result"), "values": all(isinstance(v, ns.micro.Value) for v in out)}
    if w is not None:
        ns.micro.vsum([wi * v for wi, v in zip(w, out)]).backward()
        result["grads"] = [v.grad for v in inputs]
    return result


def probe_rmsnorm(ns, x, w=None):
    return _probe_vector_function(ns, "rmsnorm", x, w, ZeroDivisionError, "zero_division")


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
        if slip := _grid_confusion("rmsnorm", out["data"], facts):
            return slip
        if reveal:
            return f"rmsnorm({x}) gave {out['data']}, expected x / sqrt(mean(x²) + 1e-5) = {want}"
        return f"rmsnorm is off by up to {off_by(out['data'], want):.3g}: x / sqrt(mean(x²) + 1e-5), no gain"
    if w is not None:
        grads = facts["grads"]
        if not all_close(out["grads"], grads, 1e-10):
            if all_close(out["grads"], facts["constant_scale"], NEAR):
                return ("the values are right but the gradients are not: the scale 1/sqrt(mean(x²) + eps) is "
                        "treated as a constant (computed from .data); build it from Values so it is in the graph")
            if reveal:
                return f"the gradients through rmsnorm are {out['grads']}, expected {grads}"
            return f"the gradients through rmsnorm are off by up to {off_by(out['grads'], grads):.3g}"
    return None


@check("figure", 2, "(1, 3) normalises to (1, 3) / sqrt(5.00001): mean of squares, eps 1e-5 inside, no gain",
       task="micro_rmsnorm", probe=probe_rmsnorm, inputs=lambda g: {"x": [1.0, 3.0]})
def judge_rmsnorm_figure(out, inputs, expected):
    problem = judge_rmsnorm(out, inputs["x"], None, True, known_facts(inputs))
    return f"(1, 3) should normalise to (1, 3) / sqrt(5.00001): {problem}" if problem else None


# Stacked: the decorator nearest the judge is declared first (the lesson's order, read bottom up).
@check("gradient", 2, "the gradient through rmsnorm equals the analytic one (the scale is part of the graph)",
       task="micro_rmsnorm", probe=probe_rmsnorm,
       inputs=lambda g: {"x": [0.5, -1.2, 2.0, 0.1], "w": [0.3, -0.8, 1.1, 0.4]})
@check("zero_vector", 1, "an all-zero vector stays 0 (eps keeps it finite)", task="micro_rmsnorm",
       probe=probe_rmsnorm, inputs=lambda g: {"x": [0.0, 0.0, 0.0]}, gated_by="figure")
def judge_rmsnorm_public(out, inputs, expected):
    return judge_rmsnorm(out, inputs["x"], inputs.get("w"), True, known_facts(inputs))


# -------------------------------------------------------------------- softmax


def probe_softmax(ns, logits, w=None):
    return _probe_vector_function(ns, "softmax", logits, w, OverflowError, "overflow")


def judge_softmax(out, logits, w, reveal, facts):
    """facts: softmax of the logits ("want") and, with weights w, the gradients of sum(w·p)
    ("grads") and those a total taken outside the graph gives ("constant_total")."""
    if "overflow" in out:
        return (f"exp overflowed{standard_message(out['overflow'])} on logits near {max(logits):g}: subtract the "
                f"largest "
                f"logit (a plain number, max of .data) before exp" if reveal else
                f"exp overflowed{standard_message(out['overflow'])} on large logits: subtract the largest logit "
                f"before exp")
    if not out["values"]:
        return "softmax should return a list of Values (the graph needs them for backward)"
    want = facts["want"]
    if len(out["data"]) != len(logits):
        return f"softmax of {len(logits)} logits returned {len(out['data'])} values"
    if any(not is_number(p) for p in out["data"]):
        return "softmax gave NaN or inf: subtract the largest logit before exp"
    if not all_close(out["data"], want, 1e-12) and (slip := _grid_confusion("softmax", out["data"], facts)):
        return slip
    if not all_close(out["data"], want, 1e-12):
        if abs(sum(out["data"]) - 1.0) > 1e-9:
            return f"the probabilities sum to {sum(out['data']):.6g}, not 1: divide every exp by their total"
        if reveal:
            return f"softmax({logits}) gave {out['data']}, expected {want}"
        return f"softmax is off by up to {off_by(out['data'], want):.3g}"
    if w is not None:
        grads = facts["grads"]
        if not all_close(out["grads"], grads, 1e-10):
            if all_close(out["grads"], facts["constant_total"], NEAR):
                return ("the values are right but the gradients are not: the total is treated as a constant "
                        "(a float from .data); divide by the Value vsum(exps) so it is in the graph")
            if reveal:
                return f"the gradients through softmax are {out['grads']}, expected {grads}"
            return f"the gradients through softmax are off by up to {off_by(out['grads'], grads):.3g}"
    return None


# Stacked: the decorator nearest the judge is declared first (the lesson's order, read bottom up).
@check("gradient", 2,
       "values and gradients of a small softmax equal the analytic ones (the total is part of the graph)",
       task="micro_softmax", probe=probe_softmax,
       inputs=lambda g: {"logits": [0.5, -1.2, 2.0, 0.1], "w": [0.3, -0.8, 1.1, 0.4]})
@check("stable", 2, "logits (1000, 1001, 999) give the exact probabilities, summing to 1, without overflow",
       task="micro_softmax", probe=probe_softmax, inputs=lambda g: {"logits": [1000.0, 1001.0, 999.0]})
def judge_softmax_public(out, inputs, expected):
    return judge_softmax(out, inputs["logits"], inputs.get("w"), True, known_facts(inputs))
