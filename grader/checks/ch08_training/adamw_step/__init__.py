"""AdamW's step: one update of every parameter that has a gradient.

The optimizer's trajectory is compared with torch.optim.AdamW's on the same parameters and
gradients, and with each classic mistake's (MISTAKES). On the public checks' fixed
inputs those trajectories are data the kit computed (grader/checks/facts.py, from AdamW
written out in hidden/oracles.py and proven equal to torch's by
tests/test_grader_oracles.py); the sandbox only applies the student's code and reports
what it did. The first step and the decay alone are judged by the lesson's formulas.
"""

from __future__ import annotations

import math

import torch

from grader.checks._api import (
    Task, check, compare, figures, float32_close, float32_verdict, matches, matches_to_float32, naming, off_by,
    shape_problem, torch_library_except, within_float32,
)
from grader.checks.ch08_training.common import leaves_of
from grader.checks.course import F64
from grader.checks.facts import known_facts

TASKS = [
    Task("adamw_step", "train", "AdamW.step", "one AdamW update",
         forbidden=("torch.optim.AdamW", "torch.optim.Adam", "torch.optim.adamw.adamw", "torch.optim.adam.adam",
                    "torch.optim._functional.adamw", "torch.optim._functional.adam",
                    "torch._fused_adamw_", "torch._fused_adam_"),
         forbidden_ops=("_fused_*", "_foreach_*", "torch.optim.adam.*", "torch.optim.adamw.*")
                       + torch_library_except()),
]

HYPER = {"lr": 1e-2, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}

MISTAKES = {
    "no_bias_correction": "there is no bias correction: divide m by (1 - beta1^t) and v by (1 - beta2^t), "
                          "with t the parameter's own step count",
    "coupled": "the weight decay is added to the gradient (Adam with L2, coupled); AdamW's decay is decoupled: "
               "p <- p * (1 - lr * weight_decay), applied to p directly, never through m and v",
    "eps_inside": "eps is inside the square root; AdamW divides by sqrt(v_hat) + eps",
    "betas_swapped": "beta1 and beta2 are swapped: m uses beta1 (the first of betas), v uses beta2",
    "restarted_moments": "the moments are not kept from step to step: each parameter needs its own m and v "
                         "(self.exp_avg[i], self.exp_avg_sq[i]), updated in place every step",
    "decay_after": "the weight decay is applied after the Adam update; decay first, from the current p",
    "eps_before_correction": "eps is added to sqrt(v) before the bias correction (a step size of "
                             "lr * sqrt(1 - beta2^t) / (1 - beta1^t) on m / (sqrt(v) + eps)), which divides by "
                             "sqrt(v_hat) + eps / sqrt(1 - beta2^t); add eps to sqrt(v_hat), after correcting v",
    "eps_before_correction+decay_after": "eps is added to sqrt(v) before the bias correction (which divides by "
                                         "sqrt(v_hat) + eps / sqrt(1 - beta2^t); add eps to sqrt(v_hat)), and the "
                                         "weight decay comes after the update (decay first, from the current p)",
    "decay_without_lr": "the weight decay is not scaled by the learning rate: p <- p * (1 - lr * weight_decay)",
    "no_decay": "there is no weight decay: p <- p * (1 - lr * weight_decay) before the update",
    "vectors_not_decayed": "the parameters with fewer than two axes (biases, LayerNorm gains) are left out of "
                           "the weight decay; this AdamW decays every parameter it is given, as torch.optim.AdamW "
                           "with one weight_decay does (leaving some out takes a second parameter group, which "
                           "the course's AdamW does not have)",
    "global_t": "the step count t is shared by all parameters; each parameter has its own t, which does not "
                "advance at a step where its .grad is None",
    "missing_as_zero": "a parameter whose .grad is None was updated as if its gradient were zero; skip it "
                       "(no decay, no moment update, its t does not advance)",
}


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


def float32_apart(a, b) -> bool:
    """float32_trajectory's measure, for two trajectories the kit computed (a mistake's and
    the right one): what the code ran has no say in it."""
    return len(a) == len(b) and all(within_float32(x, y) for x, y in zip(a, b))


def trajectory_problem(out, inputs, facts, precision=False):
    """facts: torch.optim.AdamW's trajectory on these inputs ("right") and each mistake's of
    MISTAKES ("mistakes", None for one that changes nothing here). A trajectory right
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
    for name, why in MISTAKES.items():
        wrong = facts["mistakes"].get(name)
        if wrong is None:
            continue
        # A mistake that lands within float32's precision of the right trajectory here (eps
        # inside the root, with gradients far larger than eps) is named to float64's only.
        near = (1e-11, 1e-9) if float32_apart(wrong, expected_trajectory) else (1e-9, 1e-7)
        if same_trajectory(trajectory, wrong, *near):
            return naming(name, why)
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
def first_step(out, inputs, expected):
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
            return naming("eps_before_correction", MISTAKES["eps_before_correction"])
        if matches(t[0], p - lr * g / torch.sqrt(g * g + eps), atol=1e-12, rtol=1e-10):
            return naming("eps_inside", MISTAKES["eps_inside"])
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
def decoupled_decay(out, inputs, expected):
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
        decayed_matrices = [i for i, q in enumerate(inputs["params"])
                            if q.dim() >= 2 and not matches(out["trajectory"][i], q.expand_as(out["trajectory"][i]),
                                                            atol=0, rtol=0)]
        if p.dim() < 2 and decayed_matrices and matches(t, p.expand_as(t), atol=0, rtol=0):
            return naming("vectors_not_decayed", MISTAKES["vectors_not_decayed"])
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
def matches_torch(out, inputs, expected):
    return trajectory_problem(out, inputs, known_facts(inputs), precision=True)


@check("skipped_steps", 1,
       "a parameter whose .grad is None at a step is left alone (no decay, no move) and its own step count t "
       "does not advance, as in torch.optim.AdamW",
       task="adamw_step", probe=probe_adamw_trajectory, inputs=_skipping_inputs, fixed_inputs=True)
def skipped_steps(out, inputs, expected):
    return trajectory_problem(out, inputs, known_facts(inputs))
