"""Chapter 01: the character vocabulary with its BOS id, encode/decode, and the
(input, target) training windows.

The contract the checks pin: the vocabulary is the sorted set of corpus characters
(ids 0..K-1) plus BOS = K, so vocab_size = K + 1; `ana` is framed as
[BOS a n a BOS] (5 ids, 4 scored positions, the last target being the closing BOS);
a window holds positions = min(block_size, len(ids) - 1) pairs from position 0 on;
an unknown character is a ValueError that names it; decode drops BOS.
"""

from __future__ import annotations

import string

import torch

from grader.checks._api import Task, check, exception_name, first_difference, kind_of, try_call

CHAPTER, TITLE = "01", "Tokens and training windows"

TASKS = [
    Task("build_vocab", "tokenizer", "CharTokenizer.__init__", "the vocabulary and its BOS id"),
    Task("encode", "tokenizer", "CharTokenizer.encode", "characters to ids"),
    Task("decode", "tokenizer", "CharTokenizer.decode", "ids back to text"),
    Task("windows", "tokenizer", "training_windows", "(input, target) training windows"),
]

SMALL_CORPUS = ["ana", "bob", "emma"]  # chars a b e m n o -> ids 0..5, BOS = 6
PANGRAM = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"]

# --------------------------------------------------------------------- helpers
# Probes run in the sandbox: they turn whatever the student's code returned or raised
# into plain data. Judges run in the grader on that data.


