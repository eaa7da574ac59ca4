"""Characters to ids, and a document framed by BOS.

The contract the checks pin: encode gives one id per character (its index in chars);
encode_document frames `ana` as [BOS a n a BOS] (5 ids); an unknown character is a
ValueError that names it. The right ids of the public checks' texts are data the kit
computed (grader/checks/facts.py).
"""

from __future__ import annotations

from grader.checks._api import Task, check, exception_name, first_difference, try_call
from grader.checks.ch01_tokens.common import SMALL_CORPUS, plain_ints
from grader.checks.facts import known_facts

TASKS = [
    Task("encode", "tokenizer", "CharTokenizer.encode", "characters to ids"),
]


def probe_encode(ns, corpus, texts):
    tok = ns.tokenizer.CharTokenizer(list(corpus))
    results = []
    for text in texts:
        ids = try_call(tok.encode, text)
        if "value" in ids:
            ids["value"] = plain_ints(ids["value"])
        document = try_call(tok.encode_document, text)
        if "value" in document:
            document["value"] = plain_ints(document["value"])
        round_trip = None
        if isinstance(ids.get("value"), list):
            round_trip = try_call(tok.decode, ids["value"])
        results.append({"ids": ids, "document": document, "round_trip": round_trip})
    return {"results": results, "bos_id": tok.bos_id, "stoi": [[k, int(v)] for k, v in tok.stoi.items()]}


def encode_problem(result, text, right, bos, hidden=False) -> "str | None":
    """What is wrong with encode(text), whose right ids are `right`."""
    said = "a random text" if hidden else f"encode({text!r})"
    ids = result["ids"]
    if "raised" in ids:
        return f"{said} raised {exception_name(ids['raised'])}"
    ids = ids["value"]
    if isinstance(ids, dict):
        return "encode should return a list of ints, got something else"
    if ids == right:
        return None
    if ids[:1] == [bos] and ids[1:] in (right, right + [bos]) or ids[-1:] == [bos] and ids[:-1] == right:
        return (f"{said} includes BOS: encode returns only the characters' ids, "
                "and encode_document adds the BOS on both sides")
    if len(ids) == len(right) and all(i == r + 1 for i, r in zip(ids, right)):
        return f"{said} gives every id one too high: characters take ids 0..K-1 (BOS is K)"
    if len(ids) != len(right):
        if hidden:
            return f"{said} gives a different number of ids than it has characters: one id per character"
        return f"{said} gives {len(ids)} ids for {len(text)} characters: one id per character"
    if hidden:
        first = next(p for p, (i, r) in enumerate(zip(ids, right)) if i != r)
        return f"{said} gives wrong ids (first at index {first}): each character's id is its index in chars"
    return f"{said} should give {right}, got {ids}"


@check("ana_document", 2,
       "with corpus ['ana', 'bob', 'emma'], encode('ana') = [0, 4, 0] and encode_document('ana') = "
       "[BOS a n a BOS] = [6, 0, 4, 0, 6]: 5 ids",
       probe=probe_encode, runs_later=("decode",), inputs={"corpus": SMALL_CORPUS, "texts": ["ana"]})
def ana_document(out, inputs, expected):
    facts = known_facts(inputs)
    bos = facts["bos"]
    result = out["results"][0]
    if problem := encode_problem(result, "ana", facts["ids"][0], bos):
        return problem
    document = result["document"]
    if "raised" in document:
        return f"encode_document('ana') raised {exception_name(document['raised'])}"
    framed = facts["documents"][0]
    if document["value"] != framed:
        return f"encode_document('ana') should be [BOS a n a BOS] = {framed} (5 ids), got {document['value']}"
    return None


@check("round_trip", 1, "encode gives one id per character ('' gives []) and decode(encode(s)) == s",
       probe=probe_encode, runs_later=("decode",),
       inputs={"corpus": SMALL_CORPUS, "texts": ["", "a", "emmabob", "mamamoo", "noon"]})
def round_trip(out, inputs, expected):
    facts = known_facts(inputs)
    for text, result, right in zip(inputs["texts"], out["results"], facts["ids"]):
        if problem := encode_problem(result, text, right, facts["bos"]):
            return problem
        decoded = result["round_trip"]
        if decoded is None or "raised" in decoded:
            return f"decode(encode({text!r})) raised {exception_name(decoded['raised'])}" if decoded else \
                f"encode({text!r}) did not give a list of ids"
        if decoded["value"] != text:
            return f"decode(encode({text!r})) did not give the text back: {first_difference(decoded['value'], text)}"
    return None


# ------------------------------------------------------------ unknown character


def probe_encode_unknown(ns, corpus, texts):
    tok = ns.tokenizer.CharTokenizer(list(corpus))
    results = []
    for text in texts:
        attempt = try_call(tok.encode, text)
        if "value" in attempt:
            attempt["value"] = plain_ints(attempt["value"])
        results.append(attempt)
    return {"results": results, "stoi": [[k, int(v)] for k, v in tok.stoi.items()]}


@check("unknown_character", 2,
       "a character the corpus never had ('#', 'Q') raises a ValueError that names it: "
       "not a KeyError, not a silent skip",
       probe=probe_encode_unknown, inputs={"corpus": SMALL_CORPUS, "texts": ["an#a", "Q"], "_unknown": ["#", "Q"]})
def unknown_character(out, inputs, expected):
    facts = known_facts(inputs)
    for text, unknown, result, skipped in zip(inputs["texts"], inputs["_unknown"], out["results"], facts["skipped"]):
        said = f"encode({text!r})"
        if "value" in result:
            ids = result["value"]
            if ids == skipped:
                return (f"{said} returned {ids}: the unknown character {unknown!r} was skipped silently; "
                        f"raise a ValueError that names it")
            return (f"{said} returned {ids} instead of raising: {unknown!r} is not in the vocabulary, so "
                    f"raise a ValueError that names it (no made-up id for it)")
        raised = result["raised"]
        if not raised["value_error"]:
            hint = " (the dictionary lookup failed)" if raised["type"] == "KeyError" else ""
            return (f"{said} raised {exception_name(raised)}{hint}; an unknown character should raise a ValueError "
                    f"that names it")
        if unknown not in raised["message"]:
            return f"{said} raised a ValueError, but its message does not name the unknown character {unknown!r}"
    return None
