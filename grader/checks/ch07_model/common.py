"""What chapter 07's task modules share: the chapter's sizes, naming the mistake a wrong
parameter count points at (the counts themselves, the ledger's and each mistake's, are
data the kit computed for the public checks' configurations: grader/checks/facts.py),
the model built from a state, and the loss as the lesson defines it (the stable
log-softmax cross-entropy, taken from torch's own, which the cross_entropy task may not
use). The loss's classic mistakes, and the judge of a loss, are the cross_entropy
task's (cross_entropy/__init__.py), which the model's loss check uses too."""

from __future__ import annotations

import torch.nn.functional as F

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
