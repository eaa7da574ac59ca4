"""The hidden checks of grader/checks/ch01_tokens/build_vocab/__init__.py."""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.ch01_tokens.hidden.common import random_corpus, vocabulary
from grader.checks.ch01_tokens.build_vocab import (
    every_character_kept, names_alphabet, probe_vocab, sorted_characters, vocab_problem,
)
from grader.checks.facts import facts_for


@facts_for(sorted_characters, names_alphabet, every_character_kept)
def public_vocab_facts(ref, inputs):
    return {"chars": vocabulary(inputs["corpus"])[0]}


def _random_vocab_inputs(g):
    corpus, _ = random_corpus(g)
    return {"corpus": corpus}


def _expect_vocab(ref, inputs):
    tok = ref.tokenizer.CharTokenizer(list(inputs["corpus"]))
    return {"chars": list(tok.chars), "bos_id": tok.bos_id}


@check("matches_reference", 2,
       "random corpora (letters, digits, punctuation, accents, empty documents) give the reference vocabulary",
       probe=probe_vocab, inputs=_random_vocab_inputs, expect=_expect_vocab, hidden=True)
def matches_reference(out, inputs, expected):
    if problem := vocab_problem(out, inputs["corpus"], vocabulary(inputs["corpus"])[0], hidden=True):
        return f"for a random corpus: {problem}"
    if out["chars"] != expected["chars"] or out["bos_id"] != expected["bos_id"]:
        return "for a random corpus the vocabulary differs from the reference"
    return None
