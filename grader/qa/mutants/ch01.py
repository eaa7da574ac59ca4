"""Chapter 01: the mistakes the chapter warns about, and right ways to write it."""

from grader.qa.mutants import mutant, patch, variant

MUTANTS = [
    # The vocabulary
    mutant("vocab_first_seen_order", "build_vocab", patch("""
        - self.chars = sorted(set("".join(documents)))
        + self.chars = list(dict.fromkeys("".join(documents)))
    """), "ch01.build_vocab.sorted_characters", "sorted order", "characters in first-seen order, not sorted"),
    mutant("vocab_bos_zero", "build_vocab", """
        self.chars = sorted(set("".join(documents)))
        self.stoi = {ch: i + 1 for i, ch in enumerate(self.chars)}
        self.bos_id = 0
    """, "ch01.build_vocab.sorted_characters", "BOS takes id 0", "BOS is id 0 and the characters shift to 1..K"),
    mutant("vocab_duplicates", "build_vocab", patch("""
        - self.chars = sorted(set("".join(documents)))
        + self.chars = sorted("".join(documents))
    """), "ch01.build_vocab.sorted_characters", "more than once", "every occurrence kept, not the set"),
    mutant("vocab_bos_one_past", "build_vocab", patch("""
        - self.bos_id = len(self.chars)
        + self.bos_id = len(self.chars) + 1
    """), ("ch01.build_vocab.sorted_characters", "ch01.build_vocab.names_alphabet"), "len(chars) + 1",
       "bos_id = K + 1"),
    mutant("vocab_no_stoi", "build_vocab", patch("""
        - self.stoi = {ch: i for i, ch in enumerate(self.chars)}
        + self.char_to_id = {ch: i for i, ch in enumerate(self.chars)}
    """), "ch01.build_vocab.sorted_characters", "self.stoi", "the char → id map under another name"),
    # encode
    mutant("encode_adds_bos", "encode", """
        return [self.bos_id] + [self.stoi[ch] for ch in text]
    """, "ch01.encode.ana_document", "includes BOS", "encode prepends BOS (doubled in encode_document)"),
    mutant("encode_key_error", "encode", """
        return [self.stoi[ch] for ch in text]
    """, "ch01.encode.unknown_character", "KeyError", "unknown character → KeyError"),
    mutant("encode_skips_unknown", "encode", """
        return [self.stoi[ch] for ch in text if ch in self.stoi]
    """, "ch01.encode.unknown_character", "skipped silently", "unknown character silently skipped"),
    mutant("encode_message_without_char", "encode", """
        if any(ch not in self.stoi for ch in text):
            raise ValueError("the text has a character that is not in the vocabulary")
        return [self.stoi[ch] for ch in text]
    """, "ch01.encode.unknown_character", "does not name", "ValueError that does not name the character"),
    # decode
    mutant("decode_keeps_bos", "decode", """
        return "".join(self.chars[i] if i < len(self.chars) else "." for i in ids)
    """, "ch01.decode.drops_bos", "keeps something for BOS", "BOS decoded as '.' instead of dropped"),
    mutant("decode_indexes_bos", "decode", """
        return "".join(self.chars[i] for i in ids)
    """, "ch01.decode.drops_bos", "has no character", "BOS looked up in chars (IndexError)"),
    mutant("decode_stops_at_bos", "decode", """
        out = []
        for i in ids:
            if i == self.bos_id:
                break
            out.append(self.chars[i])
        return "".join(out)
    """, "ch01.decode.drops_bos", "stops at the first BOS", "decoding stops at the first BOS"),
    # windows
    mutant("windows_len_not_len_minus_1", "windows", """
        positions = min(block_size, len(ids))
        return ids[:positions], ids[1 : positions + 1]
    """, ("ch01.windows.ana", "ch01.windows.positions"), "len(ids) - 1", "positions = min(block_size, len(ids))"),
    mutant("windows_ignore_block_size", "windows", """
        return ids[:-1], ids[1:]
    """, "ch01.windows.positions", "ignores block_size", "long documents not cut to the context"),
    mutant("windows_one_short", "windows", """
        positions = min(block_size, len(ids) - 1) - 1
        return ids[:positions], ids[1 : positions + 1]
    """, ("ch01.windows.ana", "ch01.windows.positions"), "one position short", "one position too few"),
    mutant("windows_targets_not_shifted", "windows", """
        positions = min(block_size, len(ids) - 1)
        return ids[:positions], ids[:positions]
    """, "ch01.windows.ana", "not shifted", "targets equal the inputs"),
    mutant("windows_last_positions", "windows", """
        positions = min(block_size, len(ids) - 1)
        return ids[len(ids) - 1 - positions : -1], ids[len(ids) - positions :]
    """, "ch01.windows.positions", "last positions", "window cut from the end of the document"),
    mutant("vocab_set_not_sorted", "build_vocab", patch("""
        - self.chars = sorted(set("".join(documents)))
        + self.chars = list(set("".join(documents)))
    """), ("ch01.build_vocab.sorted_characters", "ch01.build_vocab.names_alphabet"), "sorted order",
       "chars from a set, never sorted"),
    mutant("vocab_drops_whitespace", "build_vocab", patch("""
        - self.chars = sorted(set("".join(documents)))
        + self.chars = sorted(set("".join(documents).replace(" ", "")))
    """), "ch01.build_vocab.every_character_kept", "space", "whitespace left out of the vocabulary"),
    mutant("vocab_lowercases", "build_vocab", patch("""
        - self.chars = sorted(set("".join(documents)))
        + self.chars = sorted(set("".join(documents).lower()))
    """), "ch01.build_vocab.every_character_kept", "lowercase", "the corpus lowercased"),
    mutant("decode_no_range_check", "decode", """
        return "".join(self.chars[int(i)] for i in ids if int(i) != self.bos_id)
    """, "ch01.decode.bad_id", "outside the vocabulary", "an out-of-range id read from the end of chars"),
    mutant("windows_short_document_silent", "windows", """
        positions = min(block_size, len(ids) - 1)
        return list(ids[:max(positions, 0)]), list(ids[1:max(positions, 0) + 1])
    """, "ch01.windows.too_short", "fewer than 2", "a document with fewer than 2 ids gives empty windows"),
    mutant("windows_inputs_targets_swapped", "windows", patch("""
        - return list(ids[:positions]), list(ids[1 : positions + 1])
        + return list(ids[1 : positions + 1]), list(ids[:positions])
    """), ("ch01.windows.ana", "ch01.windows.positions"), "swapped", "inputs and targets swapped"),
    # Families that arrive with code adapted from well-known implementations
    mutant("decode_itos_key_error", "decode", """
        itos = {i: ch for i, ch in enumerate(self.chars)}
        return "".join(itos[i] for i in ids)
    """, "ch01.decode.drops_bos", "BOS (id 6)", "an id → character dict with no entry for BOS: KeyError"),
    mutant("decode_range_check_before_bos", "decode", """
        out = []
        for i in ids:
            if not 0 <= i < len(self.chars):
                raise ValueError(f"id {i} is outside the vocabulary")
            out.append(self.chars[i])
        return "".join(out)
    """, "ch01.decode.drops_bos", "BOS (id 6)", "the range check rejects BOS, which decode should drop"),
    mutant("decode_joined_with_spaces", "decode", """
        return " ".join(self.chars[int(i)] for i in ids if int(i) != self.bos_id)
    """, "ch01.decode.round_trip", "space", "characters joined with spaces, as a word tokenizer joins words"),
    mutant("encode_unknown_to_bos", "encode", """
        return [self.stoi.get(ch, self.bos_id) for ch in text]
    """, "ch01.encode.unknown_character", "made-up id", "unknown characters mapped to a special id"),
    mutant("vocab_set_of_documents", "build_vocab", patch("""
        - self.chars = sorted(set("".join(documents)))
        + self.chars = sorted(set(documents))
    """), "ch01.build_vocab.sorted_characters", "whole documents", "the set of the documents, not of their characters"),
]

