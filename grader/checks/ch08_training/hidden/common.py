"""What chapter 08's hidden modules share: random documents, and a document's training
windows (chapter 01's contract), which the kit's oracles build batches and scores from."""

from __future__ import annotations

import torch


def random_docs(g, count, alphabet="abcdef"):
    docs = []
    for _ in range(count):
        length = int(torch.randint(1, 11, (1,), generator=g))
        docs.append("".join(alphabet[int(i)] for i in torch.randint(0, len(alphabet), (length,), generator=g)))
    if not set(alphabet) <= set("".join(docs)):
        docs.append(alphabet)
    return docs


def windows_of(ids, block_size):
    positions = min(block_size, len(ids) - 1)
    return list(ids[:positions]), list(ids[1:positions + 1])
