"""The hidden checks of grader/checks/ch01_tokens/decode/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check, numbered
from grader.checks.ch01_tokens.decode import decode_problem, drops_bos, probe_decode, round_trip
from grader.checks.ch01_tokens.hidden.common import decode_facts, random_corpus
from grader.checks.facts import facts_for


@facts_for(drops_bos, round_trip)
def public_decode_facts(ref, inputs):
    return decode_facts(inputs["corpus"], inputs["id_lists"])


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
def matches_reference(out, inputs, expected):
    facts = decode_facts(inputs["corpus"], inputs["id_lists"])
    for number, (ids, result, right, said) in enumerate(zip(inputs["id_lists"], out["results"], expected,
                                                            facts["texts"])):
        if problem := decode_problem(result, ids, said, facts["bos"], hidden=True):
            return f"{numbered('random id list', number + 1)}: {problem}"
        if result["value"] != right:
            return f"{numbered('random id list', number + 1)}: decode differs from the reference"
    return None
