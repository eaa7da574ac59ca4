"""Adam.step: Adam with bias correction and a linearly decaying learning rate, on Values.

The judges run the update by hand in floats (the right one and the classic mistakes: no
bias correction, no decay, decay one step early, eps inside the root) and check that
the grads are reset, t counts the steps and the moments stay plain floats.
"""

from __future__ import annotations

import math

from grader.checks._api import check, standard_message
from grader.checks.ch00_micro.common import all_close, is_number, off_by, task_of, values_of

TASKS = [task_of("micro_adam", "Adam.step", "Adam with bias correction and lr decay")]


def _adam(start, grads, lr, beta1, beta2, eps, total_steps, bias=True, decay="t", eps_inside=False):
    p, n = list(start), len(start)
    m, v, trajectory = [0.0] * n, [0.0] * n, []
    for t, gs in enumerate(grads):
        lr_t = {"t": lr * (1 - t / total_steps), "t+1": lr * (1 - (t + 1) / total_steps), None: lr}[decay]
        for i, g in enumerate(gs):
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            m_hat = m[i] / (1 - beta1 ** (t + 1)) if bias else m[i]
            v_hat = v[i] / (1 - beta2 ** (t + 1)) if bias else v[i]
            p[i] -= lr_t * m_hat / (math.sqrt(v_hat + eps) if eps_inside else math.sqrt(v_hat) + eps)
        trajectory.append(list(p))
    return trajectory


def _adam_mistakes(start, grads, settings):
    return [
        ("there is no bias correction: divide m by 1 - beta1^(t+1) and v by 1 - beta2^(t+1)",
         _adam(start, grads, **settings, bias=False)),
        ("the learning rate does not decay: step t uses lr * (1 - t / total_steps)",
         _adam(start, grads, **settings, decay=None)),
        ("the learning rate decays one step early: step t (counting from 0) uses lr * (1 - t / total_steps)",
         _adam(start, grads, **settings, decay="t+1")),
        ("eps is added inside the square root; Adam divides by sqrt(v_hat) + eps",
         _adam(start, grads, **settings, eps_inside=True)),
    ]


def probe_adam(ns, start, grads, settings):
    params = values_of(ns, start)
    opt = ns.micro.Adam(params, **settings)
    trajectory, left = [], []
    for gs in grads:
        for p, g in zip(params, gs):
            p.grad = g
        try:
            opt.step()
        except ZeroDivisionError as error:
            return {"zero_division": str(error), "steps": len(trajectory)}
        trajectory.append([float(p.data) for p in params])
        left.append([p.grad for p in params])
    moments = list(opt.m) + list(opt.v)
    return {"trajectory": trajectory, "grads_after": left, "t": opt.t,
            "plain_moments": all(isinstance(x, float) for x in moments)}


def judge_adam(out, inputs, reveal):
    start, grads, settings = inputs["start"], inputs["grads"], inputs["settings"]
    if "zero_division" in out:
        return (f"step {out['steps']} divided by zero{standard_message(out['zero_division'])}: the bias correction "
                f"of step t "
                f"(counting from 0) is 1 - beta^(t+1)")
    want = _adam(start, grads, **settings)
    if not all_close(out["trajectory"], want, 1e-12):
        for text, wrong in _adam_mistakes(start, grads, settings):
            if all_close(out["trajectory"], wrong, 1e-10):
                return text
        step = next(i for i, (a, b) in enumerate(zip(out["trajectory"], want)) if not all_close(a, b, 1e-12))
        if reveal:
            return f"after step {step} the parameters are {out['trajectory'][step]}, expected {want[step]}"
        return f"the parameters are off by up to {off_by(out['trajectory'], want):.3g}, first after step {step}"
    if any(g != 0.0 for row in out["grads_after"] for g in row):
        return "the grads are not reset to 0 after the update: set p.grad = 0 for every parameter"
    if out["t"] != len(grads):
        return f"after {len(grads)} steps opt.t should be {len(grads)}, it is {out['t']!r}: add 1 at the end of step()"
    if not out["plain_moments"]:
        return "the moments m and v should stay plain floats (optimizer state, not Values in the graph)"
    return None


@check("hand_computation", 3,
       "two parameters, two steps (lr 0.1, betas 0.85/0.99, total_steps 4) equal the hand computation "
       "with bias correction and lr decay; grads reset, t counts steps",
       probe=probe_adam,
       inputs=lambda g: {"start": [0.5, -1.0], "grads": [[0.2, -3.0], [-0.1, 1.0]],
                         "settings": {"lr": 0.1, "beta1": 0.85, "beta2": 0.99, "eps": 1e-8, "total_steps": 4}})
def judge_adam_public(out, inputs, expected):
    return judge_adam(out, inputs, True)


def probe_adam_first_step(ns, gradients, lr):
    moved = []
    for g in gradients:
        p = ns.micro.Value(0.0)
        p.grad = g
        ns.micro.Adam([p], lr=lr).step()
        moved.append(p.data)
    return {"moved": moved}


@check("first_step_is_lr", 1,
       "thanks to bias correction the first step moves a parameter by about lr, for gradients 1e-3 and 50",
       probe=probe_adam_first_step, inputs=lambda g: {"gradients": [1e-3, 50.0], "lr": 0.1})
def judge_adam_first_step(out, inputs, expected):
    lr = inputs["lr"]
    for g, moved in zip(inputs["gradients"], out["moved"]):
        if not (is_number(moved) and abs(moved + lr) <= 1e-4 * lr):
            if is_number(moved) and abs(moved + 1.5 * lr) <= 1e-3 * lr:
                return (f"the first step with gradient {g} moves the parameter by {moved:.6g}, not -lr = {-lr}: "
                        f"without bias correction m/sqrt(v) is 0.15/0.1 = 1.5 times too big")
            return (f"the first step with gradient {g} moves the parameter by {moved!r}; with bias correction the "
                    f"first Adam step is about -lr = {-lr}, whatever the gradient's size")
    return None
