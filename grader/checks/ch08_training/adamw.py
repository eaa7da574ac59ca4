"""AdamW by hand: its parameters and state, one update, and forgetting the gradients.

The optimizer's trajectory is compared with torch.optim.AdamW's on the same parameters and
gradients, and with each classic mistake's (ADAMW_MISTAKES). On the public checks' fixed
inputs those trajectories are data the kit computed (grader/checks/facts.py, from AdamW
written out in hidden/oracles.py and proven equal to torch's by
tests/test_grader_oracles.py); the sandbox only applies the student's code and reports
what it did. The first step and the decay alone are judged by the lesson's formulas.
"""

from __future__ import annotations

import math

import torch

from grader.checks._api import (
    Task, check, exception_name, compare, figures, float32_close, float32_verdict, matches, matches_to_float32,
    off_by, shape_problem, torch_library_except, try_call,
)
from grader.checks.ch08_training.common import SIZES, model_of
from grader.checks.course import F64
from grader.checks.facts import known_facts

TASKS = [
    Task("adamw_init", "train", "AdamW.__init__", "AdamW's parameters and state"),
    Task("adamw_step", "train", "AdamW.step", "one AdamW update",
         forbidden=("torch.optim.AdamW", "torch.optim.Adam", "torch.optim.adamw.adamw", "torch.optim.adam.adam",
                    "torch.optim._functional.adamw", "torch.optim._functional.adam",
                    "torch._fused_adamw_", "torch._fused_adam_"),
         forbidden_ops=("_fused_*", "_foreach_*", "torch.optim.adam.*", "torch.optim.adamw.*")
                       + torch_library_except()),
    Task("adamw_zero_grad", "train", "AdamW.zero_grad", "forgetting the gradients"),
]

HYPER = {"lr": 1e-2, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}

ADAMW_MISTAKES = [
    ("no_bias_correction", "there is no bias correction: divide m by (1 - beta1^t) and v by (1 - beta2^t), "
                           "with t the parameter's own step count"),
    ("coupled", "the weight decay is added to the gradient (Adam with L2, coupled); AdamW's decay is decoupled: "
                "p <- p * (1 - lr * weight_decay), applied to p directly, never through m and v"),
    ("eps_inside", "eps is inside the square root; AdamW divides by sqrt(v_hat) + eps"),
    ("betas_swapped", "beta1 and beta2 are swapped: m uses beta1 (the first of betas), v uses beta2"),
    ("restarted_moments", "the moments are not kept from step to step: each parameter needs its own m and v "
                          "(self.exp_avg[i], self.exp_avg_sq[i]), updated in place every step"),
    ("decay_after", "the weight decay is applied after the Adam update; decay first, from the current p"),
    ("eps_before_correction", "eps is added to sqrt(v) before the bias correction (a step size of "
                              "lr * sqrt(1 - beta2^t) / (1 - beta1^t) on m / (sqrt(v) + eps)), which divides by "
                              "sqrt(v_hat) + eps / sqrt(1 - beta2^t); add eps to sqrt(v_hat), after correcting v"),
    ("eps_before_correction+decay_after", "eps is added to sqrt(v) before the bias correction (which divides by "
                                          "sqrt(v_hat) + eps / sqrt(1 - beta2^t); add eps to sqrt(v_hat)), and the "
                                          "weight decay comes after the update (decay first, from the current p)"),
    ("decay_without_lr", "the weight decay is not scaled by the learning rate: p <- p * (1 - lr * weight_decay)"),
    ("no_decay", "there is no weight decay: p <- p * (1 - lr * weight_decay) before the update"),
    ("global_t", "the step count t is shared by all parameters; each parameter has its own t, which does not "
                 "advance at a step where its .grad is None"),
    ("missing_as_zero", "a parameter whose .grad is None was updated as if its gradient were zero; skip it "
                        "(no decay, no moment update, its t does not advance)"),
]


def leaves_of(initial):
    return [p.clone().requires_grad_(True) for p in initial]


# --------------------------------------------------------------- AdamW.__init__


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
def judge_adamw_state(out, inputs, expected):
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
def judge_adamw_init_model(out, inputs, expected):
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
def judge_adamw_rejects(out, inputs, expected):
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


# ----------------------------------------------------------------- AdamW.step


