"""The hidden checks of grader/checks/ch08_training/bigram_baseline/__init__.py."""

from __future__ import annotations

import math

import torch

from grader.checks._api import check, numbered
from grader.checks.ch08_training.bigram_baseline import (
    MISTAKES, bigram_problem, by_hand, cropped_and_smoothed, probe_bigram,
)
from grader.checks.ch08_training.common import close_enough, close_to_float32
from grader.checks.ch08_training.hidden.common import random_docs
from grader.checks.facts import facts_for


def hand_bigram(train_docs, val_docs, block_size=None, k=1.0, mistake=None):
    chars = sorted(set("".join(train_docs) + "".join(val_docs)))
    stoi = {c: i for i, c in enumerate(chars)}
    V, bos = len(chars) + 1, len(chars)

    def pairs(docs):
        for doc in docs:
            ids = [stoi[c] for c in doc]
            if mistake == "no_bos":
                ids = ids if len(ids) > 1 else ids + ids
            elif mistake == "leading_bos_only":
                ids = [bos, *ids]
            elif mistake == "closing_bos_only":
                ids = [*ids, bos]
            else:
                ids = [bos, *ids, bos]
            limit = len(ids) if block_size is None or mistake == "ignore_block" else block_size
            n = min(limit, len(ids) - 1)
            yield from zip(ids[:n], ids[1:n + 1])

    counts = [[0.0] * V for _ in range(V)]
    for a, b in pairs([*train_docs, *val_docs] if mistake == "val_counted" else train_docs):
        counts[a][b] += 1
    kk = 1.0 if mistake == "k_is_one" else k
    scored = list(pairs(val_docs))
    total = 0.0
    for a, b in scored:
        row = sum(counts[a])
        if mistake == "no_kv":
            p = (counts[a][b] + kk) / (row + kk)
        else:
            p = (counts[a][b] + kk) / (row + kk * V)
        total += -math.log2(p) if mistake == "bits" else -math.log(p)
    return total if mistake == "summed" else total / len(scored)


def bigram_facts(inputs):
    """Per call: the add-k baseline, and each classic mistake's (None where it is the same)."""
    said = []
    for call in inputs["calls"]:
        args = call["train"], call["val"], call["block_size"], call["k"]
        right = hand_bigram(*args)
        mistakes = {}
        for name in MISTAKES:
            wrong = hand_bigram(*args, mistake=name)
            mistakes[name] = None if close_enough(wrong, right, 1e-9) else wrong
        said.append({"right": right, "mistakes": mistakes})
    return said


@facts_for(by_hand, cropped_and_smoothed)
def public_bigram_facts(ref, inputs):
    return bigram_facts(inputs)


def _random_bigram_inputs(g):
    train, val = random_docs(g, 12, "abcd"), random_docs(g, 6, "abcd")
    calls = [{"train": train, "val": val, "block_size": int(torch.randint(2, 7, (1,), generator=g)),
              "k": float(torch.empty(1).uniform_(0.1, 2.0, generator=g))},
             {"train": train, "val": val, "block_size": None, "k": 1.0}]
    return {"vocab_docs": train + val, "calls": calls}


def _expect_bigram(ref, inputs):
    tokenizer = ref.tokenizer.CharTokenizer(inputs["vocab_docs"])
    return [ref.train.bigram_baseline(c["train"], c["val"], tokenizer, block_size=c["block_size"], smoothing=c["k"])
            for c in inputs["calls"]]


@check("random_corpora", 2, "random corpora, block sizes and k match the reference",
       probe=probe_bigram, inputs=_random_bigram_inputs, expect=_expect_bigram, hidden=True)
def random_corpora(out, inputs, expected):
    if problem := bigram_problem(out, inputs, bigram_facts(inputs), show=False):
        return problem
    for number, (result, want) in enumerate(zip(out, expected), start=1):
        if not close_to_float32(float(result["value"]), want, 1e-9):
            return f"{numbered('call', number)}: the baseline differs from the reference's"
    return None
