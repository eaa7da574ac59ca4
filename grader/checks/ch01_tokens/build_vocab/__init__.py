"""The character vocabulary and its BOS id.

The contract the checks pin: the vocabulary is the sorted set of corpus characters
(ids 0..K-1) plus BOS = K, so vocab_size = K + 1. The right characters of the public
checks' corpora are data the kit computed (grader/checks/facts.py).
"""

from __future__ import annotations

import torch

from grader.checks._api import Task, check, constant
from grader.checks.facts import known_facts

TASKS = [
    Task("build_vocab", "tokenizer", "CharTokenizer.__init__", "the vocabulary and its BOS id"),
]

PANGRAM = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"]


def probe_vocab(ns, corpus):
    tok = ns.tokenizer.CharTokenizer(list(corpus))
    out = {"chars": None, "stoi": None, "bos_id": None, "vocab_size": None}
    chars = getattr(tok, "chars", None)
    if chars is not None:
        try:
            out["chars"] = [c if isinstance(c, str) else repr(c) for c in list(chars)]
        except TypeError:
            out["chars"] = {"unreadable": type(chars).__name__}
    stoi = getattr(tok, "stoi", None)
    if stoi is not None:
        try:
            out["stoi"] = [[str(k), int(v)] for k, v in dict(stoi).items()]
        except (TypeError, ValueError):
            out["stoi"] = {"unreadable": type(stoi).__name__}
    bos = getattr(tok, "bos_id", None)
    out["bos_id"] = int(bos) if isinstance(bos, int) or (isinstance(bos, torch.Tensor) and bos.numel() == 1) else (
        None if bos is None else repr(bos)[:80])
    try:
        out["vocab_size"] = int(tok.vocab_size)
    except Exception as error:  # noqa: BLE001
        out["vocab_size"] = f"{type(error).__name__}: {error}"[:200]
    return out


def vocab_problem(out, corpus, right, hidden=False) -> "str | None":
    """What is wrong with the vocabulary built from corpus, whose right characters are
    `right` (hidden: say it without printing characters of the corpus)."""
    missing = [name for name in ("chars", "stoi", "bos_id") if out.get(name) is None]
    if missing:
        return (f"build_vocab must set self.{', self.'.join(missing)}: chars is the sorted list of corpus "
                f"characters, stoi maps each character to its id, bos_id is len(chars)")
    chars, stoi, bos = out["chars"], out["stoi"], out["bos_id"]
    if isinstance(chars, dict) or isinstance(stoi, dict):
        return "self.chars should be a list of characters and self.stoi a dict from character to id"
    K = len(right)
    if len(chars) != len(set(chars)):
        return "chars lists some characters more than once: the vocabulary is the set of characters, each once"
    if any(not isinstance(c, str) or len(c) != 1 for c in chars):
        if all(isinstance(c, str) for c in chars) and set(chars) == set(corpus):
            return ("chars holds whole documents, the set of the corpus's documents: the vocabulary is the set of "
                    "the characters they are made of")
        return "every entry of chars should be one character of the corpus (special tokens get no entry; BOS is only an id)"
    if set(chars) != set(right):
        extra, lost = set(chars) - set(right), set(right) - set(chars)
        if lost and all(c.isspace() for c in lost) and not extra:
            return ("chars misses the space: whitespace is a character of the corpus like any other and gets its "
                    "own id (sorted(set(text)) keeps it)")
        if lost and all(c.isupper() for c in lost) and {c.lower() for c in lost} <= set(chars):
            return ("chars has no capital letters: the corpus was lowercased, but 'A' and 'a' are different "
                    "characters, each with its own id (sorted(set(text)) keeps the case)")
        if hidden:
            return "chars is not exactly the set of characters that occur in the corpus"
        return (f"chars should hold exactly the corpus characters {right}; "
                + (f"it has extra {sorted(extra)}" if extra else f"it misses {sorted(lost)}"))
    if chars != right:
        return (constant("chars is not in sorted order: ids 0..K-1 go to the characters sorted by code point "
                         "(sorted(set(text)))") + ("" if hidden else f", here {right}"))
    stoi = dict((k, v) for k, v in stoi)
    if bos == 0 and all(stoi.get(c) == i + 1 for i, c in enumerate(chars)):
        return (constant("BOS takes id 0 and shifts the characters to 1..K; in this course the characters are 0..K-1 "
                         "and BOS is K = ") + (str(K) if not hidden else "len(chars)"))
    if set(stoi) != set(chars):
        extra = sorted(set(stoi) - set(chars))
        if extra and not hidden:
            return (f"stoi has {len(extra)} key(s) that are not corpus characters: BOS is an id (bos_id), "
                    f"not a character")
        return "stoi should have exactly one key per character of chars"
    wrong = [c for i, c in enumerate(chars) if stoi[c] != i]
    if wrong:
        return "stoi must map each character to its index in chars (stoi[chars[i]] == i)" + (
            "" if hidden else f"; stoi[{wrong[0]!r}] = {stoi[wrong[0]]}, expected {chars.index(wrong[0])}")
    if not isinstance(bos, int):
        return "bos_id should be an int, got something else"
    if bos != K:
        if bos == K + 1:
            return (constant("bos_id is len(chars) + 1; BOS is the id right after the characters: bos_id = len(chars) = ")
                    + (str(K) if not hidden else "K"))
        return "bos_id should be the number of characters, len(chars)" + ("" if hidden else f" = {K}, got {bos}")
    if out["vocab_size"] != K + 1:
        return "vocab_size should be len(chars) + 1 (the characters and BOS)" + (
            "" if hidden else f" = {K + 1}, got " + (str(out["vocab_size"]) if isinstance(out["vocab_size"], int)
                                                       else "something else"))
    return None


@check("sorted_characters", 2,
       "['emma', 'olivia', 'ava', 'noah'] gives chars = the sorted distinct characters, "
       "stoi[chars[i]] = i, bos_id = 9, vocab_size = 10",
       probe=probe_vocab, inputs={"corpus": ["emma", "olivia", "ava", "noah"]})
def sorted_characters(out, inputs, expected):
    return vocab_problem(out, inputs["corpus"], known_facts(inputs)["chars"])


@check("names_alphabet", 2,
       "a corpus with all 26 lowercase letters gives vocab_size 27 (26 letters + BOS) and bos_id 26",
       probe=probe_vocab, inputs={"corpus": PANGRAM})
def names_alphabet(out, inputs, expected):
    if problem := vocab_problem(out, inputs["corpus"], known_facts(inputs)["chars"]):
        return f"a corpus with all 26 lowercase letters: {problem}"
    if out["vocab_size"] != 27 or out["bos_id"] != 26:
        return "26 letters give vocab_size 27 and bos_id 26"
    return None


# Judged like sorted_characters; declared here, after names_alphabet, to keep the table's order.
every_character_kept = check(
    "every_character_kept", 1,
    "['Ana Lu', 'bob', 'Zoe'] keeps the space and the capitals: chars = [' ', 'A', 'L', 'Z', 'a', 'b', 'e', "
    "'n', 'o', 'u']",
    probe=probe_vocab, inputs={"corpus": ["Ana Lu", "bob", "Zoe"]})(sorted_characters)
