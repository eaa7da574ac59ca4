"""The hidden checks of grader/checks/ch01_tokens/encode.py."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.ch01_tokens.common import vocabulary
from grader.checks.ch01_tokens.encode import encode_problem, probe_encode
from grader.checks.ch01_tokens.hidden.common import random_corpus


# -------------------------------------------------------------------- reference


def _random_encode_inputs(g):
    corpus, alphabet = random_corpus(g)
    texts = []
    for _ in range(5):
        length = int(torch.randint(0, 15, (1,), generator=g))
        texts.append("".join(alphabet[i] for i in torch.randint(0, len(alphabet), (length,), generator=g).tolist()))
    return {"corpus": corpus, "texts": texts}


def _expect_encode(ref, inputs):
    tok = ref.tokenizer.CharTokenizer(list(inputs["corpus"]))
    return [tok.encode(text) for text in inputs["texts"]]


@check("matches_reference", 2, "random corpora and texts give the reference ids",
       probe=probe_encode, inputs=_random_encode_inputs, expect=_expect_encode, hidden=True)
def judge_encode_reference(out, inputs, expected):
    _, stoi, bos = vocabulary(inputs["corpus"])
    for number, (text, result, right) in enumerate(zip(inputs["texts"], out["results"], expected)):
        if problem := encode_problem(result, text, stoi, bos, hidden=True):
            return f"random text {number + 1}: {problem}"
        if result["ids"]["value"] != right:
            return f"random text {number + 1}: encode differs from the reference"
    return None