def probe_adamw_trajectory(ns, params, grads, lrs, hyper):
    """Apply the student's AdamW.step to the given gradients; the parameters after every step."""
    leaves = leaves_of(params)
    optimizer = ns.train.AdamW(leaves, lr=lrs[0], betas=tuple(hyper["betas"]), eps=hyper["eps"],
                               weight_decay=hyper["weight_decay"])
    trajectory = [[] for _ in leaves]
    for lr, step_grads in zip(lrs, grads):
        optimizer.lr = lr
        for p, g in zip(leaves, step_grads):
            p.grad = None if g is None else g.clone()
        optimizer.step()
        for i, p in enumerate(leaves):
            trajectory[i].append(p.detach().clone())
    held = list(getattr(optimizer, "params", None) or [])
    moments = getattr(optimizer, "exp_avg", None)
    return {"trajectory": [torch.stack(t) for t in trajectory],
            "requires_grad": [bool(p.requires_grad) for p in leaves],
            # What step() did besides moving the parameters: whether the optimizer still holds
            # the parameters themselves, and whether its own state moved.
            "rebound": len(held) != len(leaves) or any(q is not p for q, p in zip(held, leaves)),
            "state_moved": bool(isinstance(moments, (list, tuple)) and any(
                isinstance(m, torch.Tensor) and bool(m.ne(0).any()) for m in moments))}


def same_trajectory(a, b, atol=1e-10, rtol=1e-9) -> bool:
    return all(matches(x, y, atol=atol, rtol=rtol) for x, y in zip(a, b))


def float32_trajectory(a, b) -> bool:
    """Every parameter's trajectory agrees to float32's precision (_api.float32_close)."""
    return len(a) == len(b) and all(float32_close(x, y) for x, y in zip(a, b))


def trajectory_problem(out, inputs, facts, precision=False):
    """facts: torch.optim.AdamW's trajectory on these inputs ("right") and each mistake's of
    ADAMW_MISTAKES ("mistakes", None for one that changes nothing here). A trajectory right
    to float32's precision only is named by the precision check (precision=True:
    matches_torch) and passes every other."""
    trajectory, expected_trajectory = out["trajectory"], facts["right"]
    params, steps = inputs["params"], len(inputs["lrs"])
    for i, (t, p) in enumerate(zip(trajectory, params)):
        if problem := shape_problem(t, (steps, *p.shape), f"parameter {i}'s trajectory"):
            return problem
    if not all(out["requires_grad"]):
        return "a parameter no longer requires grad after step(): update its values in place, keep it a leaf"
    if all(torch.equal(t, p.unsqueeze(0).expand_as(t)) for t, p in zip(trajectory, params)):
        return not_moved(out, "in any of the steps")

    if same_trajectory(trajectory, expected_trajectory):
        return None
    for name, why in ADAMW_MISTAKES:
        wrong = facts["mistakes"].get(name)
        if wrong is None:
            continue
        # A mistake that lands within float32's precision of the right trajectory here (eps
        # inside the root, with gradients far larger than eps) is named to float64's only.
        near = (1e-11, 1e-9) if float32_trajectory(wrong, expected_trajectory) else (1e-9, 1e-7)
        if same_trajectory(trajectory, wrong, *near):
            return why
    if float32_trajectory(trajectory, expected_trajectory):
        if not precision:
            return None
        worst = max(range(len(trajectory)), key=lambda i: off_by(trajectory[i], expected_trajectory[i]))
        return float32_verdict("the parameters", "your step", "the parameters' dtype (float64 here)",
                               trajectory[worst], expected_trajectory[worst], plural=True,
                               against="torch.optim.AdamW's ",
                               where=f" after {steps} steps")
    for step in range(steps):
        for i, (t, e) in enumerate(zip(trajectory, expected_trajectory)):
            if problem := compare(t[step], e[step], f"parameter {i}", atol=1e-10, rtol=1e-9):
                return f"after step {step + 1} of {steps}, {problem}, compared with torch.optim.AdamW"
    return "the parameters do not follow torch.optim.AdamW"


def not_moved(out, when):
    """Why the parameters the caller holds stayed where they were, from what step() did
    besides: a step that ran (its moments moved) updated some other tensor."""
    lead = f"the parameters the model holds did not move {when}"
    if out.get("rebound"):
        why = (", though step() ran: self.params[i] now holds a new tensor, so the update went to it and the model "
               "never sees it")
    elif out.get("state_moved"):
        why = (", though step() ran (m and v moved): the update went to a new tensor (p = p - ..., or p.data set on "
               "a copy), not to the parameter itself")
    else:
        why = ""
    return (f"{lead}{why}; update each parameter in place (p.mul_, p.addcdiv_, p.copy_ ...): binding a new "
            f"tensor to a name changes only that name")


