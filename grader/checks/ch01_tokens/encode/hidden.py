"""The hidden checks of grader/checks/ch01_tokens/encode/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check, hidden
from grader.checks.ch01_tokens.encode import ana_document, encode_problem, probe_encode, round_trip, unknown_character
from grader.checks.ch01_tokens.hidden.common import encode_facts, random_corpus, vocabulary
from grader.checks.facts import facts_for


@facts_for(ana_document, round_trip)
def public_encode_facts(ref, inputs):
    return encode_facts(inputs["corpus"], inputs["texts"])


@facts_for(unknown_character)
def unknown_character_facts(ref, inputs):
    """What encode gives when it skips the unknown characters silently."""
    _, stoi, _ = vocabulary(inputs["corpus"])
    return {"skipped": [[stoi[c] for c in text if c in stoi] for text in inputs["texts"]]}


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
def matches_reference(out, inputs, expected):
    facts = encode_facts(inputs["corpus"], inputs["texts"])
    for number, (text, result, right, ids) in enumerate(zip(inputs["texts"], out["results"], expected, facts["ids"])):
        if problem := encode_problem(result, text, ids, facts["bos"], hidden=True):
            return f"{hidden(f'random text {number + 1}: ', '')}{problem}"
        if result["ids"]["value"] != right:
            return f"{hidden(f'random text {number + 1}: ', '')}encode differs from the reference"
    return None
