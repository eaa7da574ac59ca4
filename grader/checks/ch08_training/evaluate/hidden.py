"""The hidden checks of grader/checks/ch08_training/evaluate/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.ch08_training.common import SIZES, close_enough, float32_near, is_float, model_of, random_state
from grader.checks.ch08_training.evaluate import per_scored_character, probe_evaluate, vocab_size
from grader.checks.ch08_training.hidden.common import random_docs, windows_of
from grader.checks.facts import facts_for


def _scored_targets(docs, block_size):
    chars = sorted(set("".join(docs)))
    stoi = {c: i for i, c in enumerate(chars)}
    bos = len(chars)
    return [windows_of([bos, *[stoi[c] for c in doc], bos], block_size)[1] for doc in docs], bos


@facts_for(per_scored_character)
def constant_logit_facts(ref, inputs):
    """With constant logits c at every position, the loss per scored character is the mean
    of -log softmax(c)[target] over every scored target; and the classic wrong means."""
    state, docs, bs = inputs["state"], inputs["docs"], inputs["batch_size"]
    nll = -torch.log_softmax(state["head.weight"] @ state["ln_final.bias"], dim=-1)
    targets, bos = _scored_targets(docs, inputs["sizes"]["block_size"])
    per_doc = [[float(nll[t]) for t in row] for row in targets]
    batches = [per_doc[i:i + bs] for i in range(0, len(per_doc), bs)]
    batch_means = [sum(map(sum, b)) / sum(map(len, b)) for b in batches]

    def padded(batch):
        T = max(map(len, batch))
        return sum(sum(row) + (T - len(row)) * float(nll[bos]) for row in batch), T * len(batch)

    padded_batches = [padded(b) for b in batches]
    return {"right": sum(map(sum, per_doc)) / sum(map(len, per_doc)), "positions": sum(map(len, per_doc)),
            "mistakes": {"batch_means": sum(batch_means) / len(batch_means),
                         "padded": sum(s for s, _ in padded_batches) / sum(n for _, n in padded_batches),
                         "document_means": sum(sum(r) / len(r) for r in per_doc) / len(per_doc),
                         "summed": sum(map(sum, per_doc))}}


def _random_evaluate_inputs(g):
    docs = random_docs(g, 9)
    sizes = dict(SIZES, block_size=6)
    V = vocab_size(docs)
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
def matches_reference(out, inputs, expected):
    value = out["value"]
    if not is_float(value):
        return f"evaluate should return a Python float, got {type(value).__name__}"
    if close_enough(value, expected["right"], 1e-9):
        return judge_evaluate_mode_hidden(out)
    for wrong, why in expected["mistakes"]:
        if close_enough(value, wrong, 1e-9):
            return why
    if float32_near(value, expected["right"]):  # per_scored_character, the precision check, names it
        return judge_evaluate_mode_hidden(out)
    return "the loss per scored character differs from the reference's"