def schedule(steps, lr, warmup):
    lrs = []
    for step in range(steps):
        if step < warmup:
            lrs.append(lr * (step + 1) / warmup)
        else:
            progress = (step - warmup) / max(1, steps - 1 - warmup)
            lrs.append(lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))))
    return lrs


def _adamw_inputs(g):
    """60 steps on three tensors whose gradients live at different scales (1e-3, 1, 10),
    with a changing learning rate."""
    shapes, scales, steps = [(3, 4), (5,), (2, 2, 2)], [1e-3, 1.0, 10.0], 60
    params = [torch.randn(*s, generator=g, dtype=F64) for s in shapes]
    grads = [[torch.randn(*s, generator=g, dtype=F64) * k + 0.3 * k for s, k in zip(shapes, scales)]
             for _ in range(steps)]
    return {"params": params, "grads": grads, "lrs": schedule(steps, 1e-2, 5), "hyper": dict(HYPER)}


def _skipping_inputs(g):
    """12 steps on two tensors; the second has no gradient (.grad is None) at steps 2, 3, 5, 8 and 9."""
    shapes, steps = [(3,), (2, 2)], 12
    skipped = {1, 2, 4, 7, 8}
    params = [torch.randn(*s, generator=g, dtype=F64) for s in shapes]
    grads = [[torch.randn(*shapes[0], generator=g, dtype=F64),
              None if step in skipped else torch.randn(*shapes[1], generator=g, dtype=F64) + 0.5]
             for step in range(steps)]
    return {"params": params, "grads": grads, "lrs": [0.05] * steps, "hyper": dict(HYPER, weight_decay=0.1)}


def _first_step_inputs(g):
    params = [torch.randn(4, 3, generator=g, dtype=F64), torch.randn(6, generator=g, dtype=F64)]
    grads = [[torch.randn(4, 3, generator=g, dtype=F64) * 0.01, torch.randn(6, generator=g, dtype=F64) * 5]]
    return {"params": params, "grads": grads, "lrs": [0.1],
            "hyper": {"lr": 0.1, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0}}


@check("first_step", 2,
       "the first step from m = v = 0 moves each entry by lr·g/(|g| + eps) ≈ lr·sign(g) (bias correction)",
       task="adamw_step", probe=probe_adamw_trajectory, inputs=_first_step_inputs)
def judge_adamw_first_step(out, inputs, expected):
    """Step 1 from m = v = 0: m_hat = g, v_hat = g², so p moves by lr * g / (|g| + eps) ≈ lr * sign(g)."""
    lr, eps = inputs["lrs"][0], inputs["hyper"]["eps"]
    trajectory = out["trajectory"]
    for i, (p, g, t) in enumerate(zip(inputs["params"], inputs["grads"][0], trajectory)):
        if problem := shape_problem(t, (1, *p.shape), f"parameter {i}'s trajectory"):
            return problem
        right = p - lr * g / (g.abs() + eps)
        if matches(t[0], right, atol=1e-12, rtol=1e-10):
            continue
        moved = (t[0] - p).abs()
        if matches(t[0], p, atol=0, rtol=0):
            return not_moved(out, "on the first step")
        beta1, beta2 = inputs["hyper"]["betas"]
        no_correction = p - lr * ((1 - beta1) * g) / (torch.sqrt((1 - beta2) * g * g) + eps)
        if matches(t[0], no_correction, atol=1e-9, rtol=1e-7):
            factor = (1 - beta1) / math.sqrt(1 - beta2)
            return (f"the first step moves each entry by about {factor:.3g} lr instead of lr: there is no bias "
                    f"correction (m_hat = m / (1 - beta1^t), v_hat = v / (1 - beta2^t))")
        eps_early = p - lr * g / (g.abs() + eps / math.sqrt(1 - beta2))
        if matches(t[0], eps_early, atol=1e-12, rtol=1e-10):
            return dict(ADAMW_MISTAKES)["eps_before_correction"]
        if float32_close(t[0], right):
            continue  # float32 arithmetic: matches_torch, the precision check, names it
        least, most, step = figures(moved.min().item(), moved.max().item(), lr)
        return (f"the first step from m = v = 0 should move every entry by lr * g / (|g| + eps), about lr = {step} "
                f"in the direction of -g; parameter {i} moved by between {least} and {most}")
    return None


