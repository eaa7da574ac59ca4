"""TransformerLM's forward pass: logits = head(ln_final(blocks(token_embedding +
position_embedding))), the loss against targets, and the KV cache across every block.

The checks pin the shapes (loss and presents None unless asked for), the loss as the
cross-entropy of the returned logits, the formula on fixed weights and ids (naming the
classic wrong forwards; what each gives is data the kit computed from the reference's
parts, grader/checks/facts.py), that the head reads ln_final, that positions matter,
causality, and that feeding tokens in pieces through past_key_values gives the logits
of one full pass, with positions offset by the cache length.
"""

from __future__ import annotations

import torch

from grader.checks._api import (
    OwnPartsVerdict, PartCalls, Task, calls_of, causal_diagnosis, check, compare, constant, first_diagnosis,
    float32_close, float32_verdict, matches, matches_to_float32, named, naming, own_parts, same_values, shape_problem, shown_shape,
    unjudgeable_parts,
)
from grader.checks.ch07_model.common import SIZES, full_sizes, model_of, stable_cross_entropy
from grader.checks.ch07_model.cross_entropy import judge_loss
from grader.checks.course import random_lm_state
from grader.checks.facts import known_facts

TASKS = [
    Task("lm_forward", "model", "TransformerLM.forward", "the model's forward pass"),
]


def lm_inputs(sizes, B=2, T=7):
    def make(g):
        V = sizes["vocab_size"]
        return {"sizes": sizes, "state": random_lm_state(g, full_sizes(sizes)),
                "idx": torch.randint(0, V, (B, T), generator=g), "targets": torch.randint(0, V, (B, T), generator=g)}
    return make


# --------------------------------------------------------------- the outputs


def probe_lm_forward(ns, sizes, state, idx, targets):
    model = model_of(ns, sizes, state)
    with torch.no_grad():
        plain = model(idx.clone())
        scored = model(idx.clone(), targets.clone())
    as_list = lambda value: [v for v in value] if isinstance(value, (tuple, list)) else value  # noqa: E731
    return {"plain": as_list(plain), "scored": as_list(scored)}


def triple(value, what):
    if not isinstance(value, list) or len(value) != 3:
        return f"{what} should return (logits, loss, presents), got {type(value).__name__}"
    value[:] = [v for v in value]
    return None


@check("shapes", 2, "idx [2, 7] gives logits [2, 7, V]; loss and presents are None unless asked for",
       probe=probe_lm_forward, inputs=lm_inputs(SIZES))
def shapes(out, inputs, expected):
    B, T = inputs["idx"].shape
    V = full_sizes(inputs["sizes"])["vocab_size"]
    if problem := triple(out["plain"], "model(idx)"):
        return problem
    logits, loss, presents = out["plain"]
    if isinstance(logits, torch.Tensor) and T > 1 and tuple(logits.shape) == (B, 1, V):
        return ("without targets only the last position's logits come back, [B, 1, V] (a shortcut for generating): "
                "return every position's, [B, T, V]; the KV cache is what makes generation cheap")
    if problem := shape_problem(logits, (B, T, V), "the logits"):
        return f"{problem}: one score per vocabulary entry at every position, [B, T, V]"
    if loss is not None:
        return "without targets the loss should be None"
    if presents is not None:
        return "with use_cache=False presents should be None"
    return None


@check("loss", 2, "with targets the loss equals the mean cross-entropy of the returned logits",
       probe=probe_lm_forward, inputs=lm_inputs(SIZES))
def loss(out, inputs, expected):
    if problem := triple(out["scored"], "model(idx, targets)"):
        return problem
    logits, loss, _ = out["scored"]
    targets = inputs["targets"]
    if loss is None:
        return "targets were given but the loss is None: return cross_entropy(logits, targets)"
    if not isinstance(loss, torch.Tensor) or not isinstance(logits, torch.Tensor):
        return "the logits and the loss should be tensors"
    if loss.dim() == 0 and logits.shape[:-1] == targets.shape:
        shifted = stable_cross_entropy(logits[:, :-1], targets[:, 1:])
        if not matches(loss, stable_cross_entropy(logits, targets), atol=1e-10, rtol=1e-9) and matches(
                loss, shifted, atol=1e-10, rtol=1e-9):
            return ("the targets are shifted again: targets[b, t] is already the token that follows idx[b, t], "
                    "so score logits[:, t] against targets[:, t]")
    if problem := judge_loss(loss, logits, targets, "the loss"):
        return f"the loss should be the cross-entropy of the returned logits against the targets: {problem}"
    return None


# ----------------------------------------------------------------- the formula


