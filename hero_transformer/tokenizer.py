# Your copy of the course package. Fill in every part that raises
# NotImplementedError; `make check` tells you how each one is doing.
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
        raise NotImplementedError("build_vocab")

    @property
    def vocab_size(self) -> int:
        return len(self.chars) + 1

    def encode(self, text: str) -> list[int]:
        """The ids of text's characters, without BOS. A character the corpus never
        had raises a ValueError that names it."""
        raise NotImplementedError("encode")

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ids; BOS ids are dropped, so decode(encode(s)) == s."""
        raise NotImplementedError("decode")

    def encode_document(self, text: str) -> list[int]:
        """A whole document framed by BOS on both sides: 'ana' -> [BOS a n a BOS]."""
        return [self.bos_id, *self.encode(text), self.bos_id]


def training_windows(ids: list[int], block_size: int) -> tuple[list[int], list[int]]:
    """The inputs and next-token targets of one document, cut to the context.

    positions = min(block_size, len(ids) - 1): every id but the last has a target,
    and no more than block_size positions fit. inputs[p] predicts targets[p] = ids[p+1].
    """
    raise NotImplementedError("windows")
