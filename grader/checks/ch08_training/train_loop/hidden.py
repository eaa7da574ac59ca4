"""The hidden checks of grader/checks/ch08_training/train_loop/__init__.py."""

from __future__ import annotations

import math

import torch

from grader.checks._api import check, matches, matches_to_float32
from grader.checks.ch08_training.common import close_enough, close_to_float32, is_float, model_of, random_state
from grader.checks.ch08_training.train_loop import (
    batch_tensors, fresh_clipped_gradients, returns_loss_and_norm, probe_train_steps,
)


def norm_of(grads):
    return math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads if g is not None))


HIDDEN_SIZES = dict(vocab_size=9, block_size=7, d_model=12, n_heads=3, n_layers=2, d_ff=20, dropout=0.0)


def _random_train_inputs(g):
    sizes = dict(HIDDEN_SIZES)
    state = random_state(g, sizes, scale=0.5)
    batches = [batch_tensors(g, sizes["vocab_size"], 4, sizes["block_size"]) for _ in range(4)]
    return {"sizes": sizes, "state": state, "batches": batches, "max_norms": [0.1, None, 0.1, 0.1],
            "lr": 10 ** float(torch.empty(1).uniform_(-2.5, -1.5, generator=g)), "weight_decay": 0.05}


def _expect_train(ref, inputs):
    """The reference's returns and final parameters, and those of the classic wrong loops."""

    def run(kind):
        model = model_of(ref, inputs["sizes"], inputs["state"]).train()
        optimizer = ref.train.AdamW(model.parameters(), lr=inputs["lr"], betas=(0.9, 0.95),
                                    weight_decay=inputs["weight_decay"])
        returns = []
        for (x, y, mask), max_norm in zip(inputs["batches"], inputs["max_norms"]):
            if kind == "right":
                returns.append(ref.train.train_step(model, optimizer, x, y, mask, max_norm))
                continue
            if kind != "no_zero_grad":
                optimizer.zero_grad()
            loss = ref.train.masked_loss(model(x)[0], y, mask)
            loss.backward()
            norm = norm_of([p.grad for p in optimizer.params])
            if max_norm is not None and kind != "no_clip":
                ref.train.clip_grad_norm(optimizer.params, max_norm)
            optimizer.step()
            returns.append((loss.item(), norm))
        return {"returns": returns, "final": {n: p.detach().clone() for n, p in model.named_parameters()}}

    return {"right": run("right"),
            "mistakes": [("the gradients accumulate from step to step: call optimizer.zero_grad() before backward()",
                          run("no_zero_grad")),
                         ("the gradients are never clipped: clip_grad_norm(optimizer.params, max_norm) between "
                          "backward() and step()", run("no_clip"))]}


def _run_matches(out, run, atol=1e-9, float32=False):
    """float32: numbers right to float32's precision pass too (the reference's run: the public
    returns_loss_and_norm, the task's precision check, names float32 arithmetic)."""
    same, same_tensor = (close_to_float32, matches_to_float32) if float32 else (close_enough, matches)
    returns = [c["returned"] for c in out["calls"]]
    if len(returns) != len(run["returns"]):
        return False
    for got, want in zip(returns, run["returns"]):
        if not (isinstance(got, list) and len(got) == 2 and all(is_float(v) for v in got)):
            return False
        if not (same(got[0], want[0], atol) and same(got[1], float(want[1]), atol)):
            return False
    return all(same_tensor(out["final"].get(n), p, atol=atol, rtol=1e-7) for n, p in run["final"].items())


@check("matches_reference", 3,
       "four steps (with and without clipping) on a 2-layer model return and leave what the reference's do",
       probe=probe_train_steps, inputs=_random_train_inputs, expect=_expect_train, hidden=True)
def matches_reference(out, inputs, expected):
    if _run_matches(out, expected["right"]):
        return None
    for why, run in expected["mistakes"]:
        if _run_matches(out, run, atol=1e-8):
            return why
    if _run_matches(out, expected["right"], float32=True):
        return None
    if problem := returns_loss_and_norm(out, inputs, expected, precision=False):
        return problem
    if problem := fresh_clipped_gradients(out, inputs, expected):
        return problem
    return "four train_step calls do not leave the parameters where the reference's do"
