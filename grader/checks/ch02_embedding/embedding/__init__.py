"""The token embedding, a lookup of one learned row per id.

The contract the checks pin: ids [B, T] give vectors [B, T, d] whose entries are the
weight's rows exactly, with the gradient flowing into those rows; ids that are not
integers in [0, V) raise a ValueError that names the bad id, before torch's own
indexing can fail with an opaque IndexError, or, for a negative id, silently read a
row from the end of the table.

torch.nn.functional.embedding (and torch.embedding, torch.nn.Embedding) are the
lookup this task asks for in one call, so they score 'forbidden'; any formulation
built from indexing, index_select, gather or a one-hot product is fine.

The right vectors of the public checks' ids, and the classic wrong ones, are data the
kit computed (grader/checks/facts.py; hidden/embedding.py computes them).
"""

from __future__ import annotations

import torch

from grader.checks._api import (
    Task, check, compare, compare_to_float32, exception_name, float32_close, float32_verdict, matches, shape_problem,
    torch_library_except, try_call,
)
from grader.checks.facts import known_facts

TASKS = [
    Task("embedding", "model", "TokenEmbedding.forward", "token embedding lookup",
         forbidden=("torch.nn.functional.embedding", "torch.embedding", "torch.nn.Embedding"),
         forbidden_ops=("embedding", "embedding_*", "_embedding_bag*") + torch_library_except(), takes=(("idx", 2),)),
]

# ----------------------------------------------------------------------- helpers


def _embedding(ns, weight):
    V, d = weight.shape
    emb = ns.model.TokenEmbedding(V, d).double()
    with torch.no_grad():
        emb.weight.copy_(weight)
    return emb


def _distinct_weight(V, d):
    """Row v = 10 v + 0.1 j + 0.5: every entry different, so a wrong row shows."""
    return (10.0 * torch.arange(V, dtype=torch.float64)[:, None]
            + 0.1 * torch.arange(d, dtype=torch.float64)[None, :] + 0.5)


WEIGHT = _distinct_weight(7, 5)


# --------------------------------------------------------------------- lookup


def probe_lookup(ns, weight, idx):
    emb = _embedding(ns, weight)
    out = emb(idx.clone())
    return {"y": out.detach() if isinstance(out, torch.Tensor) else out}


@check("lookup", 3, "V=7, d=5: ids [2, 3] give vectors [2, 3, 5], each exactly the weight row of its id",
       probe=probe_lookup, inputs=lambda g: {"weight": WEIGHT.clone(), "idx": torch.tensor([[0, 3, 6], [2, 2, 1]])})
def lookup(out, inputs, expected):
    weight, idx = inputs["weight"], inputs["idx"]
    facts = known_facts(inputs)
    y, right = out["y"], facts["right"]
    B, T = idx.shape
    V = weight.shape[0]
    if matches(y, facts["one_hot"], atol=0, rtol=0):
        return (f"ids [{B}, {T}] gave [{B}, {T}, {V}] one-hot vectors: the embedding of id v is row v of the "
                f"weight, self.weight[ids], a [{B}, {T}, d] tensor")
    if problem := shape_problem(y, right.shape, "the embedding of ids [B, T]"):
        return f"{problem}: ids [{B}, {T}] give vectors [{B}, {T}, d]"
    if compare(y, right, atol=1e-12, rtol=0) is None:
        return None
    for text, wrong in facts["mistakes"]:
        if matches(y, wrong, atol=1e-12, rtol=0):
            return text
    if float32_close(y, right):
        return None  # float32's precision: float64_precision names it
    bad = (y.double() - right).abs().amax(dim=-1) > 1e-12
    b, t = (int(i) for i in torch.nonzero(bad)[0])
    return f"position [{b}, {t}] holds id {int(idx[b, t])} but its vector is not row {int(idx[b, t])} of the weight"


@check("float64_precision", 1, "V=7, d=5: every vector is its weight row to float64's precision (no cast on the way)",
       probe=probe_lookup, inputs=lambda g: {"weight": WEIGHT.clone(), "idx": torch.tensor([[0, 3, 6], [2, 2, 1]])},
       gated_by="lookup")
def float64_precision(out, inputs, expected):
    y, right = out["y"], known_facts(inputs)["right"]
    if shape_problem(y, right.shape) or matches(y, right, atol=1e-12, rtol=0) or not float32_close(y, right):
        return None  # right, or wrong beyond float32's precision (lookup says how)
    return float32_verdict("the vectors", "your embedding", "the weight's dtype (float64 here)", y, right,
                           plural=True)


# ------------------------------------------------------------------- gradient


def probe_gradient(ns, weight, idx):
    emb = _embedding(ns, weight)
    out = emb(idx.clone())
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        return {"grad": None, "requires_grad": False}
    out.sum().backward()
    return {"grad": None if emb.weight.grad is None else emb.weight.grad.clone(), "requires_grad": True}


@check("gradient", 1, "the gradient flows into the rows that were looked up (row v gets one per occurrence of id v)",
       probe=probe_gradient, inputs=lambda g: {"weight": WEIGHT.clone(), "idx": torch.tensor([[1, 1, 3], [6, 1, 0]])})
