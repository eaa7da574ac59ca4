"""The validation loss per scored character: every scored position weighs the same, however
the documents fall into batches, padding is never scored, and the model runs in eval mode
and comes back in the mode it had.

With the same logits at every position the right value, and those of the classic
mistakes, are data the kit computed on the check's fixed inputs (grader/checks/facts.py;
hidden/evaluate.py computes them).
"""

from __future__ import annotations

import torch

from grader.checks._api import Task, check, figures, float32_verdict, naming
from grader.checks.ch08_training.common import (
    SIZES, close_enough, float32_near, is_float, model_of, random_state,
)
from grader.checks.course import F64
from grader.checks.facts import known_facts

TASKS = [
    Task("evaluate", "train", "evaluate", "the loss per scored character", names_failing_operator=False),
]

DOCS = ["ana", "bob", "christopher", "eve", "li", "kai", "zoe"]


def vocab_size(docs):
    """V for a character vocabulary of docs: its distinct characters and BOS."""
    return len(set("".join(docs))) + 1


def probe_evaluate(ns, docs, sizes, state, batch_size):
    tokenizer = ns.tokenizer.CharTokenizer(docs)
    model = model_of(ns, {**sizes, "vocab_size": tokenizer.vocab_size}, state).train()
    value = ns.train.evaluate(model, docs, tokenizer, batch_size=batch_size)
    again = ns.train.evaluate(model, docs, tokenizer, batch_size=batch_size)
    after_train = model.training
    model.eval()
    in_eval = ns.train.evaluate(model, docs, tokenizer, batch_size=batch_size)
    after_eval = model.training
    plain = None
    if sizes.get("dropout", 0.0):
        quiet = model_of(ns, {**sizes, "vocab_size": tokenizer.vocab_size, "dropout": 0.0}, state).eval()
        plain = ns.train.evaluate(quiet, docs, tokenizer, batch_size=batch_size)
    return {"value": value, "again": again, "in_eval": in_eval, "after_train": after_train,
            "after_eval": after_eval, "plain": plain}


def _constant_logit_state(g, docs, sizes):
    V = vocab_size(docs)
    state = random_state(g, {**sizes, "vocab_size": V})
    state["ln_final.weight"] = torch.zeros(sizes["d_model"], dtype=F64)  # logits = head(ln_final.bias) everywhere
    state["ln_final.bias"] = torch.randn(sizes["d_model"], generator=g, dtype=F64)
    state["head.weight"] = torch.randn(V, sizes["d_model"], generator=g, dtype=F64)
    return state


def _evaluate_constant_inputs(g):
    sizes = dict(SIZES, block_size=5)
    return {"docs": list(DOCS), "sizes": sizes, "state": _constant_logit_state(g, DOCS, sizes), "batch_size": 3}


MISTAKES = {
    "batch_means": "this is the mean of the per-batch means, which over-weights the small last batch: sum each "
                   "batch's loss times its number of scored positions, and divide by the total number of positions",
    "padded": "the padded positions are scored too: only mask-True positions count, in the sum and in the number",
    "document_means": "this is the mean of per-document means; the loss per character weights every scored "
                      "position equally",
    "summed": "this is the summed loss; divide by the number of scored positions",
}


@check("per_scored_character", 2,
       "with the same logits at every position, 7 names in batches of 3 give the mean loss over all scored "
       "positions (not the mean of batch means), to float64's precision",
       probe=probe_evaluate, inputs=_evaluate_constant_inputs, fixed_inputs=True)
def per_scored_character(out, inputs, expected):
    """With constant logits c at every position, the loss per scored character is the mean
    of -log softmax(c)[target] over every scored target: countable by hand."""
    value = out["value"]
    if not is_float(value):
        return f"evaluate should return a Python float, got {type(value).__name__}"
    facts = known_facts(inputs)
    right = facts["right"]
    if close_enough(value, right, 1e-9):
        return None
    for label, why in MISTAKES.items():
        if close_enough(value, facts["mistakes"][label], 1e-9):
            return naming(label, why)
    wanted, yours = figures(right, value, least=6)
    if float32_near(value, right):  # the task's precision check
        return float32_verdict("the loss per scored character", "your evaluate",
                               "the logits' dtype (float64 here)",
                               where=f"{yours} for {wanted}")
    return (f"with every position's logits the same vector c, the loss per scored character must be the mean of "
            f"-log softmax(c)[target] over all {facts['positions']} scored positions: {wanted}, got {yours}")


def _evaluate_mode_inputs(g):
    sizes = dict(SIZES, dropout=0.5)
    V = vocab_size(DOCS)
    return {"docs": list(DOCS), "sizes": sizes, "state": random_state(g, {**sizes, "vocab_size": V}),
            "batch_size": 4}


@check("eval_mode_restored", 1,
       "with dropout 0.5 the value is that of eval mode, and the model's mode (train or eval) is restored",
       probe=probe_evaluate, inputs=_evaluate_mode_inputs, gated_by="per_scored_character")
def eval_mode_restored(out, inputs, expected):
    if not (is_float(out["value"]) and is_float(out["plain"])):
        return "evaluate should return a Python float"
    if not close_enough(out["value"], out["again"], 1e-12) or not close_enough(out["value"], out["plain"], 1e-9):
        return ("with dropout 0.5 the result changes from call to call: run the model in eval mode (model.eval()) "
                "while evaluating")
    if not out["after_train"]:
        return "a model in training mode came back in eval mode: restore the mode it had (model.train(was_training))"
    if out["after_eval"]:
        return "a model in eval mode came back in training mode: restore the mode it had, not always train()"
    return None