def _decay_inputs(g):
    steps = 5
    params = [torch.randn(3, 3, generator=g, dtype=F64), torch.randn(4, generator=g, dtype=F64)]
    grads = [[torch.zeros(3, 3, dtype=F64), torch.zeros(4, dtype=F64)] for _ in range(steps)]
    return {"params": params, "grads": grads, "lrs": [0.1] * steps,
            "hyper": {"lr": 0.1, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.5}}


@check("decoupled_decay", 1,
       "with all-zero gradients each step only shrinks p by (1 − lr·weight_decay): decoupled decay",
       task="adamw_step", probe=probe_adamw_trajectory, inputs=_decay_inputs, fixed_inputs=True)
def judge_adamw_decay(out, inputs, expected):
    """With all-zero gradients the Adam part is 0 / (0 + eps) = 0: only the decay acts."""
    lr, wd = inputs["lrs"][0], inputs["hyper"]["weight_decay"]
    factor = 1 - lr * wd
    for i, (p, t) in enumerate(zip(inputs["params"], out["trajectory"])):
        steps = len(inputs["lrs"])
        if problem := shape_problem(t, (steps, *p.shape), f"parameter {i}'s trajectory"):
            return problem
        powers = torch.tensor([factor ** (k + 1) for k in range(steps)], dtype=F64).reshape(-1, *[1] * p.dim())
        if matches_to_float32(t, p * powers, atol=1e-12, rtol=1e-10):
            continue  # float32 arithmetic passes: matches_torch, the precision check, names it
        if matches(t, p.expand_as(t), atol=0, rtol=0) and out.get("rebound"):
            return not_moved(out, "with zero gradients")
        if matches(t, p.expand_as(t), atol=0, rtol=0):
            return ("with zero gradients the parameters did not change: decoupled weight decay must still shrink p "
                    "by (1 - lr * weight_decay) at every step (update p in place, and treat a zero gradient as a "
                    "gradient, not as a missing one)")
        no_lr = torch.tensor([(1 - wd) ** (k + 1) for k in range(steps)], dtype=F64).reshape_as(powers)
        if matches(t, p * no_lr, atol=1e-12, rtol=1e-10):
            return "the weight decay is not scaled by the learning rate: p <- p * (1 - lr * weight_decay)"
        coupled = known_facts(inputs)["coupled"]
        if matches(t, coupled[i], atol=1e-9, rtol=1e-7):
            return ("with zero gradients each entry moved by about lr toward 0: the weight decay went into the "
                    "gradient (Adam with L2, coupled). AdamW's decay is decoupled: p <- p * (1 - lr * "
                    "weight_decay), so zero gradients shrink p by exactly that factor per step")
        ratios = (t[1:] / t[:-1]).double() if steps > 1 else (t[:1] / p).double()
        ratios = ratios[torch.isfinite(ratios) & (p.abs() > 1e-6).expand_as(ratios)]
        if ratios.numel():
            least, most, wanted = figures(ratios.min().item(), ratios.max().item(), factor)
            seen = f"; from step to step yours multiplied p by between {least} and {most}"
        else:
            wanted, seen = figures(factor)[0], ""
        return (f"with all-zero gradients, lr = {lr} and weight_decay = {wd}, each step should only multiply p by "
                f"the factor 1 - lr * weight_decay = {wanted}{seen}")
    return None



@check("matches_torch", 3,
       "60 steps with weight decay and a changing lr follow torch.optim.AdamW to 1e-10 (float64), gradients "
       "at scales 1e-3, 1 and 10",
       task="adamw_step", probe=probe_adamw_trajectory, inputs=_adamw_inputs, fixed_inputs=True)
def judge_adamw_matches_torch(out, inputs, expected):
    return trajectory_problem(out, inputs, known_facts(inputs), precision=True)


@check("skipped_steps", 1,
       "a parameter whose .grad is None at a step is left alone (no decay, no move) and its own step count t "
       "does not advance, as in torch.optim.AdamW",
       task="adamw_step", probe=probe_adamw_trajectory, inputs=_skipping_inputs, fixed_inputs=True)
def judge_adamw_skipped_steps(out, inputs, expected):
    return trajectory_problem(out, inputs, known_facts(inputs))

# --------------------------------------------------------------- AdamW.zero_grad