# Each wrong forward by name; what it outputs is computed under the same name (hidden.py).
MISTAKES = {
    "no_final_norm": "there is no final LayerNorm before the head: logits = head(ln_final(hidden))",
    "no_positions": "the position embeddings are not added to the token embeddings",
    "first_block_only": "only the first block is applied: run the hidden state through every block in turn",
    "last_block_only": "only the last block is applied, or every block reads the embeddings instead of the previous "
                       "block's output: each block reads what the block before it returned",
    "no_blocks": "the blocks are never applied",
    "final_norm_twice": "the final LayerNorm is applied twice",
    "blocks_reversed": "the blocks run in reverse order: blocks[0] comes first",
    "tied_head": "the logits are taken from the token embedding's weights (a head tied to the embedding): this "
                 "model's head is its own, logits = self.head(ln_final(hidden))",
}


def probe_lm_formula(ns, sizes, state, idx, targets=None):
    model = model_of(ns, sizes, state)
    parts = {name: part for name in ("token_embedding", "position_embedding", "ln_final", "head")
             if isinstance(part := getattr(model, name, None), torch.nn.Module)}
    blocks = getattr(model, "blocks", None)
    if isinstance(blocks, torch.nn.ModuleList):
        parts.update({f"blocks[{i}]": block for i, block in enumerate(blocks)})
    with torch.no_grad(), PartCalls(parts) as recorded:
        logits = model(idx.clone())[0]
    for call in recorded.calls:
        if call["part"] == "head":
            # What the head returned would be the logits themselves, recorded by the check: the
            # judge applies the head's known weight to what it read instead.
            call["output"] = None
    return {"logits": logits, "calls": recorded.calls, "shared": recorded.shared()}


def lm_wiring(out, n_layers: int, head_weight: torch.Tensor) -> "str | None":
    """The forward judged on the model's own parts: None when the logits are head(ln_final(
    blocks(token_embedding + position_embedding))) of what its own parts received and
    returned while it ran (PartCalls), whatever they compute; else the wire that is
    wrong, in the lesson's words."""
    calls, logits = out.get("calls"), out["logits"]
    if problem := unjudgeable_parts(out, "the forward pass"):
        return problem
    verdict = OwnPartsVerdict
    seen = {name: calls_of(calls, name) for name in ("token_embedding", "position_embedding", "ln_final", "head")}
    blocks = [calls_of(calls, f"blocks[{i}]") for i in range(n_layers)]
    if not seen["head"] and seen["token_embedding"]:
        return verdict("the forward pass never calls self.head: the logits must come from the model's own head, "
                       "self.head(ln_final(hidden)), not from another part's weights such as the token "
                       "embedding's (a tied head)")
    for name in ("token_embedding", "head"):
        if len(seen[name]) != 1:
            return (f"the forward pass calls self.{name}(...) {len(seen[name])} times, so it cannot be judged on your "
                    f"own parts: call each part as a module (self.{name}(...), not its .forward or its code "
                    f"written out)")
    if not any(blocks):
        return verdict(naming("no_blocks", MISTAKES["no_blocks"]))
    if not seen["ln_final"]:
        return verdict(naming("no_final_norm", MISTAKES["no_final_norm"]))
    if len(seen["ln_final"]) > 1:
        return verdict(naming("final_norm_twice", MISTAKES["final_norm_twice"]))
    if not seen["position_embedding"]:
        return verdict(naming("no_positions", MISTAKES["no_positions"]))
    ran = [c for c in calls if c["part"].startswith("blocks[")]
    if len(ran) == 1 and n_layers > 1:
        which = "first_block_only" if ran[0]["part"] == "blocks[0]" else "last_block_only"
        return verdict(naming(which, MISTAKES[which]))
    if [c["part"] for c in ran] == [f"blocks[{i}]" for i in reversed(range(n_layers))]:
        return verdict(naming("blocks_reversed", MISTAKES["blocks_reversed"]))
    if [c["part"] for c in ran] != [f"blocks[{i}]" for i in range(n_layers)]:
        return verdict("the blocks do not run once each, blocks[0] first: run the hidden state through every "
                       "block in turn")
    embedded, placed = seen["token_embedding"][0], seen["position_embedding"][0]
    if not same_values(placed["input"], embedded["output"]):
        return verdict("the position embedding does not receive the token embeddings: "
                       "hidden = position_embedding(tokens)")
    reads = placed["output"]
    for block in ran:
        if not same_values(block["input"], reads):
            if same_values(block["input"], placed["output"]):
                return verdict(naming("last_block_only", MISTAKES["last_block_only"]))
            return verdict(f"{block['part']} does not read what the part before it returned: each block reads "
                           f"the previous block's output, the first the embeddings")
        reads = block["output"]
    final, head = seen["ln_final"][0], seen["head"][0]
    if not same_values(final["input"], reads):
        return verdict("ln_final does not read the last block's output: logits = head(ln_final(hidden))")
    if not same_values(head["input"], final["output"]):
        return verdict("the head does not read ln_final's output: logits = head(ln_final(hidden))")
    head_out = head["input"] @ head_weight.to(head["input"].dtype).T
    if same_values(logits, head_out):
        return None
    return verdict(compare(logits, head_out, "the logit tensor", atol=1e-9, rtol=1e-7)
                   + ": the logits returned are not what the model's own head gives for what it read")


