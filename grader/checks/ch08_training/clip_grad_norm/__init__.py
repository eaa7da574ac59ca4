"""Clipping the gradients by their global norm.

The clipping is compared with torch.nn.utils.clip_grad_norm_ on the same gradients the
probe was given, and with each classic mistake (MISTAKES): on the public checks'
fixed inputs those norms and gradients are data the kit computed (grader/checks/facts.py;
hidden/clip_grad_norm.py computes them). The sandbox only applies the student's code and
reports what it did.
"""

from __future__ import annotations

import torch

from grader.checks._api import (
    Task, check, float32_verdict, matches, matches_to_float32, naming, numbered, torch_library_except,
)
from grader.checks.ch08_training.common import close_enough, is_float
from grader.checks.course import F64
from grader.checks.facts import known_facts

TASKS = [
    Task("clip_grad_norm", "train", "clip_grad_norm", "clipping by the global norm",
         forbidden=("torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_norm",
                    "torch.nn.utils.clip_grad.clip_grad_norm_", "torch.nn.utils.clip_grad.clip_grad_norm",
                    "torch.nn.utils.get_total_norm", "torch.nn.utils.clip_grads_with_norm_"),
         # All the gradients' entries as one vector, as the lesson puts it: a building block.
         forbidden_ops=("_foreach_*", "torch.nn.utils.clip_grad.*")
                       + torch_library_except(("torch.nn.utils.convert_parameters.parameters_to_vector",))),
]


def probe_clip(ns, cases):
    results = []
    for case in cases:
        tensors = []
        for g in case["grads"]:
            shape = g.shape if g is not None else (3,)
            t = torch.zeros(shape, dtype=F64, requires_grad=True)
            t.grad = None if g is None else g.clone()
            tensors.append(t)
        listed = [tensors[i] for i in case["order"]]
        total = ns.train.clip_grad_norm(iter(listed) if case.get("as_generator") else listed, case["max_norm"])
        results.append({"total": total.detach().clone() if isinstance(total, torch.Tensor) else total,
                        "grads": [None if t.grad is None else t.grad.detach().clone() for t in tensors]})
    return results


MISTAKES = {
    "own_norm": "each tensor is clipped by its own norm; clip by the global norm of all gradients together "
                "(sqrt of the sum of every entry squared), one factor for all",
    "always_scaled": "the gradients are scaled even though their norm is below max_norm: scale only when the norm "
                     "exceeds it (factor min(1, max_norm / (norm + 1e-6)))",
    "squared_norm": "the returned value is the squared norm: return sqrt(sum of squares)",
    "norm_after": "the returned norm is taken after clipping; return the norm before clipping",
    "no_eps": "the factor is max_norm / norm; it is max_norm / (norm + 1e-6), as torch's clip_grad_norm_",
    "shared_counted_twice": "a tensor listed twice (a shared weight) is counted twice in the norm; count each "
                            "tensor once",
    "shared_scaled_twice": "a tensor listed twice (a shared weight) is scaled twice; scale each tensor once",
    # torch.nn.utils.clip_grad_norm_ itself, handed the list with the repeat: both at once.
    "shared_counted_and_scaled_twice": "a tensor listed twice (a shared weight) is counted twice in the norm and "
                                       "scaled twice, as torch's clip_grad_norm_ does with a repeated tensor; count "
                                       "and scale each tensor once",
    "by_value": "each entry is clamped to [-max_norm, max_norm] (clipping by value); clip by the global L2 norm",
}


def grads_match(actual, wanted, atol=1e-12, rtol=1e-12, float32=False):
    """Each gradient matches (float32: or agrees to float32's precision), None where wanted is."""
    if not isinstance(actual, list) or len(actual) != len(wanted):
        return False
    for a, w in zip(actual, wanted):
        if w is None:
            if a is not None:
                return False
        elif not (matches_to_float32(a, w, atol=atol, rtol=rtol) if float32 else matches(a, w, atol=atol, rtol=rtol)):
            return False
    return True


