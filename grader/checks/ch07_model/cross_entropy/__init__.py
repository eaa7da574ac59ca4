"""A stable cross-entropy loss: the mean over positions of −log softmax(logits)[target].

The checks pin it against the log-softmax formula, for logits around ±1e4 (the max is
subtracted before exp), for a target whose probability underflows (no log of a softmax),
for all-zero logits (log V), and its gradient, (softmax − one-hot) / N. The loss's classic
mistakes (MISTAKES) are named by judge_loss, which lm_forward's loss check uses too. torch's
cross-entropy, NLL loss and log-softmax, however spelled, score 'forbidden'.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from grader.checks._api import (
    Task, check, compare, figures, first_diagnosis, float32_close, float32_verdict, matches, named, shape_problem,
    torch_library_except,
)
from grader.checks.ch07_model.common import stable_cross_entropy

TASKS = [
    Task("cross_entropy", "model", "cross_entropy", "a stable cross-entropy loss",
         forbidden=("torch.nn.functional.cross_entropy", "torch.nn.functional.log_softmax", "torch.log_softmax",
                    "torch.nn.functional.nll_loss", "torch.nn.CrossEntropyLoss", "torch.nn.NLLLoss",
                    "torch.special.log_softmax", "torch.Tensor.log_softmax"),
         forbidden_methods=("log_softmax",),
         forbidden_ops=("*log_softmax*", "nll_loss*", "cross_entropy*") + torch_library_except()),
]


# ----------------------------------------------------------------- the loss


def _picked_cross_entropy(log_probs, targets):
    """−mean of each position's entry at its target (torch's nll_loss), whatever the entries are."""
    return F.nll_loss(log_probs.reshape(-1, log_probs.shape[-1]), targets.reshape(-1))


# Each mistake of the loss by name, for this task and the model's loss (lm_forward) alike;
# cross_entropy_mistakes computes what each outputs under the same name, here and not in
# hidden.py: the public checks judge the loss of any logits, the student model's too. The
# braces take the figures of the logits at hand (cross_entropy_mistake_texts).
MISTAKES = {
    "summed": "the loss is summed instead of averaged: divide by the number of scored positions (take the mean)",
    "sign_flipped": "the sign is flipped: the loss is minus the mean log-probability of the targets",
    "every_class": "the loss averages the log-probabilities of every class; pick each position's target class",
    "probability": "the loss uses the probability instead of its log: −mean(log p[target])",
    "rows_only": "the loss sums each row's positions and averages over the rows only: average over every "
                 "position, B·T = {positions} of them, not over the B = {rows} rows",
    "softmax_axis": "the softmax normalises over the wrong axis: normalise over the vocabulary, the last axis "
                    "(yours normalises over axis {axis})",
    "softmax_flattened": "the softmax normalises over the wrong axis (the positions, after flattening): normalise "
                         "over the vocabulary, the last axis",
}


def cross_entropy_mistake_texts(logits, targets) -> "dict[str, str]":
    """Every mistake's sentence by name for these logits: a softmax over a wrong axis is one
    mistake per axis but the last ("softmax_axis_0", ...)."""
    texts = {name: text for name, text in MISTAKES.items() if name != "softmax_axis"}
    texts["rows_only"] = texts["rows_only"].format(positions=targets.numel(), rows=logits.shape[0])
    for dim in range(logits.dim() - 1):
        texts[f"softmax_axis_{dim}"] = MISTAKES["softmax_axis"].format(axis=dim)
    return texts


def cross_entropy_mistakes(logits, targets) -> dict:
    """{name: loss} of each mistake cross_entropy_mistake_texts names, in the order they are tried."""
    # Every value from torch's cross_entropy, log_softmax and nll_loss, in float64.
    logits = logits.double()
    n = targets.numel()
    right = stable_cross_entropy(logits, targets)
    log_probs = F.log_softmax(logits, dim=-1)
    mistakes = {
        "summed": right * n,
        "sign_flipped": -right,
        "every_class": -log_probs.mean(),
        "probability": _picked_cross_entropy(log_probs.exp(), targets),
    }
    if logits.dim() == 3:  # [B, T, V]: each row's positions summed, only the rows averaged
        mistakes["rows_only"] = right * logits.shape[1]
    for dim in range(logits.dim() - 1):  # a softmax over batch or time instead of the vocabulary
        mistakes[f"softmax_axis_{dim}"] = _picked_cross_entropy(F.log_softmax(logits, dim=dim), targets)
    flat = logits.reshape(-1, logits.shape[-1])
    mistakes["softmax_flattened"] = _picked_cross_entropy(F.log_softmax(flat, dim=0), targets)
    return mistakes


def named_loss_mistakes(logits, targets) -> list:
    """[(sentence, loss)] of every mistake of the loss on these logits, paired by name."""
    return named(cross_entropy_mistake_texts(logits, targets), cross_entropy_mistakes(logits, targets))


def judge_loss(loss, logits, targets, what="the loss", reveal=True, precision=False) -> "str | None":
    """None when loss is the stable cross-entropy of logits against targets, else what is
    wrong. A loss right to float32's precision only is named by the check that passes
    precision=True (the task's precision check) and passes every other."""
    if not isinstance(loss, torch.Tensor):
        return f"{what} should be a tensor (keep it in the graph for training), got {type(loss).__name__}"
    right = stable_cross_entropy(logits, targets)
    if loss.dim() != 0:
        if tuple(loss.shape) in (tuple(targets.shape), (targets.numel(),)):
            return (f"{what} has one value per position (shape {list(loss.shape)}): return their mean, "
                    "a single number")
        return f"{what} should be a scalar (a 0-dimensional tensor), got shape {list(loss.shape)}"
    if not torch.isfinite(loss.double()).all():
        return f"{what} is NaN or inf on ordinary logits"
    if matches(loss, right, atol=1e-10, rtol=1e-9) and loss.dtype == right.dtype:
        return None
    known = first_diagnosis(loss, named_loss_mistakes(logits, targets), atol=1e-8, rtol=1e-6, right=right)
    if known:
        return known
    # Logits around 1e4 are numbers float32 holds to about 1e-3: the loss in float32 moves that much.
    twin = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1)).double()
    if float32_close(loss, right, twin=twin):
        return float32_verdict(what, "your loss", "the logits' dtype (float64 here)", loss, right,
                               against="the stable log-softmax cross-entropy ") if precision else None
    if not reveal:
        return f"{what} differs from the stable log-softmax cross-entropy of the logits"
    yours, stable = figures(loss.item(), right.item(), least=6)
    return f"{what} is {yours}; the stable log-softmax cross-entropy of these logits is {stable}"


