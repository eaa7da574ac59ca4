"""What chapter 07's task modules share: the chapter's sizes, naming the mistake a wrong
parameter count points at (the counts themselves, the ledger's and each mistake's, are
data the kit computed for the public checks' configurations: grader/checks/facts.py),
the model built from a state, and the loss as the lesson defines it (the stable
log-softmax cross-entropy, taken from torch's own, which the cross_entropy task may not
use) with its classic mistakes."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from grader.checks._api import figures, first_diagnosis, float32_close, float32_verdict, matches, named
from grader.checks.course import PUBLISHED, config, load_state

SIZES = dict(vocab_size=11, block_size=12, d_model=8, n_heads=2, n_layers=2, d_ff=16)
# The lesson's two figures: 107,776 parameters for the published model, 424 for a small one.
FIGURES = [PUBLISHED, dict(vocab_size=10, block_size=6, n_layers=2, d_model=4, n_heads=2, d_ff=8)]


# ------------------------------------------------------------------- the ledger


def full_sizes(sizes):
    return {**SIZES, **sizes}


def describe_value(sizes):
    s = full_sizes(sizes)
    return (f"V={s['vocab_size']}, C={s['block_size']}, N={s['n_layers']}, d={s['d_model']}, "
            f"h={s['n_heads']}, f={s['d_ff']}")


def count_problem(count, facts) -> "str | None":
    """The mistake a wrong parameter count points at, if a known one. facts: the ledger's
    count for the configuration ("ledger") and what each known mistake changes it by
    ("mistakes", [(amount, why)])."""
    diff = count - facts["ledger"]
    for amount, why in facts["mistakes"]:
        if amount and diff == amount:
            return why
    return None


def model_of(ns, sizes, state=None):
    return load_state(ns.model.TransformerLM(config(ns, SIZES, **sizes)), state)


# ----------------------------------------------------------------- the loss


def stable_cross_entropy(logits, targets):
    """The right loss, from torch's own cross-entropy in float64."""
    return F.cross_entropy(logits.double().reshape(-1, logits.shape[-1]), targets.reshape(-1))


def _picked_cross_entropy(log_probs, targets):
    """−mean of each position's entry at its target (torch's nll_loss), whatever the entries are."""
    return F.nll_loss(log_probs.reshape(-1, log_probs.shape[-1]), targets.reshape(-1))


# Each mistake of the loss by name, for the cross_entropy task and the model's loss alike;
# cross_entropy_mistakes computes what each outputs under the same name. The braces take
# the figures of the logits at hand (cross_entropy_mistake_texts).
CROSS_ENTROPY_MISTAKES = {
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
    texts = {name: text for name, text in CROSS_ENTROPY_MISTAKES.items() if name != "softmax_axis"}
    texts["rows_only"] = texts["rows_only"].format(positions=targets.numel(), rows=logits.shape[0])
    for dim in range(logits.dim() - 1):
        texts[f"softmax_axis_{dim}"] = CROSS_ENTROPY_MISTAKES["softmax_axis"].format(axis=dim)
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