VARIANTS = [
    variant("vocab_loops", "build_vocab", """
        seen = set()
        for document in documents:
            for ch in document:
                seen.add(ch)
        if not seen:
            raise ValueError("the corpus has no characters")
        self.chars = sorted(seen)
        self.stoi = {}
        for i, ch in enumerate(self.chars):
            self.stoi[ch] = i
        self.bos_id = len(self.chars)
    """, "explicit loops instead of set/join and a dict comprehension"),
    variant("encode_try_except", "encode", """
        try:
            return [self.stoi[ch] for ch in text]
        except KeyError as missing:
            raise ValueError(f"unknown character {missing.args[0]!r}") from None
    """, "a comprehension whose KeyError becomes a ValueError naming the character"),
    variant("decode_itos_dict", "decode", """
        itos = dict(enumerate(self.chars))
        kept = [int(i) for i in ids if int(i) != self.bos_id]
        if any(i not in itos for i in kept):
            raise ValueError("an id is outside the vocabulary")
        return "".join(itos[i] for i in kept)
    """, "an id → character dict, BOS filtered out, a membership test for the range"),
    variant("windows_loop_tuples", "windows", """
        n = min(block_size, len(ids) - 1)
        if n < 1:
            raise ValueError("too short")
        xs, ys = [], []
        for p in range(n):
            xs.append(ids[p])
            ys.append(ids[p + 1])
        return tuple(xs), tuple(ys)
    """, "a loop over positions, returning tuples"),
    variant("encode_list_index", "encode", """
        return [self.chars.index(ch) for ch in text]
    """, "list.index in the sorted characters: its ValueError names the character"),
    variant("windows_chunk_then_shift", "windows", """
        chunk = list(ids[: block_size + 1])
        if block_size < 1 or len(chunk) < 2:
            raise ValueError("a window needs at least two ids")
        return chunk[:-1], chunk[1:]
    """, "a chunk of block_size + 1 ids, then inputs chunk[:-1] and targets chunk[1:]"),
    variant("vocab_from_token_map", "build_vocab", """
        vocabulary = {token: number for number, token in enumerate(sorted(set("".join(documents))))}
        if not vocabulary:
            raise ValueError("no characters")
        self.stoi = vocabulary
        self.chars = list(vocabulary)
        self.bos_id = len(vocabulary)
    """, "the token → id map built first, chars read from its keys"),
]

