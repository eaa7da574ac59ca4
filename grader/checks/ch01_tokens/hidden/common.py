"""What the tokenizer's hidden modules share: random corpora, and the vocabulary, ids
and text the contract fixes, which the judges compare with (on the public checks'
inputs, as the data the kit writes into facts.json)."""

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


def vocabulary(corpus) -> tuple[list[str], dict[str, int], int]:
    """(chars, stoi, BOS id) that the contract fixes for `corpus`. The encode and decode
    judges work from these, never from the chars or stoi the submission reports: its
    own code may have rewritten them to match whatever it returned."""
    chars = sorted({ch for document in corpus for ch in document})
    return chars, dict(zip(chars, range(len(chars)))), len(chars)


def encode_facts(corpus, texts):
    """BOS, and per text its ids and its BOS-framed document."""
    _, stoi, bos = vocabulary(corpus)
    ids = [[stoi[c] for c in text] for text in texts]
    return {"bos": bos, "ids": ids, "documents": [[bos, *row, bos] for row in ids]}


def decode_facts(corpus, id_lists):
    """BOS, and per list of ids its text and, where BOS occurs, the text before the first BOS."""
    chars, _, bos = vocabulary(corpus)
    return {"bos": bos, "texts": [{"text": "".join(chars[i] for i in ids if i != bos),
                                   "until_bos": "".join(chars[i] for i in ids[:ids.index(bos)]) if bos in ids else None}
                                  for ids in id_lists]}
