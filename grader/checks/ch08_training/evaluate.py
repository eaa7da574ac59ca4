"""The validation loss per scored character: every scored position weighs the same, however
the documents fall into batches, padding is never scored, and the model runs in eval mode
and comes back in the mode it had.
"""

from __future__ import annotations

import torch

from grader.checks._api import Task, check
from grader.checks.ch08_training.common import SIZES, close_enough, is_float, model_of, windows_of, random_state
from grader.checks.course import F64

TASKS = [
    Task("evaluate", "train", "evaluate", "the loss per scored character"),
]

DOCS = ["ana", "bob", "christopher", "eve", "li", "kai", "zoe"]


def vocab(docs):
    return sorted(set("".join(docs)))


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
    V = len(vocab(docs)) + 1
    state = random_state(g, {**sizes, "vocab_size": V})
    state["ln_final.weight"] = torch.zeros(sizes["d_model"], dtype=F64)  # logits = head(ln_final.bias) everywhere
    state["ln_final.bias"] = torch.randn(sizes["d_model"], generator=g, dtype=F64)
    state["head.weight"] = torch.randn(V, sizes["d_model"], generator=g, dtype=F64)
    return state


def _scored_targets(docs, block_size):
    chars = vocab(docs)
    stoi = {c: i for i, c in enumerate(chars)}
    bos = len(chars)
    return [windows_of([bos, *[stoi[c] for c in doc], bos], block_size)[1] for doc in docs], bos


def _evaluate_constant_inputs(g):
    sizes = dict(SIZES, block_size=5)
    return {"docs": list(DOCS), "sizes": sizes, "state": _constant_logit_state(g, DOCS, sizes), "batch_size": 3}


@check("per_scored_character", 2,
       "with the same logits at every position, 7 names in batches of 3 give the mean loss over all scored "
       "positions (not the mean of batch means)",
       probe=probe_evaluate, inputs=_evaluate_constant_inputs)
def judge_evaluate_constant(out, inputs, expected):
    """With constant logits c at every position, the loss per scored character is the mean
    of -log softmax(c)[target] over every scored target: countable by hand."""
    value = out["value"]
    if not is_float(value):
        return f"evaluate should return a Python float, got {type(value).__name__}"
    state, docs, bs = inputs["state"], inputs["docs"], inputs["batch_size"]
    nll = -torch.log_softmax(state["head.weight"] @ state["ln_final.bias"], dim=-1)
    targets, bos = _scored_targets(docs, inputs["sizes"]["block_size"])
    per_doc = [[float(nll[t]) for t in row] for row in targets]
    right = sum(map(sum, per_doc)) / sum(map(len, per_doc))
    if close_enough(value, right, 1e-9):
        return None
    batches = [per_doc[i:i + bs] for i in range(0, len(per_doc), bs)]
    batch_means = [sum(map(sum, b)) / sum(map(len, b)) for b in batches]

    def padded(batch):
        T = max(map(len, batch))
        return sum(sum(row) + (T - len(row)) * float(nll[bos]) for row in batch), T * len(batch)

    padded_batches = [padded(b) for b in batches]
    candidates = [
        (sum(batch_means) / len(batch_means),
         "this is the mean of the per-batch means, which over-weights the small last batch: sum each batch's "
         "loss times its number of scored positions, and divide by the total number of positions"),
        (sum(s for s, _ in padded_batches) / sum(n for _, n in padded_batches),
         "the padded positions are scored too: only mask-True positions count, in the sum and in the number"),
        (sum(sum(r) / len(r) for r in per_doc) / len(per_doc),
         "this is the mean of per-document means; the loss per character weights every scored position equally"),
        (sum(map(sum, per_doc)), "this is the summed loss; divide by the number of scored positions"),
    ]
    for wrong, why in candidates:
        if close_enough(value, wrong, 1e-9):
            return why
    return (f"with every position's logits the same vector c, the loss per scored character must be the mean of "
            f"-log softmax(c)[target] over all {sum(map(len, per_doc))} scored positions: {right:.6f}, got {value:.6f}")


def _evaluate_mode_inputs(g):
    sizes = dict(SIZES, dropout=0.5)
    V = len(vocab(DOCS)) + 1
    return {"docs": list(DOCS), "sizes": sizes, "state": random_state(g, {**sizes, "vocab_size": V}),
            "batch_size": 4}


@check("eval_mode_restored", 1,
       "with dropout 0.5 the value is that of eval mode, and the model's mode (train or eval) is restored",
       probe=probe_evaluate, inputs=_evaluate_mode_inputs)
def judge_evaluate_mode(out, inputs, expected):
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