def gradient(out, inputs, expected):
    weight, idx = inputs["weight"], inputs["idx"]
    if not out["requires_grad"] or out["grad"] is None:
        return ("no gradient reaches the weight: the output must come from self.weight itself "
                "(not self.weight.data, .detach(), a copy or torch.no_grad()), or the embedding cannot learn")
    counts = torch.bincount(idx.reshape(-1), minlength=weight.shape[0]).double()
    right = counts[:, None].expand_as(weight)
    if problem := compare(out["grad"], right, "the weight's gradient", atol=1e-12, rtol=0):
        return (f"{problem}: with loss = sum of the output, row v's gradient is the number of times id v "
                f"occurs")
    return None


# ------------------------------------------------------------------- bad ids


def probe_bad_ids(ns, weight, cases):
    emb = _embedding(ns, weight)
    results = []
    for idx in cases:
        attempt = try_call(emb, idx.clone())
        if "value" in attempt:
            value = attempt["value"]
            attempt["value"] = value.detach() if isinstance(value, torch.Tensor) else repr(value)[:80]
        results.append(attempt)
    return results


def _show(idx) -> str:
    text = str(idx.tolist())
    return f"{text} ({str(idx.dtype).removeprefix('torch.')})" if idx.is_floating_point() else text


def _bad_id_problem(result, idx, V) -> "str | None":
    """Why the answer to ids `idx` (which hold a bad id) is not a clear ValueError."""
    if idx.is_floating_point():
        what, fix = f"the float ids {_show(idx)}", "check that the ids have an integer dtype and raise a ValueError"
        bad = None
    else:
        bad = int(idx[(idx < 0) | (idx >= V)][0])
        what, fix = f"id {bad} (vocabulary size {V})", f"check 0 <= id < {V} yourself and raise a ValueError that names the bad id"
    if "value" in result:
        if idx.is_floating_point():
            return f"{what} were accepted: token ids must be integers (float ids are silently truncated); {fix}"
        if bad is not None and bad < 0:
            return (f"{what} was accepted silently: a negative index reads a row from the end of the table; "
                    f"{fix}")
        return f"{what} was accepted silently (clamped or wrapped?); {fix}"
    raised = result["raised"]
    if raised["value_error"]:
        return None
    if raised["type"] == "AssertionError":
        return (f"{what} raised AssertionError: an assert is a check the program may drop (python -O removes it), "
                f"not the error the lesson asks for; {fix}")
    source = {"IndexError": "torch's indexing", "RuntimeError": "torch"}.get(raised["type"], "your code")
    return (f"{what} raised {exception_name(raised)} from {source}; "
            f"no range check: {fix}")


@check("bad_ids", 3, "ids 7 (= V), -1, 100 (in the second row) and float ids raise a ValueError, "
       "not torch's IndexError and not a silent read of another row",
       probe=probe_bad_ids, inputs=lambda g: {"weight": WEIGHT.clone(),
                                              "cases": [torch.tensor([[0, 1, 7, 2]]), torch.tensor([[0, -1]]),
                                                        torch.tensor([[3, 1], [2, 100]]), torch.tensor([[0.0, 1.0]])]})
def bad_ids(out, inputs, expected):
    V = inputs["weight"].shape[0]
    for idx, result in zip(inputs["cases"], out):
        if problem := _bad_id_problem(result, idx, V):
            return problem
    return None


@check("bad_id_named", 1, "the ValueError's message names the bad id (13, -3)",
       probe=probe_bad_ids, inputs=lambda g: {"weight": WEIGHT.clone(),
                                              "cases": [torch.tensor([[0, 1, 13, 2]]), torch.tensor([[4, -3]])]})
def bad_id_named(out, inputs, expected):
    V = inputs["weight"].shape[0]
    for idx, result in zip(inputs["cases"], out):
        if problem := _bad_id_problem(result, idx, V):
            return problem
        bad = str(int(idx[(idx < 0) | (idx >= V)][0]))
        if bad not in result["raised"]["message"]:
            return f"the ValueError for ids {idx.tolist()} should name the bad id {bad}; its message does not"
    return None


@check("integer_dtypes", 1, "int64 and int32 ids are both valid integer ids",
       probe=probe_bad_ids, inputs=lambda g: {"weight": WEIGHT.clone(),
                                              "cases": [torch.tensor([[0, 6, 3]], dtype=torch.int64),
                                                        torch.tensor([[5, 2, 4]], dtype=torch.int32)]})
def integer_dtypes(out, inputs, expected):
    for idx, result, right in zip(inputs["cases"], out, known_facts(inputs)["rows"]):
        kind = str(idx.dtype).removeprefix("torch.")
        if "raised" in result:
            return (f"{kind} ids raised {exception_name(result['raised'])}; every integer "
                    f"dtype holds valid ids (convert with .long() where torch needs it)")
        if problem := compare_to_float32(result["value"], right, f"the embedding of {kind} ids", atol=1e-12, rtol=0):
            return problem
    return None