@check("formula", 2,
       "3 blocks: the logits are head(ln_final(blocks(token_embedding + position_embedding))) of the model's own "
       "parts, each block reading the one before, to float64's precision",
       probe=probe_lm_formula, inputs=lm_inputs(dict(SIZES, n_layers=3), T=6), fixed_inputs=True)
def formula(out, inputs, expected):
    composed, logits = known_facts(inputs), out["logits"]
    right = composed["right"]
    if compare(logits, right, atol=1e-9, rtol=1e-7) is None and logits.dtype == right.dtype:
        return None
    if own_parts(inputs):
        # No certified part stood in: the parts may be wrong and the forward right.
        return lm_wiring(out, full_sizes(inputs["sizes"])["n_layers"], inputs["state"]["head.weight"])
    known = first_diagnosis(logits, named(MISTAKES, composed["mistakes"]), atol=1e-8, rtol=1e-6, right=right)
    if known:
        return known
    if float32_close(logits, right):
        return float32_verdict("the logits", "your forward", "the model's dtype (float64 here)", logits, right,
                               plural=True, against="head(ln_final(blocks(...))) of the model's parts ")
    return (compare(logits, right, "the logit tensor", atol=1e-9, rtol=1e-7)
            + ": the logits are not head(ln_final(blocks(token_embedding + position_embedding))) "
              "computed with the model's own parts")


def _lm_final_norm_inputs(g):
    inputs = lm_inputs(SIZES)(g)
    inputs["state"]["ln_final.weight"] = torch.zeros(SIZES["d_model"], dtype=torch.float64)
    return inputs


@check("final_norm_feeds_head", 1,
       "with ln_final's gamma = 0 and beta = b every position's logits are head(b): the head reads ln_final",
       probe=probe_lm_forward, inputs=_lm_final_norm_inputs)
def final_norm_feeds_head(out, inputs, expected):
    if problem := triple(out["plain"], "model(idx)"):
        return problem
    logits = out["plain"][0]
    B, T = inputs["idx"].shape
    state = inputs["state"]
    constant = state["head.weight"] @ state["ln_final.bias"]
    if problem := shape_problem(logits, (B, T, constant.shape[0]), "the logits"):
        return problem
    if matches_to_float32(logits, constant.expand(B, T, -1), atol=1e-9, rtol=1e-7):
        return None
    tied = state["token_embedding.weight"] @ state["ln_final.bias"]
    if matches_to_float32(logits, tied.expand(B, T, -1), atol=1e-9, rtol=1e-7):
        return f"with ln_final's gamma set to 0 and beta to b, the logits are b times the token embedding: " \
               f"{MISTAKES['tied_head']}"
    return ("with ln_final's gamma set to 0 and beta to b, every position's logits should be head(b): the head "
            "must read the final LayerNorm's output (logits = head(ln_final(hidden))), and nothing may come "
            "after it")


def _lm_repeated_inputs(g):
    inputs = lm_inputs(SIZES, T=6)(g)
    inputs["idx"] = torch.tensor([[3] * 6, [7] * 6])
    return inputs


@check("positions_matter", 1, "a token repeated at every position gets different logits at different positions",
       probe=probe_lm_forward, inputs=_lm_repeated_inputs)
def positions_matter(out, inputs, expected):
    if problem := triple(out["plain"], "model(idx)"):
        return problem
    logits = out["plain"][0]
    if problem := shape_problem(logits, (*inputs["idx"].shape, full_sizes(inputs["sizes"])["vocab_size"]),
                                "the logits"):
        return problem
    if matches(logits, logits[:, :1].expand_as(logits), atol=1e-9, rtol=1e-7):
        return ("a token repeated at every position gets the same logits at every position: the position "
                "embeddings are not added to the token embeddings")
    return None


