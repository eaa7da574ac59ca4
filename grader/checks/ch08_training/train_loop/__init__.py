"""The training step: zero the gradients, the masked loss, backward, clip, step, and return
the loss and the gradient norm before clipping.

The probe records, at the moment optimizer.step() runs, what the gradients are, and
compares them with this batch's gradient computed on a copy of the model.
"""

from __future__ import annotations

import copy

import torch

from grader.checks._api import Task, check, figures, float32_verdict, matches, matches_to_float32, numbered
from grader.checks.ch08_training.common import (
    SIZES, close_enough, float32_near, is_float, model_of, random_state,
)

TASKS = [
    Task("train_loop", "train", "train_step", "the training step", names_failing_operator=False),
]


def _masked_loss(ns, logits, targets, mask):
    return ns.train.masked_loss(logits, targets, mask)


def probe_train_steps(ns, sizes, state, batches, max_norms, lr, weight_decay):
    """Run the student's train_step on each batch; record, at the moment optimizer.step()
    runs, what the gradients are, and compute (on a copy) what this batch's gradient is."""
    model = model_of(ns, sizes, state).train()
    params = list(model.parameters())
    names = [n for n, _ in model.named_parameters()]
    optimizer = ns.train.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay)
    at_step = []
    original_step = optimizer.step

    def recording_step(*args, **kwargs):
        events.append("step")
        at_step.append([None if p.grad is None else p.grad.detach().clone() for p in params])
        return original_step(*args, **kwargs)

    optimizer.step = recording_step
    # The order of what train_step does: "backward" when a gradient reaches a model parameter,
    # "zero_grad" and "step" when the optimizer's are called.
    events = []
    original_zero_grad = optimizer.zero_grad

    def recording_zero_grad(*args, **kwargs):
        events.append("zero_grad")
        return original_zero_grad(*args, **kwargs)

    optimizer.zero_grad = recording_zero_grad
    ids = {id(p) for p in params}

    def reached(p):
        if id(p) in ids and (not events or events[-1] != "backward"):
            events.append("backward")

    for p in params:
        p.register_post_accumulate_grad_hook(reached)
    calls = []
    for (inputs, targets, mask), max_norm in zip(batches, max_norms):
        before = [p.detach().clone() for p in params]
        twin = copy.deepcopy(model)
        for p in twin.parameters():
            p.grad = None
        twin_logits = twin(inputs)[0]
        with torch.no_grad():  # what a loss that scores the padding too gives
            unmasked = ns.model.cross_entropy(twin_logits, targets).item()
        loss = _masked_loss(ns, twin_logits, targets, mask)
        loss.backward()
        fresh = [torch.zeros_like(p) if p.grad is None else p.grad.detach().clone() for p in twin.parameters()]
        already, seen = len(at_step), len(events)
        returned = ns.train.train_step(model, optimizer, inputs.clone(), targets.clone(), mask.clone(), max_norm)
        with torch.no_grad():
            loss_after = _masked_loss(ns, model(inputs)[0], targets, mask).item()
        calls.append({"returned": list(returned) if isinstance(returned, (tuple, list)) else returned,
                      "loss_before": loss.item(), "loss_after": loss_after, "unmasked": unmasked, "fresh": fresh,
                      "at_step": at_step[already:], "events": events[seen:],
                      "changed": [not torch.equal(b, p.detach()) for b, p in zip(before, params)]})
    held = [next((j for j, q in enumerate(params) if q is p), -1) for p in optimizer.params]
    return {"names": names, "requires_grad": [bool(p.requires_grad) for p in params], "held": held,
            "calls": calls, "final": {n: p.detach().clone() for n, p in zip(names, params)}}


# The norm and the clipping the step should have done, from torch's own clip_grad_norm_:
# the chapter's clip_grad_norm task may not use it, so the grader can.


def norm_of(grads):
    present = [g.double() for g in grads if g is not None]
    return float(torch.nn.utils.get_total_norm(present)) if present else 0.0


def _clipped(grads, max_norm):
    if max_norm is None:
        return grads
    holders = [torch.zeros_like(g, dtype=torch.float64, requires_grad=True) for g in grads]
    for holder, g in zip(holders, grads):
        holder.grad = g.double().clone()
    torch.nn.utils.clip_grad_norm_(holders, max_norm)
    return [holder.grad for holder in holders]


def batch_tensors(g, V, B, T, lengths=None):
    bos = V - 1
    lengths = lengths or [T] + torch.randint(1, T + 1, (B - 1,), generator=g).tolist()
    inputs = torch.randint(0, V, (B, T), generator=g)
    targets = torch.randint(0, V, (B, T), generator=g)
    mask = torch.zeros(B, T, dtype=torch.bool)
    for b, n in enumerate(lengths):
        mask[b, :n] = True
        inputs[b, n:] = bos
        targets[b, n:] = bos
    return [inputs, targets, mask]


