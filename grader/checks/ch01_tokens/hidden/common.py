"""What the tokenizer's hidden checks share: random corpora."""

from __future__ import annotations

import string

import torch


def random_corpus(g):
    """(documents, alphabet): a random alphabet (letters, digits, punctuation, accents)
    and random documents over it, some empty, one holding every character."""
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
