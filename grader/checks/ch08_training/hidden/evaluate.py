"""The hidden checks of grader/checks/ch08_training/evaluate.py."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.ch08_training.common import SIZES, close_enough, is_float, model_of, random_state
from grader.checks.ch08_training.evaluate import vocab, probe_evaluate
from grader.checks.ch08_training.hidden.common import random_docs


def _random_evaluate_inputs(g):
    docs = random_docs(g, 9)
    sizes = dict(SIZES, block_size=6)
    V = len(vocab(docs)) + 1
    return {"docs": docs, "sizes": sizes, "state": random_state(g, {**sizes, "vocab_size": V}), "batch_size": 4}


def _expect_evaluate(ref, inputs):
    docs, bs = inputs["docs"], inputs["batch_size"]
    tokenizer = ref.tokenizer.CharTokenizer(docs)
    model = model_of(ref, {**inputs["sizes"], "vocab_size": tokenizer.vocab_size}, inputs["state"]).eval()
    right = ref.train.evaluate(model, docs, tokenizer, batch_size=bs)
    encoded = [tokenizer.encode_document(d) for d in docs]
    means, padded_sum, padded_count = [], 0.0, 0
    with torch.no_grad():
        for start in range(0, len(encoded), bs):
            x, y, mask = ref.train.make_batch(encoded[start:start + bs], model.cfg.block_size, tokenizer.bos_id)
            logits = model(x)[0]
            means.append(ref.train.masked_loss(logits, y, mask).item())
            everything = torch.ones_like(mask)
            padded_sum += ref.train.masked_loss(logits, y, everything).item() * mask.numel()
            padded_count += mask.numel()
    return {"right": right, "mistakes": [
        (sum(means) / len(means), "this is the mean of the per-batch means, which over-weights the small last batch"),
        (padded_sum / padded_count, "the padded positions are scored too: only mask-True positions count")]}


def judge_evaluate_mode_hidden(out):
    if not out["after_train"] or out["after_eval"]:
        return "evaluate should restore the mode the model had (training or eval)"
    return None


@check("matches_reference", 2, "random names and weights give the reference's loss per scored character",
       probe=probe_evaluate, inputs=_random_evaluate_inputs, expect=_expect_evaluate, hidden=True)
def judge_evaluate_reference(out, inputs, expected):
    value = out["value"]
    if not is_float(value):
        return f"evaluate should return a Python float, got {type(value).__name__}"
    if close_enough(value, expected["right"], 1e-9):
        return judge_evaluate_mode_hidden(out)
    for wrong, why in expected["mistakes"]:
        if close_enough(value, wrong, 1e-9):
            return why
    return "the loss per scored character differs from the reference's"
