"""Padded batches with a mask: documents of different lengths become inputs, targets and a
mask [B, T], each row its document's training windows from position 0 on (cut to
block_size), padded at the end with pad_id where the mask is False.

The right batch of the public checks' documents, and the batches of the classic mistakes,
are data the kit computed (grader/checks/facts.py; hidden/make_batch.py computes them).
"""

from __future__ import annotations

import torch

from grader.checks._api import Task, check, constant, type_name
from grader.checks.facts import known_facts

TASKS = [
    Task("make_batch", "train", "make_batch", "padded batches with a mask"),
]


def probe_make_batch(ns, documents, block_size, pad_id):
    out = ns.train.make_batch([list(d) for d in documents], block_size, pad_id)
    return {"out": list(out) if isinstance(out, (tuple, list)) else out}


def batch_problem(out, inputs, facts, show=True):
    """facts: the right (inputs, targets, mask) ("right"), the same rows padded at the front
    ("front") and, where pad_id is not BOS, the inputs padded with BOS ("bos_padded")."""
    documents, block_size = inputs["documents"], inputs["block_size"]
    parts = out["out"]
    if not isinstance(parts, list) or len(parts) != 3:
        return "make_batch should return three tensors: (inputs, targets, mask)"
    got_inputs, got_targets, got_mask = parts
    want_inputs, want_targets, want_mask = facts["right"]
    B, T = want_inputs.shape
    for tensor, what in ((got_inputs, "inputs"), (got_targets, "targets"), (got_mask, "mask")):
        if not isinstance(tensor, torch.Tensor):
            return f"{what} should be a tensor, got {type_name(tensor)}"
        if tuple(tensor.shape) != (B, T):
            longest = max(len(d) for d in documents) - 1
            if tensor.dim() == 2 and tensor.shape[0] == B and tensor.shape[1] == block_size and T < block_size:
                return (f"{what} is [B, block_size]; T is the longest row's number of positions "
                        f"(min(block_size, len(ids) - 1)), here {T}" if show else
                        f"{what} is [B, block_size]; T is the longest row's number of positions")
            if tensor.dim() == 2 and tensor.shape[1] == longest and longest > block_size:
                return "the rows are not cut to block_size: positions = min(block_size, len(ids) - 1)"
            if show:
                return f"{what} has shape {list(tensor.shape)}, expected [B, T] = {[B, T]}"
            return f"{what} does not have the shape [B, T] (B documents, T the longest row's positions)"
    if got_inputs.dtype != torch.long or got_targets.dtype != torch.long:
        return "inputs and targets should be int64 (torch.long) ids"
    if got_mask.dtype != torch.bool:
        return f"mask should be a bool tensor (True on scored positions), got {got_mask.dtype}"
    if torch.equal(got_inputs, want_inputs) and torch.equal(got_targets, want_targets) and torch.equal(got_mask, want_mask):
        return None
    front = facts["front"]
    if not torch.equal(front[2], want_mask) and (torch.equal(got_inputs, front[0]) or torch.equal(got_mask, front[2])):
        return "the padding is at the front; pad at the end, so no real position ever sees it"
    if torch.equal(got_inputs, want_inputs) and torch.equal(got_targets, want_inputs):
        return constant("the targets are the inputs: targets[p] is the next id, ids[p + 1] (shift by one)")
    if torch.equal(got_mask, torch.ones_like(want_mask)) and not want_mask.all():
        return "mask is True on padded positions too: padding must not be scored (mask False there)"
    if torch.equal(got_mask, ~want_mask):
        return "mask is inverted: True on the scored positions, False on the padding"
    if facts["bos_padded"] is not None and torch.equal(got_inputs, facts["bos_padded"]):
        return "the rows are padded with BOS; pad with the pad_id argument"
    if not torch.equal(got_mask, want_mask):
        return ("mask should be True exactly on each row's min(block_size, len(ids) - 1) scored positions, "
                "from position 0 on")
    if not torch.equal(got_inputs, want_inputs):
        return "inputs should hold each row's training_windows inputs from position 0 on, then pad_id"
    return "targets should hold each row's next-token targets (ids[p + 1]) from position 0 on, then pad_id"


def _names_example(g):
    # 'ana' and 'li' in the names vocabulary: a=0, i=8, l=11, n=13, BOS=26
    return {"documents": [[26, 0, 13, 0, 26], [26, 11, 8, 26]], "block_size": 16, "pad_id": 26}


@check("lesson_example", 2, "ana and li (BOS = pad_id = 26) give the lesson's inputs, targets and mask",
       probe=probe_make_batch, inputs=_names_example)
def lesson_example(out, inputs, expected):
    if problem := batch_problem(out, inputs, known_facts(inputs)):
        return f"the lesson's example (ana, li with BOS = 26 as pad_id): {problem}"
    return None


def _batch_inputs(g):
    # BOS = 9, pad_id 7 (any id): short rows padded, the long one cut to block_size
    return {"documents": [[9, 1, 2, 9], [9, 3, 4, 5, 6, 1, 2, 3, 4, 9], [9, 9], [9, 5, 0, 0, 2, 9]],
            "block_size": 6, "pad_id": 7}


@check("padding_and_cropping", 2,
       "short rows padded at the end with pad_id (mask False), a long one cut to block_size, T the longest row",
       probe=probe_make_batch, inputs=_batch_inputs)
def padding_and_cropping(out, inputs, expected):
    return batch_problem(out, inputs, known_facts(inputs))
