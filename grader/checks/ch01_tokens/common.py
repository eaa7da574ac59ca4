"""What the tokenizer checks share: the small corpus the lessons use, and reading a list
of ids out of what the student's code returned. What the right vocabulary, ids, text
or windows are on the public checks' inputs is data the kit computed
(grader/checks/facts.py; hidden/common.py)."""

from __future__ import annotations

import torch

SMALL_CORPUS = ["ana", "bob", "emma"]  # chars a b e m n o -> ids 0..5, BOS = 6

# Probes run in the sandbox: they turn whatever the student's code returned or raised
# into plain data. Judges run in the grader on that data.


def plain_ints(value):
    """A list of ints from a list/tuple/1-D tensor of integers, else a short repr."""
    if isinstance(value, torch.Tensor):
        if value.dim() != 1 or value.is_floating_point() or value.is_complex():
            return {"unreadable": f"a tensor of shape {list(value.shape)} and dtype {value.dtype}"}
        return [int(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            if isinstance(v, torch.Tensor) and v.dim() == 0 and not v.is_floating_point():
                v = int(v.item())
            if isinstance(v, bool) or not isinstance(v, int):
                return {"unreadable": f"a {type(value).__name__} holding {type(v).__name__} values, not ints"}
            out.append(int(v))
        return out
    return {"unreadable": f"a {type(value).__name__}, not a list of ints"}
