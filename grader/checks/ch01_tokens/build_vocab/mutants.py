"""Task build_vocab: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch01_tokens.build_vocab import every_character_kept, names_alphabet, sorted_characters
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("vocab_first_seen_order", "build_vocab", patch("""
        - self.chars = sorted(set("".join(documents)))
        + self.chars = list(dict.fromkeys("".join(documents)))
    """), sorted_characters, "sorted order", "characters in first-seen order, not sorted"),
    mutant("vocab_bos_zero", "build_vocab", """
        self.chars = sorted(set("".join(documents)))
        self.stoi = {ch: i + 1 for i, ch in enumerate(self.chars)}
        self.bos_id = 0
    """, sorted_characters, "BOS takes id 0", "BOS is id 0 and the characters shift to 1..K"),
    mutant("vocab_duplicates", "build_vocab", patch("""
        - self.chars = sorted(set("".join(documents)))
        + self.chars = sorted("".join(documents))
    """), sorted_characters, "more than once", "every occurrence kept, not the set"),
    mutant("vocab_bos_one_past", "build_vocab", patch("""
        - self.bos_id = len(self.chars)
        + self.bos_id = len(self.chars) + 1
    """), (sorted_characters, names_alphabet), "len(chars) + 1",
       "bos_id = K + 1"),
    mutant("vocab_no_stoi", "build_vocab", patch("""
        - self.stoi = {ch: i for i, ch in enumerate(self.chars)}
        + self.char_to_id = {ch: i for i, ch in enumerate(self.chars)}
    """), sorted_characters, "self.stoi", "the char → id map under another name"),
    mutant("vocab_set_not_sorted", "build_vocab", patch("""
        - self.chars = sorted(set("".join(documents)))
        + self.chars = list(set("".join(documents)))
    """), (sorted_characters, names_alphabet), "sorted order",
       "chars from a set, never sorted"),
    mutant("vocab_drops_whitespace", "build_vocab", patch("""
        - self.chars = sorted(set("".join(documents)))
        + self.chars = sorted(set("".join(documents).replace(" ", "")))
    """), every_character_kept, "space", "whitespace left out of the vocabulary"),
    mutant("vocab_lowercases", "build_vocab", patch("""
        - self.chars = sorted(set("".join(documents)))
        + self.chars = sorted(set("".join(documents).lower()))
    """), every_character_kept, "lowercase", "the corpus lowercased"),
    mutant("vocab_set_of_documents", "build_vocab", patch("""
        - self.chars = sorted(set("".join(documents)))
        + self.chars = sorted(set(documents))
    """), sorted_characters, "whole documents", "the set of the documents, not of their characters"),
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
    variant("vocab_from_token_map", "build_vocab", """
        vocabulary = {token: number for number, token in enumerate(sorted(set("".join(documents))))}
        if not vocabulary:
            raise ValueError("no characters")
        self.stoi = vocabulary
        self.chars = list(vocabulary)
        self.bos_id = len(vocabulary)
    """, "the token → id map built first, chars read from its keys"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'BOS as id 0': ('vocab_bos_zero',),
    '`bos_id = len(chars) + 1`': ('vocab_bos_one_past',),
    '`chars` built from a `set` and never sorted': ('vocab_set_not_sorted', 'vocab_first_seen_order',),
    'Dropping the space or lowercasing the corpus': ('vocab_drops_whitespace', 'vocab_lowercases',),
    '`chars` built from `set(documents)`': ('vocab_set_of_documents',),
}
