"""The hidden checks of grader/checks/ch01_tokens/decode.py."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.ch01_tokens.common import vocabulary
from grader.checks.ch01_tokens.decode import decode_problem, probe_decode
from grader.checks.ch01_tokens.hidden.common import random_corpus


# ----------------------------------------------------------------- reference


def _random_decode_inputs(g):
    corpus, alphabet = random_corpus(g)
    K = len(alphabet)
    id_lists = []
    for _ in range(5):
        length = int(torch.randint(1, 15, (1,), generator=g))
        id_lists.append(torch.randint(0, K + 1, (length,), generator=g).tolist())  # BOS = K included
    id_lists.append([K] + id_lists[0] + [K])
    return {"corpus": corpus, "id_lists": id_lists}


def _expect_decode(ref, inputs):
    tok = ref.tokenizer.CharTokenizer(list(inputs["corpus"]))
    return [tok.decode(ids) for ids in inputs["id_lists"]]


@check("matches_reference", 2, "random id lists (BOS anywhere) give the reference text",
       probe=probe_decode, inputs=_random_decode_inputs, expect=_expect_decode, hidden=True)
def judge_decode_reference(out, inputs, expected):
    chars, _, bos = vocabulary(inputs["corpus"])
    for number, (ids, result, right) in enumerate(zip(inputs["id_lists"], out["results"], expected)):
        if problem := decode_problem(result, ids, chars, bos, hidden=True):
            return f"random id list {number + 1}: {problem}"
        if result["value"] != right:
            return f"random id list {number + 1}: decode differs from the reference"
    return None
