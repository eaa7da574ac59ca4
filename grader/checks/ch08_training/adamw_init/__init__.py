"""AdamW's parameters and state, as its __init__ makes them.

A tensor listed twice (a shared weight) is held once, in first-seen order, and m, v and
the step counts start at zero for each parameter. The distinct parameters of the public
check's fixed order are data the kit computed (grader/checks/facts.py).
"""

from __future__ import annotations

import torch

from grader.checks._api import Task, check, exception_name, shape_problem, try_call
from grader.checks.ch08_training.common import SIZES, model_of
from grader.checks.course import F64
from grader.checks.facts import known_facts

TASKS = [
    Task("adamw_init", "train", "AdamW.__init__", "AdamW's parameters and state"),
]


def _held(optimizer, originals):
    held = []
    for p in getattr(optimizer, "params", None) or []:
        held.append(next((j for j, q in enumerate(originals) if q is p), -1))
    return held


def _state_report(optimizer, originals):
    params = list(getattr(optimizer, "params", None) or [])
    report = {"held": _held(optimizer, originals), "count": len(params), "originals": len(originals),
              "has_params": isinstance(getattr(optimizer, "params", None), (list, tuple))}
    for key in ("exp_avg", "exp_avg_sq", "steps"):
        value = getattr(optimizer, key, None)
        report[f"has_{key}"] = value is not None
        report[key] = list(value) if isinstance(value, (list, tuple)) else None
    m, v = report["exp_avg"] or [], report["exp_avg_sq"] or []
    report["aliases"] = [bool(i < len(m) and i < len(v) and (
        m[i] is v[i] or m[i] is p or v[i] is p
        or (isinstance(m[i], torch.Tensor) and isinstance(v[i], torch.Tensor) and m[i].numel()
            and (m[i].data_ptr() == v[i].data_ptr() or m[i].data_ptr() == p.data_ptr()
                 or v[i].data_ptr() == p.data_ptr()))))
        for i, p in enumerate(params)]
    if report["steps"] is not None:
        report["steps"] = [int(s) if isinstance(s, (int, float)) or (isinstance(s, torch.Tensor) and s.numel() == 1)
                           else repr(s) for s in report["steps"]]
    return report


def probe_adamw_init(ns, shapes, order, as_generator):
    originals = [torch.randn(*s, dtype=F64).requires_grad_(True) for s in shapes]
    listed = [originals[i] for i in order]
    optimizer = ns.train.AdamW(iter(listed) if as_generator else listed, lr=1e-3)
    return _state_report(optimizer, originals)


def probe_adamw_init_model(ns, sizes):
    model = model_of(ns, sizes)
    model.head.weight = model.token_embedding.weight  # tied: one tensor, two names
    originals = list(model.parameters())
    listed = (p for p in [*model.parameters(), model.head.weight, model.token_embedding.weight])
    optimizer = ns.train.AdamW(listed, lr=1e-3)
    return _state_report(optimizer, originals)


def judge_adamw_held_once(out, inputs, expected, first_seen=None):
    """first_seen: the distinct parameters of inputs["order"] in first-seen order (the kit
    computes them: facts.json for the public check); without an order, every parameter."""
    wanted = first_seen if "order" in inputs else list(range(out["originals"]))
    held = out["held"]
    if not out["has_params"]:
        return "AdamW should keep its parameters in self.params, a list"
    if out["count"] == 0:
        return ("self.params is empty: AdamW must keep the parameters it was given (a generator such as "
                "model.parameters() can be read only once: read it into a list)")
    if -1 in held:
        return "self.params holds tensors that are not the parameters passed in: keep the parameter objects themselves"
    if len(held) > len(set(held)):
        return ("self.params holds a tensor more than once: a shared tensor listed twice must be kept once, "
                "or it is stepped twice per step (compare by identity, e.g. with id(p))")
    if sorted(held) != sorted(wanted):
        return f"self.params holds {len(held)} tensors; there are {len(wanted)} distinct parameters"
    if held != wanted:
        return "self.params should keep the parameters in first-seen order"
    return None


