"""Task decode: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch01_tokens.decode import bad_id, drops_bos, round_trip
from grader.mutants import mutant, variant

MUTANTS = [
    mutant("decode_keeps_bos", "decode", """
        return "".join(self.chars[i] if i < len(self.chars) else "." for i in ids)
    """, drops_bos, "keeps something for BOS", "BOS decoded as '.' instead of dropped"),
    mutant("decode_indexes_bos", "decode", """
        return "".join(self.chars[i] for i in ids)
    """, drops_bos, "has no character", "BOS looked up in chars (IndexError)"),
    mutant("decode_stops_at_bos", "decode", """
        out = []
        for i in ids:
            if i == self.bos_id:
                break
            out.append(self.chars[i])
        return "".join(out)
    """, drops_bos, "stops at the first BOS", "decoding stops at the first BOS"),
    mutant("decode_no_range_check", "decode", """
        return "".join(self.chars[int(i)] for i in ids if int(i) != self.bos_id)
    """, bad_id, "outside the vocabulary", "an out-of-range id read from the end of chars"),
    mutant("decode_itos_key_error", "decode", """
        itos = {i: ch for i, ch in enumerate(self.chars)}
        return "".join(itos[i] for i in ids)
    """, drops_bos, "BOS (id 6)", "an id → character dict with no entry for BOS: KeyError"),
    mutant("decode_range_check_before_bos", "decode", """
        out = []
        for i in ids:
            if not 0 <= i < len(self.chars):
                raise ValueError(f"id {i} is outside the vocabulary")
            out.append(self.chars[i])
        return "".join(out)
    """, drops_bos, "BOS (id 6)", "the range check rejects BOS, which decode should drop"),
    mutant("decode_joined_with_spaces", "decode", """
        return " ".join(self.chars[int(i)] for i in ids if int(i) != self.bos_id)
    """, round_trip, "space", "characters joined with spaces, as a word tokenizer joins words"),
]

VARIANTS = [
    variant("decode_itos_dict", "decode", """
        itos = dict(enumerate(self.chars))
        kept = [int(i) for i in ids if int(i) != self.bos_id]
        if any(i not in itos for i in kept):
            raise ValueError("an id is outside the vocabulary")
        return "".join(itos[i] for i in kept)
    """, "an id → character dict, BOS filtered out, a membership test for the range"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    '`decode` stopping at the first BOS': ('decode_stops_at_bos',),
    '`decode` of an id outside the vocabulary': ('decode_no_range_check',),
    '`decode` looking BOS up in an id-to-character table': ('decode_itos_key_error',),
    'rejecting it with the range check': ('decode_range_check_before_bos',),
    'Joining the decoded characters with spaces': ('decode_joined_with_spaces',),
}
