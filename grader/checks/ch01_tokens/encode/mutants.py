"""Task encode: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch01_tokens.encode import ana_document, unknown_character
from grader.mutants import mutant, variant

MUTANTS = [
    mutant("encode_adds_bos", "encode", """
        return [self.bos_id] + [self.stoi[ch] for ch in text]
    """, ana_document, "includes BOS", "encode prepends BOS (doubled in encode_document)"),
    mutant("encode_key_error", "encode", """
        return [self.stoi[ch] for ch in text]
    """, unknown_character, "KeyError", "unknown character → KeyError"),
    mutant("encode_skips_unknown", "encode", """
        return [self.stoi[ch] for ch in text if ch in self.stoi]
    """, unknown_character, "skipped silently", "unknown character silently skipped"),
    mutant("encode_message_without_char", "encode", """
        if any(ch not in self.stoi for ch in text):
            raise ValueError("the text has a character that is not in the vocabulary")
        return [self.stoi[ch] for ch in text]
    """, unknown_character, "does not name", "ValueError that does not name the character"),
    mutant("encode_unknown_to_bos", "encode", """
        return [self.stoi.get(ch, self.bos_id) for ch in text]
    """, unknown_character, "made-up id", "unknown characters mapped to a special id"),
]

VARIANTS = [
    variant("encode_try_except", "encode", """
        try:
            return [self.stoi[ch] for ch in text]
        except KeyError as missing:
            raise ValueError(f"unknown character {missing.args[0]!r}") from None
    """, "a comprehension whose KeyError becomes a ValueError naming the character"),
    variant("encode_list_index", "encode", """
        return [self.chars.index(ch) for ch in text]
    """, "list.index in the sorted characters: its ValueError names the character"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    '`encode` adding BOS itself': ('encode_adds_bos',),
    'Mapping an unknown character to a special id': ('encode_unknown_to_bos',),
}
