"""Adam.step: Adam with bias correction and a linearly decaying learning rate, on Values.

The judges compare with the update computed by hand in floats (the right one and the
classic mistakes: no bias correction, no decay, decay one step early, eps inside the
root; on the public check's inputs, data the kit computed, grader/checks/facts.py) and
check that the grads are reset, t counts the steps and the moments stay plain floats.
Where the trajectory is wrong, what the probe saw comes first: parameters the model holds
that never moved (new Values bound instead of an update in place), a counter that stayed put.
"""

from __future__ import annotations

from grader.checks._api import check, constant, standard_message
from grader.checks.ch00_micro.common import all_close, is_number, off_by, task_of, values_of
from grader.checks.facts import known_facts

TASKS = [task_of("micro_adam", "Adam.step", "Adam with bias correction and lr decay")]


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
    held = getattr(opt, "params", None)
    same = isinstance(held, list) and len(held) == len(params) and all(a is b for a, b in zip(held, params))
    return {"trajectory": trajectory, "grads_after": left, "t": opt.t,
            "plain_moments": all(isinstance(x, float) for x in moments), "same_objects": same}


def judge_adam(out, inputs, reveal, facts):
    """facts: the parameters after every step by hand ("want") and the classic mistakes'
    ("mistakes", [(text, trajectory)])."""
    grads = inputs["grads"]
    if "zero_division" in out:
        return (f"step {out['steps']} divided by zero{standard_message(out['zero_division'])}: "
                + constant("the bias correction of step t (counting from 0) is 1 - beta^(t+1)"))
    want = facts["want"]
    if not all_close(out["trajectory"], want, 1e-12):
        if out["trajectory"] and all(row == inputs["start"] for row in out["trajectory"]):
            replaced = ("; the optimizer's list no longer holds the Values it was given: they were replaced by new "
                        "ones" if out.get("same_objects") is False else "")
            return (f"the parameters the model holds did not move: after each of {len(grads)} steps every one still "
                    f"has its start value{replaced}; step() must change each parameter in place (p.data -= ...), "
                    f"since binding a new Value to p or to self.params[i] leaves the model's own Values as they were")
        if out["t"] != len(grads) and isinstance(out["t"], int) and not isinstance(out["t"], bool):
            return (f"after {len(grads)} steps opt.t is {out['t']}, not {len(grads)}: " + constant(
                "the step counter is not advanced, and step t's bias correction 1 - beta^(t+1) and learning rate "
                "lr * (1 - t / total_steps) read it; add 1 to self.t at the end of step()"))
        for text, wrong in facts["mistakes"]:
            if all_close(out["trajectory"], wrong, 1e-10):
                return text
        step = next(i for i, (a, b) in enumerate(zip(out["trajectory"], want)) if not all_close(a, b, 1e-12))
        if reveal:
            return f"after step {step} the parameters are {out['trajectory'][step]}, expected {want[step]}"
        return f"the parameters are off by up to {off_by(out['trajectory'], want):.3g}, first after step {step}"
    if any(g != 0.0 for row in out["grads_after"] for g in row):
        return constant("the grads are not reset to 0 after the update: set p.grad = 0 for every parameter")
    if out["t"] != len(grads):
        return f"after {len(grads)} steps opt.t should be {len(grads)}, it is {out['t']!r}: {constant('add 1 at the end of step()')}"
    if not out["plain_moments"]:
        return "the moments m and v should stay plain floats (optimizer state, not Values in the graph)"
    return None


@check("hand_computation", 3,
       "two parameters, two steps (lr 0.1, betas 0.85/0.99, total_steps 4) equal the hand computation "
       "with bias correction and lr decay; grads reset, t counts steps",
       probe=probe_adam,
       inputs=lambda g: {"start": [0.5, -1.0], "grads": [[0.2, -3.0], [-0.1, 1.0]],
                         "settings": {"lr": 0.1, "beta1": 0.85, "beta2": 0.99, "eps": 1e-8, "total_steps": 4}})
def hand_computation(out, inputs, expected):
    return judge_adam(out, inputs, True, known_facts(inputs))


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
def first_step_is_lr(out, inputs, expected):
    lr = inputs["lr"]
    for g, moved in zip(inputs["gradients"], out["moved"]):
        if not (is_number(moved) and abs(moved + lr) <= 1e-4 * lr):
            if is_number(moved) and abs(moved + 1.5 * lr) <= 1e-3 * lr:
                return (f"the first step with gradient {g} moves the parameter by {moved:.6g}, not -lr = {-lr}: "
                        f"without bias correction m/sqrt(v) is 0.15/0.1 = 1.5 times too big")
            return (f"the first step with gradient {g} moves the parameter by {moved!r}; with bias correction the "
                    f"first Adam step is about -lr = {-lr}, whatever the gradient's size")
    return None
