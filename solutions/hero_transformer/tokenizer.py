"""Chapter 01: characters to ids and back, and the (input, target) training windows.

The vocabulary is the sorted set of characters seen in the corpus, plus one extra id,
BOS, that marks both the start and the end of a document: `ana` becomes
[BOS, a, n, a, BOS].
"""

from __future__ import annotations

from typing import Iterable


class CharTokenizer:
    """Ids 0..K-1 are the corpus characters in sorted order; BOS is id K.

    Attributes: chars (the K characters, sorted), stoi (character -> id) and bos_id.
    """

    def __init__(self, documents: Iterable[str]):
        ### BEGIN SOLUTION build_vocab
        self.chars = sorted(set("".join(documents)))
        if not self.chars:
            raise ValueError("the corpus is empty: a tokenizer needs at least one character")
        self.stoi = {ch: i for i, ch in enumerate(self.chars)}
        self.bos_id = len(self.chars)
        ### END SOLUTION

    @property
    def vocab_size(self) -> int:
        return len(self.chars) + 1

    def encode(self, text: str) -> list[int]:
        """The ids of text's characters, without BOS. A character the corpus never
        had raises a ValueError that names it."""
        ### BEGIN SOLUTION encode
        ids = []
        for position, ch in enumerate(text):
            if ch not in self.stoi:
                raise ValueError(
                    f"character {ch!r} at index {position} of {text!r} is not in the vocabulary"
                )
            ids.append(self.stoi[ch])
        return ids
        ### END SOLUTION

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ids; BOS ids are dropped, so decode(encode(s)) == s."""
        ### BEGIN SOLUTION decode
        out = []
        for i in ids:
            i = int(i)
            if i == self.bos_id:
                continue
            if not 0 <= i < len(self.chars):
                raise ValueError(f"id {i} is outside the vocabulary [0, {self.vocab_size})")
            out.append(self.chars[i])
        return "".join(out)
        ### END SOLUTION

    def encode_document(self, text: str) -> list[int]:
        """A whole document framed by BOS on both sides: 'ana' -> [BOS a n a BOS]."""
        return [self.bos_id, *self.encode(text), self.bos_id]


def training_windows(ids: list[int], block_size: int) -> tuple[list[int], list[int]]:
    """The inputs and next-token targets of one document, cut to the context.

    positions = min(block_size, len(ids) - 1): every id but the last has a target,
    and no more than block_size positions fit. inputs[p] predicts targets[p] = ids[p+1].
    """
    ### BEGIN SOLUTION windows
    if block_size <= 0:
        raise ValueError(f"block_size must be positive, got {block_size}")
    positions = min(block_size, len(ids) - 1)
    if positions <= 0:
        raise ValueError(f"a document needs at least 2 ids to give a target, got {len(ids)}")
    return list(ids[:positions]), list(ids[1 : positions + 1])
    ### END SOLUTION
