"""The hidden checks of grader/checks/ch08_training/batches.py."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.ch08_training.batches import batch_problem, probe_make_batch


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
def judge_make_batch_hidden(out, inputs, expected):
    return batch_problem(out, inputs, show=False)
