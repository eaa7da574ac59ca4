"""A stable softmax, built from Values.

The judges compare it with its float value, name the classic mistakes (no max
subtracted, no division by the total), and check the gradients against the analytic
ones, so a total taken from .data (outside the graph) shows. On the public checks'
inputs those values are data the kit computed (grader/checks/facts.py).
"""

from __future__ import annotations

from grader.checks._api import check, standard_message
from grader.checks.ch00_micro.common import (NEAR, all_close, grid_confusion, is_number, off_by, probe_vector_function,
                                             task_of)
from grader.checks.facts import known_facts

TASKS = [task_of("micro_softmax", "softmax", "a stable softmax", numbers_only=True)]


def probe_softmax(ns, logits, w=None):
    return probe_vector_function(ns, "softmax", logits, w, OverflowError, "overflow")


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
    if not all_close(out["data"], want, 1e-12) and (slip := grid_confusion("softmax", out["data"], facts)):
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


# One judge for both, declared in the lesson's order.
@check("stable", 2, "logits (1000, 1001, 999) give the exact probabilities, summing to 1, without overflow",
       probe=probe_softmax, inputs=lambda g: {"logits": [1000.0, 1001.0, 999.0]})
def stable(out, inputs, expected):
    return judge_softmax(out, inputs["logits"], inputs.get("w"), True, known_facts(inputs))


gradient = check(
    "gradient", 2,
    "values and gradients of a small softmax equal the analytic ones (the total is part of the graph)",
    probe=probe_softmax,
    inputs=lambda g: {"logits": [0.5, -1.2, 2.0, 0.1], "w": [0.3, -0.8, 1.1, 0.4]})(stable)