def probe_zero_grad(ns, params, grads, fresh):
    leaves = leaves_of(params)
    optimizer = ns.train.AdamW(leaves, lr=0.1, weight_decay=0.1)
    for p, g in zip(leaves, grads):
        p.grad = g.clone()
    optimizer.step()  # some state to keep
    for p, g in zip(leaves, grads):
        p.grad = g.clone()
    before = [p.detach().clone() for p in leaves]
    state = [(m.clone(), v.clone()) for m, v in zip(optimizer.exp_avg, optimizer.exp_avg_sq)]
    steps = list(optimizer.steps)
    optimizer.zero_grad()
    cleared = [None if p.grad is None else p.grad.detach().clone() for p in leaves]
    unchanged = all(torch.equal(b, p.detach()) for b, p in zip(before, leaves))
    kept = (all(torch.equal(m, m2) and torch.equal(v, v2)
                for (m, v), m2, v2 in zip(state, optimizer.exp_avg, optimizer.exp_avg_sq))
            and list(optimizer.steps) == steps)
    loss = sum((p * f).sum() for p, f in zip(leaves, fresh))
    loss.backward()
    return {"cleared": cleared, "params_unchanged": unchanged, "state_kept": kept,
            "after_backward": [None if p.grad is None else p.grad.detach().clone() for p in leaves]}


def _zero_grad_inputs(g):
    shapes = [(3, 2), (4,)]
    return {"params": [torch.randn(*s, generator=g, dtype=F64) for s in shapes],
            "grads": [torch.randn(*s, generator=g, dtype=F64) for s in shapes],
            "fresh": [torch.randn(*s, generator=g, dtype=F64) for s in shapes]}


@check("clears_gradients", 2,
       "zero_grad() clears every .grad (and nothing else), so the next backward() gives the new gradient only",
       task="adamw_zero_grad", probe=probe_zero_grad, inputs=_zero_grad_inputs)
def judge_zero_grad(out, inputs, expected):
    for i, g in enumerate(out["cleared"]):
        if g is not None and not (isinstance(g, torch.Tensor) and torch.count_nonzero(g) == 0):
            return ("after zero_grad() a parameter still has its old gradient: set every p.grad to None "
                    "(for p in self.params)")
    if not out["params_unchanged"]:
        return "zero_grad() changed the parameters' values: it must only forget the gradients (p.grad = None)"
    if not out["state_kept"]:
        return "zero_grad() changed the optimizer's state (m, v or the step counts): it must only touch p.grad"
    for i, (g, f) in enumerate(zip(out["after_backward"], inputs["fresh"])):
        if matches(g, inputs["grads"][i] + f, atol=1e-12, rtol=1e-12):
            return ("the next backward() added to the old gradient: zero_grad must clear p.grad itself, not a "
                    "copy of it")
        if not matches(g, f, atol=1e-12, rtol=1e-12):
            return "after zero_grad() and backward() the gradient should be the new one only"
    return None


@check("sets_none", 1, "zero_grad() sets every .grad to None (not a tensor of zeros), as torch.optim.AdamW does",
       task="adamw_zero_grad", probe=probe_zero_grad, inputs=_zero_grad_inputs)
def judge_zero_grad_none(out, inputs, expected):
    for i, g in enumerate(out["cleared"]):
        if g is None:
            continue
        if isinstance(g, torch.Tensor) and torch.count_nonzero(g) == 0:
            return (f"after zero_grad() parameter {i}'s .grad is a tensor of zeros; set it to None, as the docstring "
                    f"and torch.optim.AdamW do: a zero gradient is still a gradient, so a parameter that gets no new "
                    f"gradient would go on being decayed and moved by step()")
        return f"after zero_grad() parameter {i} still has its old gradient: set every p.grad to None"
    return None


def probe_zero_grad_fresh(ns, shapes):
    leaves = [torch.randn(*s, dtype=F64).requires_grad_(True) for s in shapes]
    optimizer = ns.train.AdamW(leaves, lr=0.1)
    optimizer.zero_grad()
    return {"grads": [None if p.grad is None else p.grad.detach().clone() for p in leaves]}


@check("before_any_backward", 1, "zero_grad() works on a fresh optimizer, before any gradient exists",
       task="adamw_zero_grad", probe=probe_zero_grad_fresh, inputs=lambda g: {"shapes": [[2, 3], [4]]},
       gated_by="clears_gradients")
def judge_zero_grad_fresh(out, inputs, expected):
    for g in out["grads"]:
        if g is not None and not (isinstance(g, torch.Tensor) and torch.count_nonzero(g) == 0):
            return "zero_grad() before any backward() should leave every .grad None (or zero)"
    return None
