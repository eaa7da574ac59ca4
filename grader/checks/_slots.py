"""The values a diagnosis quotes, typed by where they come from, so that one sentence can
be said to each reader: whole to the student who ran the check, and, once a hidden check
is published, with every value that came from a hidden input or an expected value said in
words instead.

A judge writes its sentence as usual and wraps a quoted value in one of these:

    constant(x)       a figure of the kit itself (eps = 1e-5, "1 - beta1^(t+1)", dim 2)
    own(x)            the student's own file, line or source
    public(x)         a public input or figure, the same for every seed
    hidden(x, words)  a value computed from a hidden input or expected value; published,
                      the words stand in its place ("a call" for "call 3")

The wrapping is invisible: `CheckResult` splits it off (`split`), keeping the plain
sentence as its diagnosis and the slots, each with its place in that sentence, in its
verdict (`"slots"`, grader/run/verdicts.py; a hidden one there keeps its words, not its
value). A number no slot covers counts as hidden and is withheld when published
(grader/run/visible.py), so a value a judge forgets to wrap is never shown by mistake;
it only reads less well.

The marks are characters of Unicode's private use area, framed by a key drawn when the
grader starts, which no submission can know: text the student's code returned, quoted
inside a sentence, cannot pose as a slot. A mark that does not parse is dropped.
"""

from __future__ import annotations

import re
import secrets

KINDS = ("constant", "own", "public", "hidden")
# Published as they stand; "hidden" is published as its words.
KEPT = frozenset({"constant", "own", "public"})

_BASE = 0xE000  # private use area: never a letter, digit or space to any regex of the kit
_OPEN, _WORDS, _CLOSE = chr(_BASE), chr(_BASE + 1), chr(_BASE + 2)
_KIND = {kind: chr(_BASE + 16 + number) for number, kind in enumerate(KINDS)}
_KEY = "".join(chr(_BASE + 256 + secrets.randbelow(256)) for _ in range(12))
_ANY_MARK = re.compile("[\ue000-\ue1ff]")
_SLOT = re.compile(f"{_OPEN}{_KEY}([{''.join(_KIND.values())}])([^\ue000-\ue1ff]*?)"
                   f"(?:{_WORDS}([^\ue000-\ue1ff]*?))?{_CLOSE}{_KEY}")
_KIND_OF = {mark: kind for kind, mark in _KIND.items()}


def _mark(kind: str, value, words: str = "") -> str:
    text = _ANY_MARK.sub("", str(value))
    tail = f"{_WORDS}{_ANY_MARK.sub('', words)}" if kind == "hidden" else ""
    return f"{_OPEN}{_KEY}{_KIND[kind]}{text}{tail}{_CLOSE}{_KEY}"


def constant(value) -> str:
    """A figure of the kit itself, the same for every submission and seed."""
    return _mark("constant", value)


def own(value) -> str:
    """The student's own file, line or source."""
    return _mark("own", value)


def public(value) -> str:
    """A public input or figure, the same for every seed."""
    return _mark("public", value)


def hidden(value, words: str) -> str:
    """A value computed from a hidden input or an expected value; `words` stand in its
    place once the check is published ("" to say nothing there)."""
    return _mark("hidden", value, words)


def split(text: str) -> tuple[str, list[dict]]:
    """(the plain sentence, its slots): each slot {"kind", "text", "at"} (and "words" for a
    hidden one), `at` its place in the plain sentence. Marks that do not parse are dropped."""
    if not text or not _ANY_MARK.search(text):
        return text, []
    plain, slots, at = [], [], 0
    for match in _SLOT.finditer(text):
        before = _ANY_MARK.sub("", text[at:match.start()])
        plain.append(before)
        start = sum(map(len, plain))
        value = match.group(2)
        slot = {"kind": _KIND_OF[match.group(1)], "text": value, "at": start}
        if slot["kind"] == "hidden":
            slot["words"] = match.group(3) or ""
        if value:
            slots.append(slot)
        plain.append(value)
        at = match.end()
    plain.append(_ANY_MARK.sub("", text[at:]))
    return "".join(plain), slots


def as_data(slots: "list[dict]") -> "list[dict]":
    """The slots as a verdict keeps them, fit for the student to read: a hidden one keeps
    its place, length and words, never its value."""
    return [{"kind": "hidden", "at": slot["at"], "length": len(slot["text"]), "words": slot.get("words", "")}
            if slot["kind"] == "hidden" else dict(slot) for slot in slots]


def strip(text: str) -> str:
    """The plain sentence alone."""
    return split(text)[0]


def spans(text: str, slots: "list[dict] | None") -> list[tuple[int, int, str]]:
    """(start, end, what is published there) of each slot that still stands where it was
    put in `text`: the value itself for a kept kind, the words for a hidden one. A slot
    that no longer matches the sentence (an older record, a sentence changed after) is
    left out, so its numbers are withheld."""
    found = []
    for slot in slots or ():
        try:
            start, kind = int(slot["at"]), slot["kind"]
            if kind == "hidden":
                end = start + int(slot["length"]) if "length" in slot else start + len(str(slot["text"]))
            else:
                end = start + len(str(slot["text"]))
        except (KeyError, TypeError, ValueError):
            continue
        if kind not in KINDS or end <= start or end > len(text):
            continue
        if kind in KEPT:
            if text[start:end] != str(slot["text"]):
                continue
            found.append((start, end, text[start:end]))
        else:
            found.append((start, end, str(slot.get("words", "…"))))
    return apart(found)


def apart(found: "list[tuple[int, int, str]]") -> "list[tuple[int, int, str]]":
    """The spans in order, none overlapping: of two that overlap, the one that starts
    first (or, starting together, the longer) is kept."""
    kept, end = [], 0
    for span in sorted(found, key=lambda span: (span[0], -span[1])):
        if span[0] >= end:
            kept.append(span)
            end = span[1]
    return kept