@check("each_parameter_once", 2,
       "a tensor listed twice (a shared weight) is held once, in first-seen order; m, v are zeros like each "
       "parameter and every step count starts at 0",
       task="adamw_init", probe=probe_adamw_init,
       inputs=lambda g: {"shapes": [[3, 2], [4], [2, 2, 2]], "order": [0, 1, 0, 2, 1], "as_generator": False})
def each_parameter_once(out, inputs, expected):
    return adamw_state_problem(out, inputs, known_facts(inputs)["first_seen"])


def adamw_state_problem(out, inputs, first_seen):
    if problem := judge_adamw_held_once(out, inputs, None, first_seen):
        return problem
    shapes = [tuple(inputs["shapes"][i]) for i in first_seen]
    for key, what in (("exp_avg", "self.exp_avg (m)"), ("exp_avg_sq", "self.exp_avg_sq (v)")):
        values = out[key]
        if values is None:
            return f"{what} should be a list with one tensor per parameter"
        if len(values) != len(shapes):
            return f"{what} has {len(values)} entries, one per parameter means {len(shapes)}"
        for i, (value, shape) in enumerate(zip(values, shapes)):
            if problem := shape_problem(value, shape, f"{what}[{i}]"):
                return f"{problem}: zeros shaped like parameter {i}"
            if value.dtype != F64:
                return f"{what}[{i}] is {value.dtype}; it should have the parameter's dtype (torch.zeros_like(p))"
            if not torch.equal(value, torch.zeros_like(value)):
                return f"{what}[{i}] should start at zero"
    if any(out["aliases"]):
        return ("m and v (and the parameter) must be separate tensors: self.exp_avg[i], self.exp_avg_sq[i] each "
                "their own torch.zeros_like(p)")
    steps = out["steps"]
    if steps is None or list(steps) != [0] * len(shapes):
        return f"self.steps should be a list of {len(shapes)} zeros, one step count per parameter"
    return None


@check("tied_model_generator", 1,
       "a model with a tied weight, passed as a generator with its shared tensors repeated, is held "
       "parameter by parameter, each once",
       task="adamw_init", probe=probe_adamw_init_model, inputs=lambda g: {"sizes": dict(SIZES)})
def tied_model_generator(out, inputs, expected):
    return judge_adamw_held_once(out, inputs, expected)


def probe_adamw_rejects(ns):
    good = torch.zeros(2, dtype=F64, requires_grad=True)
    frozen = torch.zeros(3, dtype=F64)
    return {"frozen": try_call(lambda: ns.train.AdamW([good, frozen]) and None),
            "empty": try_call(lambda: ns.train.AdamW([]) and None),
            "fine": try_call(lambda: ns.train.AdamW([good]) and None)}


@check("rejects_frozen_and_empty", 1,
       "a parameter that does not require grad, or an empty list, is refused with a clear error",
       task="adamw_init", probe=probe_adamw_rejects)
def rejects_frozen_and_empty(out, inputs, expected):
    if "raised" in out["fine"]:
        return f"AdamW([p]) with p requiring grad raised {exception_name(out['fine']['raised'])}: it must be accepted"
    frozen = out["frozen"]
    if "raised" not in frozen:
        return ("AdamW accepted a tensor that does not require grad: it could never receive a gradient, so "
                "raise a ValueError that says which parameter")
    if frozen["raised"]["type"] not in ("ValueError", "TypeError", "RuntimeError"):
        return (f"a parameter that does not require grad raised {exception_name(frozen['raised'])}; "
                f"raise a ValueError that says what is wrong")
    if not frozen["raised"]["message"].strip():
        return "the error for a parameter that does not require grad has no message: say what is wrong"
    empty = out["empty"]
    if "raised" not in empty:
        return "AdamW([]) was accepted: an empty parameter list is a mistake, raise a ValueError"
    if empty["raised"]["type"] not in ("ValueError", "TypeError", "RuntimeError") or not empty["raised"]["message"]:
        return f"AdamW([]) raised {exception_name(empty['raised'])}; raise a ValueError with a message"
    return None
