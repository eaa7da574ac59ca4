"""Ids back to text.

The contract the checks pin: decode drops every BOS id, also one in the middle, so
decode(encode_document(s)) == s; an id outside the vocabulary is a ValueError. The right
texts of the public checks' ids are data the kit computed (grader/checks/facts.py).
"""

from __future__ import annotations

from grader.checks._api import Task, check, exception_name, first_difference, kind_of, try_call
from grader.checks.ch01_tokens.common import SMALL_CORPUS
from grader.checks.facts import known_facts

TASKS = [
    Task("decode", "tokenizer", "CharTokenizer.decode", "ids back to text"),
]


def probe_decode(ns, corpus, id_lists):
    tok = ns.tokenizer.CharTokenizer(list(corpus))
    results = []
    for ids in id_lists:
        result = try_call(tok.decode, list(ids))
        if "raised" in result and tok.bos_id in ids:
            # Whether the same ids without BOS decode: then BOS alone made decode raise.
            result["without_bos"] = "value" in try_call(tok.decode, [i for i in ids if i != tok.bos_id])
        results.append(result)
    return {"results": results, "chars": list(tok.chars), "bos_id": tok.bos_id}


def decode_problem(result, ids, facts, bos, hidden=False) -> "str | None":
    """What is wrong with decode(ids); facts: its right text ("text") and, where BOS occurs,
    the text of the ids before the first BOS ("until_bos")."""
    said = "decode of random ids" if hidden else f"decode({ids})"
    right = facts["text"]
    if "raised" in result:
        raised = result["raised"]
        if bos in ids and (raised["type"] in ("IndexError", "KeyError") or result.get("without_bos")):
            return (f"{said} raised {exception_name(raised)}: BOS (id {bos if not hidden else 'K'}) has no character, "
                    "in chars, stoi or any id-to-character table; decode drops BOS ids, so skip them before looking "
                    "an id up or checking its range")
        return f"{said} raised {exception_name(raised)}"
    text = result["value"]
    if not isinstance(text, str):
        return f"decode should return a str, got {type(text).__name__}"
    if text == right:
        return None
    if bos in ids:
        cut = ids.index(bos)
        if text == facts["until_bos"] and cut < len(ids) - 1:
            return f"{said} stops at the first BOS; drop every BOS id and keep the characters around them"
        if len(text) > len(right) and all(ch in text for ch in right) and text != " ".join(right):
            return f"{said} keeps something for BOS; BOS ids are dropped, so decode(encode_document(s)) == s"
    if len(right) > 1 and text == " ".join(right):
        return f"{said} puts a space between the characters; join them with '' (each id is one character)"
    if hidden:
        return f"{said} differs from the reference"
    return f"{said} should give {right!r}; {first_difference(text, right)}"


# One judge for drops_bos and round_trip, declared on its handle after it.
@check("drops_bos", 2,
       "decode([6, 0, 4, 0, 6]) == 'ana' with BOS = 6: every BOS id is dropped, also one in the middle",
       probe=probe_decode, inputs={"corpus": SMALL_CORPUS, "id_lists": [[6, 0, 4, 0, 6], [6], [0, 6, 0], [1, 5, 1, 6]]})
def drops_bos(out, inputs, expected):
    facts = known_facts(inputs)
    for ids, result, said in zip(inputs["id_lists"], out["results"], facts["texts"]):
        if problem := decode_problem(result, ids, said, facts["bos"]):
            return problem
    return None


round_trip = check(
    "round_trip", 1, "decode gives back the text: [] -> '', [2, 3, 3, 0] -> 'emma'",
    probe=probe_decode,
    inputs={"corpus": SMALL_CORPUS, "id_lists": [[], [2, 3, 3, 0], [3, 0, 3, 0, 3, 5, 5], [4]]})(drops_bos)


# ------------------------------------------------------------------- bad ids


def probe_decode_bad(ns, corpus, id_lists):
    tok = ns.tokenizer.CharTokenizer(list(corpus))
    return {"results": [try_call(tok.decode, list(ids)) for ids in id_lists], "vocab_size": len(tok.chars) + 1}


@check("bad_id", 1,
       "an id outside the vocabulary (7 with V = 7, -1) raises a ValueError, not an IndexError or a silent read",
       probe=probe_decode_bad, inputs={"corpus": SMALL_CORPUS, "id_lists": [[0, 7], [-1], [2, 99, 6]]})
def bad_id(out, inputs, expected):
    V = out["vocab_size"]
    for ids, result in zip(inputs["id_lists"], out["results"]):
        bad = next(i for i in ids if not 0 <= i < V)
        if "raised" not in result:
            kind = "a negative id reads a character from the end of chars" if bad < 0 else "nothing stopped it"
            return (f"decode({ids}) returned {kind_of(result['value'])} although id {bad} is outside the vocabulary "
                    f"[0, {V}) ({kind}): raise a ValueError")
        if not result["raised"]["value_error"]:
            return (f"decode({ids}) raised {exception_name(result['raised'])}: an id outside the vocabulary [0, {V}) "
                    f"should raise a ValueError (check the range before looking the id up)")
    return None