# The lesson's common mistakes (quoted from its README) and the mutants that make them.
LESSON = {
    "BOS as id 0": ("vocab_bos_zero",),
    "`bos_id = len(chars) + 1`": ("vocab_bos_one_past",),
    "`chars` built from a `set` and never sorted": ("vocab_set_not_sorted", "vocab_first_seen_order"),
    "`encode` adding BOS itself": ("encode_adds_bos",),
    "`decode` stopping at the first BOS": ("decode_stops_at_bos",),
    "P = min(block_size, len(ids))": ("windows_len_not_len_minus_1",),
    "Targets equal to the inputs": ("windows_targets_not_shifted",),
    "inputs and targets swapped": ("windows_inputs_targets_swapped",),
    "Taking the *last* block_size positions": ("windows_last_positions",),
    "Dropping the space or lowercasing the corpus": ("vocab_drops_whitespace", "vocab_lowercases"),
    "`decode` of an id outside the vocabulary": ("decode_no_range_check",),
    "a document with fewer than 2 ids": ("windows_short_document_silent",),
    "`decode` looking BOS up in an id-to-character table": ("decode_itos_key_error",),
    "rejecting it with the range check": ("decode_range_check_before_bos",),
    "`chars` built from `set(documents)`": ("vocab_set_of_documents",),
    "Joining the decoded characters with spaces": ("decode_joined_with_spaces",),
    "Mapping an unknown character to a special id": ("encode_unknown_to_bos",),
}