def probe_lm_logits(ns, sizes, state, idx):
    model = model_of(ns, sizes, state)
    with torch.no_grad():
        return {"logits": model(idx.clone())[0]}


def _lm_causal_inputs(g):
    inputs = lm_inputs(SIZES, T=8)(g)
    changed = inputs["idx"].clone()
    V = SIZES["vocab_size"]
    changed[:, 5:] = (changed[:, 5:] + 1 + torch.randint(0, V - 1, (2, 3), generator=g)) % V  # every one differs
    return {"sizes": SIZES, "state": inputs["state"], "idx": inputs["idx"], "changed": changed, "_first_changed": 5}


@check("causal_invariance", 2,
       "changing tokens 5.. leaves the logits at positions 0..4 unchanged (the whole model)",
       probe=probe_lm_logits, inputs=_lm_causal_inputs, separately=("idx", "changed"))
def causal_invariance(out, inputs, expected):
    return causal_diagnosis(out["idx"]["logits"], out["changed"]["logits"], inputs["_first_changed"], "the model")


# ----------------------------------------------------------------- the cache


def probe_lm_cache(ns, sizes, state, idx, chunks, part, earlier):
    model = model_of(ns, sizes, state)
    with torch.no_grad():
        if part == "full":
            return {"full": model(idx.clone())[0]}
        pieces, presents, start, layout = [], None, 0, []
        for size in chunks:
            out = model(idx[:, start:start + size].clone(), past_key_values=presents, use_cache=True)
            logits, _, presents = out
            pieces.append(logits)
            start += size
            if not isinstance(presents, (list, tuple)):
                return {"presents": None, "layout": layout}
            layout.append([[list(t.shape) for t in pair] if isinstance(pair, (list, tuple)) else None
                           for pair in presents])
        # What a model that forgets the cache length would output: every chunk after the
        # first restarts its positions at 0.
        positions = [p for size in chunks for p in range(size)]
        table = model.position_embedding.weight
        table[: len(positions)] = table[torch.tensor(positions)].clone()
        no_offset = model(idx.clone())[0]
    return {"stepwise": torch.cat(pieces, dim=1), "presents": True, "layout": layout,
            "no_offset": no_offset}


def lm_cache_inputs(sizes, chunks):
    def make(g):
        inputs = lm_inputs(sizes, T=sum(chunks))(g)
        return {"sizes": sizes, "state": inputs["state"], "idx": inputs["idx"], "chunks": list(chunks)}
    return make


@check("cache_matches_full", 3,
       "a 3-token prompt then 4 tokens one at a time through past_key_values gives the logits of one "
       "full pass; presents hold one (keys, values) per block",
       probe=probe_lm_cache, inputs=lm_cache_inputs(SIZES, (3, 1, 1, 1, 1)), parts=("full", "stepwise"))
def cache_matches_full(out, inputs, expected, hidden=False):
    B, T = inputs["idx"].shape
    s = full_sizes(inputs["sizes"])
    N, h, d_h = s["n_layers"], s["n_heads"], s["d_model"] // s["n_heads"]
    if out["presents"] is None:
        return "with use_cache=True the model should return presents: one (keys, values) per block"
    seen = 0
    for size, layout in zip(inputs["chunks"], out["layout"]):
        seen += size
        if len(layout) != N:
            if hidden:
                return "presents should hold one (keys, values) per block, in the blocks' order"
            return f"presents should hold one (keys, values) per block: {N} blocks, got {len(layout)} entries"
        for pair in layout:
            if pair is None or len(pair) != 2:
                return "each entry of presents should be that block's (keys, values)"
            if any(shape != [B, h, seen, d_h] for shape in pair):
                if hidden:
                    return ("the cached keys/values do not grow by the number of tokens fed: pass each block "
                            "its own past and keep its present, [B, h, tokens so far, d_h]")
                return (f"after {seen} tokens each block's cached keys/values should be [B, h, {seen}, d_h] = "
                        f"{[B, h, seen, d_h]}, got {shown_shape(pair[0])}: pass each block its own past and keep its "
                        f"present")
    if matches_to_float32(out["stepwise"], out["full"], atol=1e-9, rtol=1e-7):
        return None
    if matches(out["stepwise"], out["no_offset"], atol=1e-9, rtol=1e-7):
        return constant("positions are not offset by the cache length: tokens fed after a cache of length L sit "
                        "at positions L, L + 1, …; yours restart at 0. Pass past_length (the cached keys' length) "
                        "to the position embedding")
    problem = compare(out["stepwise"], out["full"], "the cached logits", atol=1e-9, rtol=1e-7)
    return f"feeding the tokens in pieces through the KV cache differs from one full pass: {problem}"