def _train_inputs(g):
    sizes = dict(SIZES)
    state = random_state(g, sizes, scale=0.5)
    V, T = sizes["vocab_size"], sizes["block_size"]
    batches = [batch_tensors(g, V, 3, T) for _ in range(3)]
    return {"sizes": sizes, "state": state, "batches": batches, "max_norms": [0.05, 0.05, None],
            "lr": 1e-2, "weight_decay": 0.1}


def order_problem(call, number) -> "str | None":
    """What went wrong with the gradients the optimizer saw, from the order train_step did
    things in: a zero_grad() between the last backward and the step threw them away."""
    events = call.get("events") or []
    if "step" not in events:
        return None
    before = events[:events.index("step")]
    last_backward = max((i for i, e in enumerate(before) if e == "backward"), default=None)
    if last_backward is not None and "zero_grad" in before[last_backward:]:
        return (f"{numbered('call', number)}: optimizer.zero_grad() ran after loss.backward(), so the gradients the optimizer saw "
                f"were None (zero) and the parameters did not move with them: zero the gradients first, before "
                f"the forward and loss.backward()")
    if "backward" not in before:
        return (f"{numbered('call', number)}: optimizer.step() ran before any gradient reached the parameters: the gradients "
                f"the optimizer saw were None; call loss.backward() before optimizer.step()")
    return None


def _contract_names(out, inputs) -> list[str]:
    """The probe's parameter names, each as the grader may quote it: a name of the contract
    (the state_dict the model was loaded from) or a stand-in; the model's own naming is
    text the submission's code could have changed."""
    known = set(inputs["state"])
    return [name if isinstance(name, str) and name in known else "a parameter outside the contract's names"
            for name in out["names"]]


@check("every_parameter_trains", 2,
       "every parameter requires grad, has a non-zero gradient when the optimizer steps, and is held by the "
       "optimizer exactly once",
       probe=probe_train_steps, inputs=_train_inputs)
def every_parameter_trains(out, inputs, expected):
    names = _contract_names(out, inputs)
    frozen = list(dict.fromkeys(n for n, r in zip(names, out["requires_grad"]) if not r))
    if frozen:
        return f"these parameters do not require grad after a step: {', '.join(frozen[:4])}"
    first = out["calls"][0]
    if not first["at_step"]:
        return "train_step never called optimizer.step()"
    grads = first["at_step"][0]
    missing = list(dict.fromkeys(n for n, g in zip(names, grads) if g is None or not bool(g.abs().sum() > 0)))
    if missing and (problem := order_problem(first, 1)):
        return problem
    if missing:
        return (f"when optimizer.step() ran, these parameters had no (or an all-zero) gradient: "
                f"{', '.join(missing[:4])}: call loss.backward() before optimizer.step()")
    held = out["held"]
    if sorted(held) != list(range(len(names))):
        return "the optimizer does not hold every model parameter exactly once"
    return None


@check("returns_loss_and_norm", 2,
       "train_step returns floats: the batch's loss before the update and the gradient norm before clipping, "
       "to float64's precision",
       probe=probe_train_steps, inputs=_train_inputs)
def returns_loss_and_norm(out, inputs, expected, precision=True):
    """The task's precision check: a loss or norm right to float32's precision only is named
    here (precision=False: passed, for the checks that reuse this judge)."""
    float32 = None
    for number, (call, max_norm) in enumerate(zip(out["calls"], inputs["max_norms"]), start=1):
        returned = call["returned"]
        if not isinstance(returned, list) or len(returned) != 2:
            return "train_step should return a pair (loss, gradient norm)"
        loss, norm = returned
        if isinstance(loss, torch.Tensor) or isinstance(norm, torch.Tensor):
            return "train_step should return Python floats: loss.item() and float(norm), not tensors"
        if not (is_float(loss) and is_float(norm)):
            return f"train_step should return two floats, got {type(loss).__name__} and {type(norm).__name__}"
        if not close_enough(loss, call["loss_before"], 1e-10):
            if close_enough(loss, call["loss_after"], 1e-10):
                return f"{numbered('call', number)}: the returned loss is the loss after the update; return the loss the step was computed from"
            if "unmasked" in call and close_enough(loss, call["unmasked"], 1e-10):
                return (f"{numbered('call', number)}: the loss scores the padded positions too (a cross-entropy over every "
                        f"position): take masked_loss(logits, targets, mask), the mean over the mask's True positions")
            if not float32_near(loss, call["loss_before"]):
                return f"{numbered('call', number)}: the returned loss is not masked_loss of the model's logits on this batch"
            float32 = float32 or (number, "loss", loss, call["loss_before"])
        right = norm_of(call["fresh"])
        if close_enough(norm, right, 1e-9):
            continue
        previous = out["calls"][number - 2]["at_step"] if number > 1 else []
        if previous and previous[-1] and close_enough(norm, norm_of([a + b for a, b in zip(previous[-1], call["fresh"])]), 1e-9):
            return (f"{numbered('call', number)}: the gradient norm includes the previous step's gradient: gradients accumulate "
                    f"because zero_grad() is not called before backward()")
        if max_norm is not None and close_enough(norm, min(right, max_norm), 1e-6):
            return f"{numbered('call', number)}: the returned norm is taken after clipping; return the norm before clipping"
        if float32_near(norm, right):
            float32 = float32 or (number, "gradient norm", norm, right)
            continue
        return f"{numbered('call', number)}: the returned gradient norm is not the global norm of this batch's gradients"
    if float32 and precision:
        number, what, value, right = float32
        yours, wanted = figures(value, right, least=6)
        return float32_verdict(f"{numbered('call', number)}: the returned {what}", "your step",
                               "the model's dtype (float64 here)",
                               where=f"{yours} for {wanted}")
    return None