def clip_problem(out, inputs, facts, hidden=False, precision=False):
    """facts: per case, torch's total norm and clipped gradients ("right") and each mistake's
    of MISTAKES ("mistakes", None for one that gives the right answer on that case).
    A norm and gradients right to float32's precision only are named by the precision check
    (precision=True: matches_torch) and pass every other."""
    float32 = None
    for number, (case, result, said) in enumerate(zip(inputs["cases"], out, facts), start=1):
        total, grads = result["total"], result["grads"]
        right_total, right_grads = said["right"]
        label = numbered("case", number) + ("" if hidden else f" (max_norm {case['max_norm']})")
        if not isinstance(total, torch.Tensor):
            if is_float(total) and close_enough(float(total), float(right_total), 1e-12):
                return (f"{label}: the norm is returned as a {type(total).__name__}; return it as a 0-d tensor, "
                        f"like torch.nn.utils.clip_grad_norm_")
            return f"{label}: clip_grad_norm should return the total norm as a 0-d tensor, got {type(total).__name__}"
        if total.dim() != 0:
            return f"{label}: the returned norm has shape {list(total.shape)}; it should be a 0-d tensor"
        total_ok = matches(total, right_total, atol=1e-12, rtol=1e-12)
        grads_ok = grads_match(grads, right_grads)
        if total_ok and grads_ok:
            continue
        for name, why in MISTAKES.items():
            wrong = said["mistakes"][name]
            if wrong is not None and matches(total, wrong[0], atol=1e-12, rtol=1e-10) and grads_match(
                    grads, wrong[1], 1e-12, 1e-10):
                return naming(name, f"{label}: {why}")
        if matches_to_float32(total, right_total, atol=1e-12, rtol=1e-12) and grads_match(
                grads, right_grads, float32=True):
            float32 = float32 or (label, total_ok, total, right_total)
            continue
        if not total_ok:
            return f"{label}: the returned norm differs from the global L2 norm of the gradients before clipping"
        if any(g is None for g, w in zip(grads, right_grads) if w is not None):
            return f"{label}: a gradient was removed; clipping must scale .grad in place"
        if grads_match(grads, [None if g is None else g for g in case["grads"]]) and float(right_total) > case["max_norm"]:
            if case.get("as_generator"):
                return (f"{label}: with parameters given as a generator (like model.parameters()) nothing was "
                        f"clipped: a generator can be read only once, so make a list of it first")
            return f"{label}: the norm exceeds max_norm but the gradients were not scaled (scale p.grad in place)"
        return (f"{label}: the gradients after clipping differ from torch.nn.utils.clip_grad_norm_'s "
                f"(every gradient times min(1, max_norm / (norm + 1e-6)))")
    if float32 and precision:
        label, total_ok, total, right_total = float32
        if total_ok:  # the norm is right: the gradients are what float32 rounded
            return float32_verdict(f"{label}: the clipped gradients", "your clipping",
                                   "the gradients' dtype (float64 here)", plural=True,
                                   against="torch.nn.utils.clip_grad_norm_'s ")
        return float32_verdict(f"{label}: the returned norm", "your clipping", "the gradients' dtype (float64 here)",
                               total, right_total, against="torch.nn.utils.clip_grad_norm_'s ")
    return None


def _clip_cases(g):
    def grads(scale):
        return [torch.randn(3, 4, generator=g, dtype=F64) * scale, torch.randn(4, generator=g, dtype=F64) * scale,
                torch.randn(2, 2, 2, generator=g, dtype=F64) * scale]

    return {"cases": [{"grads": grads(1.0), "order": [0, 1, 2], "max_norm": 0.5},
                      {"grads": grads(1.0), "order": [0, 1, 2], "max_norm": 1.0},
                      {"grads": grads(0.1), "order": [0, 1, 2], "max_norm": 100.0}]}


def _clip_global_inputs(g):
    # norms 3 and 4: global 5; with max_norm 1 each is scaled by 1/5, to 0.6 and 0.8
    return {"cases": [{"grads": [torch.tensor([3.0, 0.0], dtype=F64), torch.tensor([[0.0, 0.0], [4.0, 0.0]], dtype=F64)],
                       "order": [0, 1], "max_norm": 1.0}]}


def _clip_below_inputs(g):
    return {"cases": [{"grads": [torch.randn(5, generator=g, dtype=F64) * 0.1,
                                 torch.randn(2, 3, generator=g, dtype=F64) * 0.1], "order": [0, 1], "max_norm": 10.0}]}


def _clip_missing_shared_inputs(g):
    grads = [torch.randn(4, generator=g, dtype=F64) * 2, None, torch.randn(2, 3, generator=g, dtype=F64) * 2]
    return {"cases": [{"grads": grads, "order": [0, 1, 2, 0], "max_norm": 1.0},
                      {"grads": [x.clone() if x is not None else None for x in grads], "order": [2, 1, 0],
                       "max_norm": 1.0, "as_generator": True}]}


@check("matches_torch", 2,
       "max_norm 0.5, 1 and 100: the returned norm and the clipped gradients equal "
       "torch.nn.utils.clip_grad_norm_'s, to float64's precision",
       probe=probe_clip, inputs=_clip_cases, fixed_inputs=True)
def matches_torch(out, inputs, expected):
    return clip_problem(out, inputs, known_facts(inputs), precision=True)

@check("global_norm", 1,
       "gradients with norms 3 and 4 (global 5) and max_norm 1 become norms 0.6 and 0.8: one factor for all",
       probe=probe_clip, inputs=_clip_global_inputs)
def global_norm(out, inputs, expected):
    return clip_problem(out, inputs, known_facts(inputs))


below_limit_untouched = check(
    "below_limit_untouched", 1, "gradients whose norm is below max_norm are left exactly as they are",
    probe=probe_clip, inputs=_clip_below_inputs, fixed_inputs=True)(global_norm)

missing_and_shared = check(
    "missing_and_shared", 1,
    "a parameter without .grad is skipped, a tensor listed twice counts once, a generator works",
    probe=probe_clip, inputs=_clip_missing_shared_inputs, fixed_inputs=True)(global_norm)