# ------------------------------------------------------------------- the checks


def probe_cross_entropy(ns, logits, targets):
    return {"loss": ns.model.cross_entropy(logits.clone(), targets.clone())}


def logits_inputs(shape, scale=2.0):
    def make(g):
        logits = torch.randn(*shape, generator=g, dtype=torch.float64) * scale
        targets = torch.randint(0, shape[-1], shape[:-1], generator=g)
        return {"logits": logits, "targets": targets}
    return make


@check("matches_log_softmax", 2,
       "logits [2, 3, 5] (float64): the loss equals the mean of −log softmax(logits)[target], to float64's precision",
       probe=probe_cross_entropy, inputs=logits_inputs((2, 3, 5)))
def matches_log_softmax(out, inputs, expected):
    return judge_loss(out["loss"], inputs["logits"], inputs["targets"], precision=True)


def _huge_logits(g):
    B, T, V = 2, 3, 7
    logits = torch.randn(B, T, V, generator=g, dtype=torch.float64) * 2
    offsets = torch.tensor([1e4, -1e4, 5e3, -5e3, 1e4, 2e4], dtype=torch.float64).reshape(B, T, 1)
    return {"logits": logits + offsets, "targets": torch.randint(0, V, (B, T), generator=g)}


def probe_cross_entropy_rows(ns, logits, targets):
    """The loss of the whole batch, and of each position's row on its own: a row alone is
    stable with one maximum for the whole tensor, the batch is not."""
    rows = [ns.model.cross_entropy(logits[b : b + 1, t : t + 1].clone(), targets[b : b + 1, t : t + 1].clone())
            for b in range(logits.shape[0]) for t in range(logits.shape[1])]
    return {"loss": ns.model.cross_entropy(logits.clone(), targets.clone()), "rows": rows}


def _finite(value) -> bool:
    return isinstance(value, torch.Tensor) and value.dim() == 0 and bool(torch.isfinite(value.double()).all())


@check("huge_logits", 2, "logits around ±1e4 give a finite, exact loss (the max is subtracted before exp)",
       probe=probe_cross_entropy_rows, inputs=_huge_logits)