def _plain_ints(value):
    """A list of ints from a list/tuple/1-D tensor of integers, else a short repr."""
    if isinstance(value, torch.Tensor):
        if value.dim() != 1 or value.is_floating_point() or value.is_complex():
            return {"unreadable": f"a tensor of shape {list(value.shape)} and dtype {value.dtype}"}
        return [int(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            if isinstance(v, torch.Tensor) and v.dim() == 0 and not v.is_floating_point():
                v = int(v.item())
            if isinstance(v, bool) or not isinstance(v, int):
                return {"unreadable": f"a {type(value).__name__} holding {type(v).__name__} values, not ints"}
            out.append(int(v))
        return out
    return {"unreadable": f"a {type(value).__name__}, not a list of ints"}


def _raised_text(raised: dict) -> str:
    return exception_name(raised)


def _random_corpus(g):
    pool = list(string.ascii_lowercase + string.ascii_uppercase + string.digits + " .-'") + list("éßüñøæ")
    order = torch.randperm(len(pool), generator=g).tolist()
    size = int(torch.randint(3, 30, (1,), generator=g))
    alphabet = [pool[i] for i in order[:size]]
    documents = []
    for _ in range(int(torch.randint(3, 12, (1,), generator=g))):
        length = int(torch.randint(0, 9, (1,), generator=g))
        documents.append("".join(alphabet[i] for i in torch.randint(0, size, (length,), generator=g).tolist()))
    documents.append("".join(alphabet))  # every character of the alphabet occurs somewhere
    shuffled = torch.randperm(len(documents), generator=g).tolist()
    return [documents[i] for i in shuffled], alphabet


# ---------------------------------------------------------------- build_vocab


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


def _vocab_problem(out, corpus, hidden=False) -> "str | None":
    """What is wrong with the vocabulary built from corpus (hidden: say it without
    printing characters of the corpus)."""
    missing = [name for name in ("chars", "stoi", "bos_id") if out.get(name) is None]
    if missing:
        return (f"build_vocab must set self.{', self.'.join(missing)}: chars is the sorted list of corpus "
                f"characters, stoi maps each character to its id, bos_id is len(chars)")
    chars, stoi, bos = out["chars"], out["stoi"], out["bos_id"]
    if isinstance(chars, dict) or isinstance(stoi, dict):
        return "self.chars should be a list of characters and self.stoi a dict from character to id"
    right = sorted(set("".join(corpus)))
    K = len(right)
    if len(chars) != len(set(chars)):
        return "chars lists some characters more than once: the vocabulary is the set of characters, each once"
    if any(not isinstance(c, str) or len(c) != 1 for c in chars):
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
        return ("chars is not in sorted order: ids 0..K-1 go to the characters sorted by code point "
                "(sorted(set(text)))" + ("" if hidden else f", here {right}"))
    stoi = dict((k, v) for k, v in stoi)
    if bos == 0 and all(stoi.get(c) == i + 1 for i, c in enumerate(chars)):
        return f"BOS takes id 0 and shifts the characters to 1..K; in this course the characters are 0..K-1 and BOS is K = {K if not hidden else 'len(chars)'}"
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
            return f"bos_id is len(chars) + 1; BOS is the id right after the characters: bos_id = len(chars) = {K if not hidden else 'K'}"
        return "bos_id should be the number of characters, len(chars)" + ("" if hidden else f" = {K}, got {bos}")
    if out["vocab_size"] != K + 1:
        return "vocab_size should be len(chars) + 1 (the characters and BOS)" + (
            "" if hidden else f" = {K + 1}, got " + (str(out["vocab_size"]) if isinstance(out["vocab_size"], int)
                                                       else "something else"))
    return None


def judge_vocab(out, inputs, expected):
    return _vocab_problem(out, inputs["corpus"])


def judge_vocab_pangram(out, inputs, expected):
    if problem := _vocab_problem(out, inputs["corpus"]):
        return f"a corpus with all 26 lowercase letters: {problem}"
    if out["vocab_size"] != 27 or out["bos_id"] != 26:
        return "26 letters give vocab_size 27 and bos_id 26"
    return None


def judge_vocab_reference(out, inputs, expected):
    if problem := _vocab_problem(out, inputs["corpus"], hidden=True):
        return f"for a random corpus: {problem}"
    if out["chars"] != expected["chars"] or out["bos_id"] != expected["bos_id"]:
        return "for a random corpus the vocabulary differs from the reference"
    return None


def _random_vocab_inputs(g):
    corpus, _ = _random_corpus(g)
    return {"corpus": corpus}


def _expect_vocab(ref, inputs):
    tok = ref.tokenizer.CharTokenizer(list(inputs["corpus"]))
    return {"chars": list(tok.chars), "bos_id": tok.bos_id}


# --------------------------------------------------------------------- encode


def probe_encode(ns, corpus, texts):
    tok = ns.tokenizer.CharTokenizer(list(corpus))
    results = []
    for text in texts:
        ids = try_call(tok.encode, text)
        if "value" in ids:
            ids["value"] = _plain_ints(ids["value"])
        document = try_call(tok.encode_document, text)
        if "value" in document:
            document["value"] = _plain_ints(document["value"])
        round_trip = None
        if isinstance(ids.get("value"), list):
            round_trip = try_call(tok.decode, ids["value"])
        results.append({"ids": ids, "document": document, "round_trip": round_trip})
    return {"results": results, "bos_id": tok.bos_id, "stoi": [[k, int(v)] for k, v in tok.stoi.items()]}


def _encode_problem(result, text, stoi, bos, hidden=False) -> "str | None":
    said = "a random text" if hidden else f"encode({text!r})"
    right = [stoi[c] for c in text]
    ids = result["ids"]
    if "raised" in ids:
        return f"{said} raised {_raised_text(ids['raised'])}"
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


def judge_encode_ana(out, inputs, expected):
    stoi, bos = dict(out["stoi"]), out["bos_id"]
    result = out["results"][0]
    if problem := _encode_problem(result, "ana", stoi, bos):
        return problem
    document = result["document"]
    if "raised" in document:
        return f"encode_document('ana') raised {_raised_text(document['raised'])}"
    framed = [bos, stoi["a"], stoi["n"], stoi["a"], bos]
    if document["value"] != framed:
        return f"encode_document('ana') should be [BOS a n a BOS] = {framed} (5 ids), got {document['value']}"
    return None


def judge_encode_round_trip(out, inputs, expected):
    stoi, bos = dict(out["stoi"]), out["bos_id"]
    for text, result in zip(inputs["texts"], out["results"]):
        if problem := _encode_problem(result, text, stoi, bos):
            return problem
        decoded = result["round_trip"]
        if decoded is None or "raised" in decoded:
            return f"decode(encode({text!r})) raised {_raised_text(decoded['raised'])}" if decoded else \
                f"encode({text!r}) did not give a list of ids"
        if decoded["value"] != text:
            return f"decode(encode({text!r})) did not give the text back: {first_difference(decoded['value'], text)}"
    return None


def judge_encode_reference(out, inputs, expected):
    stoi, bos = dict(out["stoi"]), out["bos_id"]
    for number, (text, result, right) in enumerate(zip(inputs["texts"], out["results"], expected)):
        if problem := _encode_problem(result, text, stoi, bos, hidden=True):
            return f"random text {number + 1}: {problem}"
        if result["ids"]["value"] != right:
            return f"random text {number + 1}: encode differs from the reference"
    return None


def _random_encode_inputs(g):
    corpus, alphabet = _random_corpus(g)
    texts = []
    for _ in range(5):
        length = int(torch.randint(0, 15, (1,), generator=g))
        texts.append("".join(alphabet[i] for i in torch.randint(0, len(alphabet), (length,), generator=g).tolist()))
    return {"corpus": corpus, "texts": texts}


def _expect_encode(ref, inputs):
    tok = ref.tokenizer.CharTokenizer(list(inputs["corpus"]))
    return [tok.encode(text) for text in inputs["texts"]]


def probe_encode_unknown(ns, corpus, texts):
    tok = ns.tokenizer.CharTokenizer(list(corpus))
    results = []
    for text in texts:
        attempt = try_call(tok.encode, text)
        if "value" in attempt:
            attempt["value"] = _plain_ints(attempt["value"])
        results.append(attempt)
    return {"results": results, "stoi": [[k, int(v)] for k, v in tok.stoi.items()]}


def judge_encode_unknown(out, inputs, expected):
    stoi = dict(out["stoi"])
    for text, unknown, result in zip(inputs["texts"], inputs["_unknown"], out["results"]):
        said = f"encode({text!r})"
        if "value" in result:
            ids = result["value"]
            known = [stoi[c] for c in text if c in stoi]
            if ids == known:
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


# --------------------------------------------------------------------- decode


def probe_decode(ns, corpus, id_lists):
    tok = ns.tokenizer.CharTokenizer(list(corpus))
    return {"results": [try_call(tok.decode, list(ids)) for ids in id_lists],
            "chars": list(tok.chars), "bos_id": tok.bos_id}


def _decode_problem(result, ids, chars, bos, hidden=False) -> "str | None":
    said = "decode of random ids" if hidden else f"decode({ids})"
    right = "".join(chars[i] for i in ids if i != bos)
    if "raised" in result:
        raised = result["raised"]
        if raised["type"] == "IndexError" and bos in ids:
            return (f"{said} raised IndexError: BOS (id {bos if not hidden else 'K'}) has no character in chars; "
                    "decode drops BOS ids")
        return f"{said} raised {_raised_text(raised)}"
    text = result["value"]
    if not isinstance(text, str):
        return f"decode should return a str, got {type(text).__name__}"
    if text == right:
        return None
    if bos in ids:
        cut = ids.index(bos)
        if text == "".join(chars[i] for i in ids[:cut]) and cut < len(ids) - 1:
            return f"{said} stops at the first BOS; drop every BOS id and keep the characters around them"
        if len(text) > len(right) and all(ch in text for ch in right):
            return f"{said} keeps something for BOS; BOS ids are dropped, so decode(encode_document(s)) == s"
    if hidden:
        return f"{said} differs from the reference"
    return f"{said} should give {right!r}; {first_difference(text, right)}"


def judge_decode(out, inputs, expected):
    for ids, result in zip(inputs["id_lists"], out["results"]):
        if problem := _decode_problem(result, ids, out["chars"], out["bos_id"]):
            return problem
    return None


def judge_decode_reference(out, inputs, expected):
    for number, (ids, result, right) in enumerate(zip(inputs["id_lists"], out["results"], expected)):
        if problem := _decode_problem(result, ids, out["chars"], out["bos_id"], hidden=True):
            return f"random id list {number + 1}: {problem}"
        if result["value"] != right:
            return f"random id list {number + 1}: decode differs from the reference"
    return None


def _random_decode_inputs(g):
    corpus, alphabet = _random_corpus(g)
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


# -------------------------------------------------------------------- windows


def probe_decode_bad(ns, corpus, id_lists):
    tok = ns.tokenizer.CharTokenizer(list(corpus))
    return {"results": [try_call(tok.decode, list(ids)) for ids in id_lists], "vocab_size": len(tok.chars) + 1}


def judge_decode_bad(out, inputs, expected):
    V = out["vocab_size"]
    for ids, result in zip(inputs["id_lists"], out["results"]):
        bad = next(i for i in ids if not 0 <= i < V)
        if "raised" not in result:
            kind = "a negative id reads a character from the end of chars" if bad < 0 else "nothing stopped it"
            return (f"decode({ids}) returned {kind_of(result['value'])} although id {bad} is outside the vocabulary "
                    f"[0, {V}) ({kind}): raise a ValueError")
        if not result["raised"]["value_error"]:
            return (f"decode({ids}) raised {_raised_text(result['raised'])}: an id outside the vocabulary [0, {V}) "
                    f"should raise a ValueError (check the range before looking the id up)")
    return None


def probe_windows_short(ns, documents, block_size):
    return [try_call(ns.tokenizer.training_windows, list(ids), block_size) for ids in documents]


def judge_windows_short(out, inputs, expected):
    for ids, result in zip(inputs["documents"], out):
        if "raised" not in result:
            return (f"training_windows({ids}, {inputs['block_size']}) returned {kind_of(result['value'])}: a "
                    f"document with fewer than 2 ids has no (input, target) pair; raise a ValueError")
        if not result["raised"]["value_error"]:
            return (f"training_windows({ids}, {inputs['block_size']}) raised {_raised_text(result['raised'])}: a "
                    f"document with fewer than 2 ids should raise a ValueError")
    return None


def probe_windows(ns, cases):
    results = []
    for ids, block_size in cases:
        attempt = try_call(ns.tokenizer.training_windows, list(ids), block_size)
        if "value" in attempt:
            value = attempt["value"]
            if isinstance(value, (tuple, list)) and len(value) == 2:
                attempt["value"] = [_plain_ints(value[0]), _plain_ints(value[1])]
            else:
                attempt["value"] = {"unreadable": f"a {type(value).__name__}, not a pair (inputs, targets)"}
        results.append(attempt)
    return results


def _window_mistakes(ids, block_size):
    L = len(ids)
    p = min(block_size, L - 1)
    mistakes = [
        ("positions = min(block_size, len(ids)) counts the last id, which has no next token: "
         "positions = min(block_size, len(ids) - 1)",
         [ids[: min(block_size, L)], ids[1 : min(block_size, L) + 1]]),
        ("the window ignores block_size: a document longer than the context loses the pairs past "
         "the window (positions = min(block_size, len(ids) - 1))", [ids[: L - 1], ids[1:]]),
        ("the window is one position short: positions = min(block_size, len(ids) - 1), not one less",
         [ids[: p - 1], ids[1:p]]),
        ("the targets are not shifted: targets[p] must be the next id, ids[p + 1]", [ids[:p], ids[:p]]),
        ("inputs and targets are swapped: inputs = ids[:positions], targets = ids[1:positions + 1]",
         [ids[1 : p + 1], ids[:p]]),
        ("the window takes the last positions of the document; it starts at position 0 (the opening BOS)",
         [ids[L - 1 - p : L - 1], ids[L - p :]]),
    ]
    right = [ids[:p], ids[1 : p + 1]]
    return [(text, wrong) for text, wrong in mistakes if wrong != right]


def _windows_problem(result, ids, block_size, hidden=False) -> "str | None":
    L, p = len(ids), min(block_size, len(ids) - 1)
    said = ("a random document" if hidden else f"len(ids)={L}, block_size={block_size}")
    if "raised" in result:
        return f"{said}: training_windows raised {_raised_text(result['raised'])}"
    value = result["value"]
    if isinstance(value, dict):
        return "training_windows should return (inputs, targets), two lists of ids; got something else"
    inputs, targets = value
    for part, name in ((inputs, "inputs"), (targets, "targets")):
        if isinstance(part, dict):
            return f"{name} should be a list of ids, got something else"
    if [inputs, targets] == [ids[:p], ids[1 : p + 1]]:
        return None
    for text, wrong in _window_mistakes(ids, block_size):
        if [inputs, targets] == wrong:
            return f"{said}: {text}"
    if len(inputs) != len(targets):
        return f"{said}: {len(inputs)} inputs but {len(targets)} targets; every input position has one target"
    if len(inputs) != p:
        return (f"{said}: {len(inputs)} positions, expected min(block_size, len(ids) - 1)"
                + ("" if hidden else f" = {p}"))
    return f"{said}: inputs should be ids[:{p}] and targets ids[1:{p + 1}]" if not hidden else \
        f"{said}: inputs should be ids[:positions] and targets ids[1:positions + 1]"


def judge_windows_ana(out, inputs, expected):
    (ids, block_size), = inputs["cases"]
    if problem := _windows_problem(out[0], ids, block_size):
        return f"'ana' = [BOS a n a BOS]: {problem}"
    return None


def judge_windows(out, inputs, expected):
    for (ids, block_size), result in zip(inputs["cases"], out):
        if problem := _windows_problem(result, ids, block_size):
            return problem
    return None


def judge_windows_reference(out, inputs, expected):
    for number, ((ids, block_size), result, right) in enumerate(zip(inputs["cases"], out, expected)):
        if problem := _windows_problem(result, ids, block_size, hidden=True):
            return f"random document {number + 1}: {problem}"
        if result["value"] != right:
            return f"random document {number + 1}: the windows differ from the reference"
    return None


def _document(length, bos=27, first=100):
    """BOS-framed ids whose inner ids are all distinct, so any shift shows."""
    return [bos] + list(range(first, first + length - 2)) + [bos] if length >= 2 else [bos] * length


POSITION_CASES = [(2, 8), (5, 3), (5, 4), (5, 5), (9, 8), (10, 8), (17, 16), (12, 4), (3, 1)]


def _random_windows_inputs(g):
    cases = []
    for _ in range(8):
        length = int(torch.randint(2, 40, (1,), generator=g))
        block_size = int(torch.randint(1, 24, (1,), generator=g))
        ids = torch.randint(0, 30, (length,), generator=g).tolist()
        cases.append([ids, block_size])
    return {"cases": cases}


def _expect_windows(ref, inputs):
    return [[list(part) for part in ref.tokenizer.training_windows(list(ids), bs)] for ids, bs in inputs["cases"]]


# ----------------------------------------------------------------------- checks

CHECKS = [
    check("ch01.build_vocab.sorted_characters", "build_vocab", 2,
          "['emma', 'olivia', 'ava', 'noah'] gives chars = the sorted distinct characters, "
          "stoi[chars[i]] = i, bos_id = 9, vocab_size = 10",
          probe_vocab, judge_vocab, inputs={"corpus": ["emma", "olivia", "ava", "noah"]}),
    check("ch01.build_vocab.names_alphabet", "build_vocab", 2,
          "a corpus with all 26 lowercase letters gives vocab_size 27 (26 letters + BOS) and bos_id 26",
          probe_vocab, judge_vocab_pangram, inputs={"corpus": PANGRAM}),
    check("ch01.build_vocab.every_character_kept", "build_vocab", 1,
          "['Ana Lu', 'bob', 'Zoe'] keeps the space and the capitals: chars = [' ', 'A', 'L', 'Z', 'a', 'b', 'e', "
          "'n', 'o', 'u']",
          probe_vocab, judge_vocab, inputs={"corpus": ["Ana Lu", "bob", "Zoe"]}),
    check("ch01.build_vocab.matches_reference", "build_vocab", 2,
          "random corpora (letters, digits, punctuation, accents, empty documents) give the reference vocabulary",
          probe_vocab, judge_vocab_reference, inputs=_random_vocab_inputs, expect=_expect_vocab, hidden=True),
    check("ch01.encode.ana_document", "encode", 2,
          "with corpus ['ana', 'bob', 'emma'], encode('ana') = [0, 4, 0] and encode_document('ana') = "
          "[BOS a n a BOS] = [6, 0, 4, 0, 6]: 5 ids",
          probe_encode, judge_encode_ana, inputs={"corpus": SMALL_CORPUS, "texts": ["ana"]}),
    check("ch01.encode.round_trip", "encode", 1,
          "encode gives one id per character ('' gives []) and decode(encode(s)) == s",
          probe_encode, judge_encode_round_trip,
          inputs={"corpus": SMALL_CORPUS, "texts": ["", "a", "emmabob", "mamamoo", "noon"]}),
    check("ch01.encode.unknown_character", "encode", 2,
          "a character the corpus never had ('#', 'Q') raises a ValueError that names it: "
          "not a KeyError, not a silent skip",
          probe_encode_unknown, judge_encode_unknown,
          inputs={"corpus": SMALL_CORPUS, "texts": ["an#a", "Q"], "_unknown": ["#", "Q"]}),
    check("ch01.encode.matches_reference", "encode", 2,
          "random corpora and texts give the reference ids",
          probe_encode, judge_encode_reference, inputs=_random_encode_inputs, expect=_expect_encode, hidden=True),
    check("ch01.decode.drops_bos", "decode", 2,
          "decode([6, 0, 4, 0, 6]) == 'ana' with BOS = 6: every BOS id is dropped, also one in the middle",
          probe_decode, judge_decode,
          inputs={"corpus": SMALL_CORPUS, "id_lists": [[6, 0, 4, 0, 6], [6], [0, 6, 0], [1, 5, 1, 6]]}),
    check("ch01.decode.round_trip", "decode", 1,
          "decode gives back the text: [] -> '', [2, 3, 3, 0] -> 'emma'",
          probe_decode, judge_decode,
          inputs={"corpus": SMALL_CORPUS, "id_lists": [[], [2, 3, 3, 0], [3, 0, 3, 0, 3, 5, 5], [4]]}),
    check("ch01.decode.bad_id", "decode", 1,
          "an id outside the vocabulary (7 with V = 7, -1) raises a ValueError, not an IndexError or a silent read",
          probe_decode_bad, judge_decode_bad, inputs={"corpus": SMALL_CORPUS, "id_lists": [[0, 7], [-1], [2, 99, 6]]}),
    check("ch01.decode.matches_reference", "decode", 2,
          "random id lists (BOS anywhere) give the reference text",
          probe_decode, judge_decode_reference, inputs=_random_decode_inputs, expect=_expect_decode, hidden=True),
    check("ch01.windows.ana", "windows", 2,
          "'ana' = [BOS a n a BOS] with block_size 16 gives 4 scored positions: inputs [BOS a n a], "
          "targets [a n a BOS] (the last target is the closing BOS)",
          probe_windows, judge_windows_ana, inputs={"cases": [[[6, 0, 4, 0, 6], 16]]}),
    check("ch01.windows.positions", "windows", 2,
          "positions = min(block_size, len(ids) - 1) from position 0 on, for short and long documents "
          "(a long one loses the pairs past the window)",
          probe_windows, judge_windows,
          inputs={"cases": [[_document(length), block_size] for length, block_size in POSITION_CASES]}),
    check("ch01.windows.too_short", "windows", 1,
          "a document with fewer than 2 ids ([] or [BOS]) raises a ValueError: it has no target",
          probe_windows_short, judge_windows_short, inputs={"documents": [[6], []], "block_size": 4}),
    check("ch01.windows.matches_reference", "windows", 2,
          "random documents and block sizes give the reference windows",
          probe_windows, judge_windows_reference, inputs=_random_windows_inputs, expect=_expect_windows,
          hidden=True),
]