@check("fresh_clipped_gradients", 2,
       "each step uses this batch's gradient only (no accumulation across calls), clipped to max_norm, "
       "and the parameters change",
       probe=probe_train_steps, inputs=_train_inputs)
def fresh_clipped_gradients(out, inputs, expected):
    names = _contract_names(out, inputs)
    for number, (call, max_norm) in enumerate(zip(out["calls"], inputs["max_norms"]), start=1):
        if len(call["at_step"]) != 1:
            return f"{numbered('call', number)}: optimizer.step() ran {len(call['at_step'])} times; once per train_step"
        grads = call["at_step"][0]
        if not any(call["changed"]) or all(g is None for g in grads):
            if problem := order_problem(call, number):
                return problem
        if not any(call["changed"]):
            return (f"{numbered('call', number)}: the parameters did not change: call optimizer.step() after loss.backward() "
                    f"(a step before backward sees no gradient)")
        wanted = _clipped(call["fresh"], max_norm)
        if all(g is not None and matches_to_float32(g, w, atol=1e-12, rtol=1e-9) for g, w in zip(grads, wanted)):
            continue  # float32 arithmetic passes: returns_loss_and_norm, the precision check, names it
        previous = out["calls"][number - 2]["at_step"] if number > 1 else []
        if previous and previous[-1]:
            piled = _clipped([a + b for a, b in zip(previous[-1], call["fresh"])], max_norm)
            if all(g is not None and matches(g, w, atol=1e-12, rtol=1e-9) for g, w in zip(grads, piled)):
                return (f"{numbered('call', number)}: the gradients accumulate from the previous call: call optimizer.zero_grad() "
                        f"before loss.backward()")
        if max_norm is not None and all(g is not None and matches(g, f, atol=1e-12, rtol=1e-9)
                                        for g, f in zip(grads, call["fresh"])):
            return (f"{numbered('call', number)}: the gradients were not clipped to max_norm before optimizer.step(): "
                    f"clip_grad_norm(optimizer.params, max_norm) goes between backward and step")
        bad = next((n for n, g, w in zip(names, grads, wanted) if g is None or not matches(g, w, atol=1e-12, rtol=1e-9)),
                   "?")
        return (f"{numbered('call', number)}: when optimizer.step() ran, {bad}'s gradient was not this batch's gradient of "
                f"masked_loss" + ("" if max_norm is None else " (clipped)"))
    return None


def probe_lowers_loss(ns, sizes, state, batch, steps, lr):
    model = model_of(ns, sizes, state).train()
    optimizer = ns.train.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    inputs, targets, mask = batch
    with torch.no_grad():
        start = _masked_loss(ns, model(inputs)[0], targets, mask).item()
    returned = [ns.train.train_step(model, optimizer, inputs, targets, mask, 1.0) for _ in range(steps)]
    with torch.no_grad():
        end = _masked_loss(ns, model(inputs)[0], targets, mask).item()
    return {"start": start, "end": end, "returned": [list(r) if isinstance(r, (tuple, list)) else r for r in returned]}


def _lowers_inputs(g):
    sizes = dict(SIZES)
    return {"sizes": sizes, "state": random_state(g, sizes, scale=0.5),
            "batch": batch_tensors(g, sizes["vocab_size"], 4, sizes["block_size"]), "steps": 5, "lr": 2e-2}


@check("lowers_loss", 1, "five steps on one fixed batch lower its loss", probe=probe_lowers_loss, inputs=_lowers_inputs)
def lowers_loss(out, inputs, expected):
    if not (out["end"] < out["start"] - 0.05):
        return (f"{inputs['steps']} steps on one fixed batch should lower its loss (from {out['start']:.4f}); it "
                f"ended at {out['end']:.4f}")
    return None