def huge_logits(out, inputs, expected):
    loss, logits, targets = out["loss"], inputs["logits"], inputs["targets"]
    if isinstance(loss, torch.Tensor) and loss.dim() == 0 and not torch.isfinite(loss.double()).all():
        if all(_finite(row) for row in out.get("rows") or [None]):
            return ("the loss is NaN or inf for logits around ±1e4 whose rows sit far apart, though each row alone "
                    "gives a finite loss: one maximum is subtracted for the whole tensor, so a row 2e4 below it "
                    "underflows to log(0). Subtract each row's own maximum (amax over the last axis, keepdim=True)")
        return ("the loss is NaN or inf for logits around ±1e4, even for a single row: there is no max "
                "subtraction, so exp overflows (exp(1e4) = inf) or underflows to log(0). Subtract each row's own "
                "maximum before exp: log-softmax(z) = (z − max z) − log Σ exp(z − max z)")
    if (problem := judge_loss(loss, logits, targets)) is not None:
        return f"with logits around ±1e4: {problem}"
    return None


@check("tiny_probabilities", 1,
       "a target whose logit is 1e4 below the others gives the finite loss 1e4 (no log of an underflowed 0)",
       probe=probe_cross_entropy,
       inputs=lambda g: {"logits": torch.tensor([[[0.0, -1e4, 0.0], [2.0, 1.0, -1e4 + 2.0]]], dtype=torch.float64),
                         "targets": torch.tensor([[1, 2]])})
def tiny_probabilities(out, inputs, expected):
    loss, logits, targets = out["loss"], inputs["logits"], inputs["targets"]
    if isinstance(loss, torch.Tensor) and loss.dim() == 0 and not torch.isfinite(loss.double()).all():
        return ("the loss is inf when the target's logit is 1e4 below the others: its softmax probability "
                "underflows to 0 and log(0) = -inf. Take the log-softmax directly, (z − max z) − log Σ exp(z − max "
                "z), instead of the log of a softmax")
    if (problem := judge_loss(loss, logits, targets)) is not None:
        return f"with a target's logit 1e4 below the others: {problem}"
    return None


@check("uniform", 1, "all-zero logits over V = 27 classes give exactly log 27 ≈ 3.295837",
       probe=probe_cross_entropy,
       inputs=lambda g: {"logits": torch.zeros(2, 4, 27, dtype=torch.float64),
                         "targets": torch.randint(0, 27, (2, 4), generator=g)})
def uniform(out, inputs, expected):
    loss, V = out["loss"], inputs["logits"].shape[-1]
    if problem := shape_problem(loss, (), "the loss"):
        return problem
    figure = torch.tensor(V, dtype=torch.float64).log()
    if matches(loss, figure, atol=1e-12, rtol=0):
        return None
    known = first_diagnosis(loss, named_loss_mistakes(inputs["logits"], inputs["targets"]), atol=1e-8, rtol=1e-6,
                            right=figure)
    if not known and float32_close(loss, figure):
        return None  # float32 arithmetic: matches_log_softmax, the precision check, names it
    lead = f"all-zero logits over V = {V} classes should give log V = {figure.item():.6f}"
    return f"{lead}: {known}" if known else f"{lead}, got {figures(loss.item(), figure.item(), least=6)[0]}"


def probe_cross_entropy_gradient(ns, logits, targets):
    leaf = logits.clone().requires_grad_(True)
    with torch.enable_grad():
        loss = ns.model.cross_entropy(leaf, targets.clone())
        if not isinstance(loss, torch.Tensor) or not loss.requires_grad:
            return {"gradient": None}
        (gradient,) = torch.autograd.grad(loss, leaf)
    return {"gradient": gradient}


@check("gradient", 1, "the loss stays differentiable: d loss / d logits = (softmax − one-hot) / N",
       probe=probe_cross_entropy_gradient, inputs=logits_inputs((3, 4, 6)))
def gradient(out, inputs, expected):
    logits, targets = inputs["logits"], inputs["targets"]
    if out["gradient"] is None:
        return ("the loss is not connected to the logits (autograd cannot differentiate it): keep it a tensor "
                "computed from the logits, without .item(), .detach() or torch.no_grad()")
    flat = logits.reshape(-1, logits.shape[-1])
    right = torch.softmax(flat, dim=-1)
    right[torch.arange(flat.shape[0]), targets.reshape(-1)] -= 1.0
    right = (right / flat.shape[0]).reshape(logits.shape)
    if matches(out["gradient"], right * flat.shape[0], atol=1e-10, rtol=1e-8):
        return ("the gradient is N times too large: the loss is summed instead of averaged over the "
                f"N = {flat.shape[0]} positions")
    if float32_close(out["gradient"], right):
        return None  # float32 arithmetic: matches_log_softmax, the precision check, names it
    if problem := compare(out["gradient"], right, "the gradient of the loss", atol=1e-10, rtol=1e-8):
        return f"{problem}; d loss / d logits should be (softmax − one-hot(target)) / N"
    return None
