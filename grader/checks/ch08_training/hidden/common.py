"""What chapter 08's hidden checks share: random documents."""

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
