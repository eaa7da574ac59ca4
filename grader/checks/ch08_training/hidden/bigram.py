"""The hidden checks of grader/checks/ch08_training/bigram.py."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.ch08_training.bigram import bigram_problem, probe_bigram
from grader.checks.ch08_training.common import close_enough
from grader.checks.ch08_training.hidden.common import random_docs


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
def judge_bigram_hidden(out, inputs, expected):
    if problem := bigram_problem(out, inputs, show=False):
        return problem
    for number, (result, want) in enumerate(zip(out, expected), start=1):
        if not close_enough(float(result["value"]), want, 1e-9):
            return f"call {number}: the baseline differs from the reference's"
    return None
