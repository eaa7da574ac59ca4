"""The hidden checks of grader/checks/ch08_training/make_batch/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.ch08_training.hidden.common import windows_of
from grader.checks.ch08_training.make_batch import batch_problem, lesson_example, padding_and_cropping, probe_make_batch
from grader.checks.facts import facts_for


def _laid_out(cells, width, filler, front):
    """One row of `width` cells: `cells` from cell 0 on and `filler` after them, or (front,
    the mistake) `filler` first so that `cells` end in the last cell."""
    gap = [filler] * (width - len(cells))
    return gap + cells if front else cells + gap


def right_batch(documents, block_size, pad_id, front=False):
    """The batch the lesson describes, one document at a time: its windows (chapter 01's
    contract: positions = min(block_size, len(ids) - 1), targets the inputs shifted by
    one), laid out in a row as wide as the longest document's windows, pad_id after them
    and the mask True exactly on the document's own positions. `front`: the same rows
    padded at the front, a known mistake."""
    per_document = [windows_of(ids, block_size) for ids in documents]
    width = max((len(x) for x, _ in per_document), default=0)
    inputs = [_laid_out(x, width, pad_id, front) for x, _ in per_document]
    targets = [_laid_out(y, width, pad_id, front) for _, y in per_document]
    scored = [_laid_out([True] * len(x), width, False, front) for x, _ in per_document]
    return (torch.tensor(inputs, dtype=torch.long), torch.tensor(targets, dtype=torch.long),
            torch.tensor(scored, dtype=torch.bool))


def batch_facts(inputs):
    """What batch_problem compares with: the right batch and the classic wrong ones."""
    documents, block_size, pad_id = inputs["documents"], inputs["block_size"], inputs["pad_id"]
    bos = documents[0][0]
    return {"right": right_batch(documents, block_size, pad_id),
            "front": right_batch(documents, block_size, pad_id, front=True),
            "bos_padded": right_batch(documents, block_size, bos)[0] if pad_id != bos else None}


@facts_for(lesson_example, padding_and_cropping)
def public_batch_facts(ref, inputs):
    return batch_facts(inputs)


def _random_batch_inputs(g):
    V = 12
    bos = V - 1
    documents = []
    for row in range(6):
        length = int(torch.randint(0, 3 if row == 2 else 12, (1,), generator=g))  # row 2 is short: padding
        documents.append([bos, *torch.randint(0, bos, (length,), generator=g).tolist(), bos])
    return {"documents": documents, "block_size": int(torch.randint(4, 9, (1,), generator=g)),
            "pad_id": int(torch.randint(0, V, (1,), generator=g))}


@check("random_documents", 2, "random documents, block sizes and pad ids give the right windows, padding and mask",
       probe=probe_make_batch, inputs=_random_batch_inputs, hidden=True)
def random_documents(out, inputs, expected):
    return batch_problem(out, inputs, batch_facts(inputs), show=False)
