"""Chapter 07: the full model: cross-entropy, the parameter ledger, TransformerLM's parts
and its forward pass (with the KV cache across every block)."""

from __future__ import annotations

import torch

from grader.checks._api import Task, causal_diagnosis, check, compare, first_diagnosis, matches, shape_problem

CHAPTER, TITLE = "07", "The full language model"

TASKS = [
    Task("cross_entropy", "model", "cross_entropy", "a stable cross-entropy loss",
         forbidden=("torch.nn.functional.cross_entropy", "torch.nn.functional.log_softmax", "torch.log_softmax",
                    "torch.nn.functional.nll_loss", "torch.nn.CrossEntropyLoss", "torch.nn.NLLLoss",
                    "torch.special.log_softmax", "torch.Tensor.log_softmax"),
         forbidden_methods=("log_softmax",),
         forbidden_ops=("*log_softmax*", "nll_loss*", "cross_entropy*")),
    Task("parameter_count", "model", "parameter_count", "the parameter ledger"),
    Task("lm_init", "model", "TransformerLM.__init__", "the model's parts"),
    Task("lm_forward", "model", "TransformerLM.forward", "the model's forward pass"),
]

# ----------------------------------------------------------------------- helpers


def _config(ns, **sizes):
    base = dict(vocab_size=11, block_size=12, d_model=8, n_heads=2, n_layers=2, d_ff=16, dropout=0.0)
    base.update(sizes)
    return ns.model.Config(**base)


def _full_sizes(sizes):
    return {**dict(vocab_size=11, block_size=12, d_model=8, n_heads=2, n_layers=2, d_ff=16), **sizes}


def _block_ledger(d, f):
    return 4 * d * d + 2 * d * f + f + 5 * d


def _ledger(sizes):
    s = _full_sizes(sizes)
    V, C, N, d, f = s["vocab_size"], s["block_size"], s["n_layers"], s["d_model"], s["d_ff"]
    return 2 * V * d + C * d + N * _block_ledger(d, f) + 2 * d


def _describe(sizes):
    s = _full_sizes(sizes)
    return (f"V={s['vocab_size']}, C={s['block_size']}, N={s['n_layers']}, d={s['d_model']}, "
            f"h={s['n_heads']}, f={s['d_ff']}")


LEDGER = "2Vd + Cd + N(4d² + 2df + f + 5d) + 2d"


def _count_mistake(count, sizes) -> "str | None":
    """Name the mistake a wrong parameter count points at, if a known one."""
    s = _full_sizes(sizes)
    V, C, N, d, f = s["vocab_size"], s["block_size"], s["n_layers"], s["d_model"], s["d_ff"]
    block, diff = _block_ledger(d, f), count - _ledger(sizes)
    known = [
        (-(N - 1) * block, "one block object reused N times: the N blocks must be N separate "
                           "TransformerBlock objects, each with its own parameters"),
        (-N * block, "the blocks' parameters are not counted/registered: keep the blocks in an nn.ModuleList "
                     "(a plain Python list hides them from .parameters())"),
        (V, "the head has a bias: the head is bias-free (nn.Linear(d, V, bias=False))"),
        (-V * d, "the head is tied to the token embedding (one shared V×d matrix): this model's head is "
                 "untied, with its own weight"),
        (-V * d + V, "the head is tied to the token embedding and has a bias: it is untied and bias-free"),
        (-2 * d, "there is no final LayerNorm (ln_final, 2d parameters) before the head"),
        (-C * d, "the position embedding (C·d parameters) is missing"),
        (4 * d * N, "the attention projections have biases (4d per block); Q/K/V/O are bias-free"),
        (-f * N, "the first feed-forward bias (f per block) is missing"),
        (-(f + d) * N, "the feed-forward biases (f + d per block) are missing"),
        (-4 * d * N, "the blocks' LayerNorm γ and β (4d per block) are missing"),
    ]
    for amount, why in known:
        if amount and diff == amount:
            return why
    return None


def random_block_state(g, sizes, prefix=""):
    d, f = sizes["d_model"], sizes["d_ff"]
    r = lambda *shape, s=0.5: torch.randn(*shape, generator=g, dtype=torch.float64) * s  # noqa: E731
    state = {"ln_attention.weight": 1 + r(d, s=0.3), "ln_attention.bias": r(d, s=0.3),
             "attention.q_proj.weight": r(d, d), "attention.k_proj.weight": r(d, d),
             "attention.v_proj.weight": r(d, d), "attention.o_proj.weight": r(d, d),
             "ln_feedforward.weight": 1 + r(d, s=0.3), "ln_feedforward.bias": r(d, s=0.3),
             "feedforward.fc1.weight": r(f, d), "feedforward.fc1.bias": r(f),
             "feedforward.fc2.weight": r(d, f), "feedforward.fc2.bias": r(d)}
    return {prefix + key: value for key, value in state.items()}


def random_lm_state(g, sizes):
    """A state_dict for the contract's module names, with weights large enough that
    every mistake shows."""
    s = _full_sizes(sizes)
    V, C, d = s["vocab_size"], s["block_size"], s["d_model"]
    r = lambda *shape, s=1.0: torch.randn(*shape, generator=g, dtype=torch.float64) * s  # noqa: E731
    state = {"token_embedding.weight": r(V, d), "position_embedding.weight": r(C, d)}
    for i in range(s["n_layers"]):
        state.update(random_block_state(g, s, prefix=f"blocks.{i}."))
    state.update({"ln_final.weight": 1 + r(d, s=0.3), "ln_final.bias": r(d, s=0.3), "head.weight": r(V, d, s=0.5)})
    return state


def contract_names(sizes):
    return {name: list(value.shape) for name, value in random_lm_state(torch.Generator().manual_seed(0), sizes).items()}


def _model(ns, sizes, state=None):
    model = ns.model.TransformerLM(_config(ns, **sizes)).double()
    if state:
        model.load_state_dict({k: v.clone() for k, v in state.items()}, strict=True)
    return model.eval()


def _stable_cross_entropy(logits, targets):
    flat = logits.double().reshape(-1, logits.shape[-1])
    rows = torch.arange(flat.shape[0])
    return (torch.logsumexp(flat, dim=-1) - flat[rows, targets.reshape(-1)]).mean()


def _picked_cross_entropy(log_probs, targets):
    flat = log_probs.reshape(-1, log_probs.shape[-1])
    return -flat[torch.arange(flat.shape[0]), targets.reshape(-1)].mean()


def _cross_entropy_mistakes(logits, targets):
    logits = logits.double()
    n = targets.numel()
    right = _stable_cross_entropy(logits, targets)
    log_probs = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    mistakes = [
        ("the loss is summed instead of averaged: divide by the number of scored positions (take the mean)",
         right * n),
        ("the sign is flipped: the loss is minus the mean log-probability of the targets", -right),
        ("the loss averages the log-probabilities of every class; pick each position's target class",
         -log_probs.mean()),
        ("the loss uses the probability instead of its log: −mean(log p[target])",
         _picked_cross_entropy(log_probs.exp(), targets)),
    ]
    for dim in range(logits.dim() - 1):  # a softmax over batch or time instead of the vocabulary
        wrong = logits - torch.logsumexp(logits, dim=dim, keepdim=True)
        mistakes.append(("the softmax normalises over the wrong axis: normalise over the vocabulary, the last axis "
                         f"(yours normalises over axis {dim})", _picked_cross_entropy(wrong, targets)))
    flat = logits.reshape(-1, logits.shape[-1])
    mistakes.append(("the softmax normalises over the wrong axis (the positions, after flattening): normalise "
                     "over the vocabulary, the last axis",
                     _picked_cross_entropy(flat - torch.logsumexp(flat, dim=0, keepdim=True), targets)))
    return mistakes


# --------------------------------------------------------------- cross-entropy


def probe_cross_entropy(ns, logits, targets):
    return {"loss": ns.model.cross_entropy(logits.clone(), targets.clone())}


def _judge_loss(loss, logits, targets, what="the loss", reveal=True) -> "str | None":
    if not isinstance(loss, torch.Tensor):
        return f"{what} should be a tensor (keep it in the graph for training), got {type(loss).__name__}"
    right = _stable_cross_entropy(logits, targets)
    if loss.dim() != 0:
        if tuple(loss.shape) in (tuple(targets.shape), (targets.numel(),)):
            return (f"{what} has one value per position (shape {list(loss.shape)}): return their mean, "
                    "a single number")
        return f"{what} should be a scalar (a 0-dimensional tensor), got shape {list(loss.shape)}"
    if not torch.isfinite(loss.double()).all():
        return f"{what} is NaN or inf on ordinary logits"
    if matches(loss, right, atol=1e-10, rtol=1e-9):
        return None
    known = first_diagnosis(loss, _cross_entropy_mistakes(logits, targets), atol=1e-8, rtol=1e-6)
    if known or not reveal:
        return known or f"{what} differs from the stable log-softmax cross-entropy of the logits"
    return f"{what} is {loss.item():.6g}; the stable log-softmax cross-entropy of these logits is {right.item():.6g}"


def judge_cross_entropy(out, inputs, expected):
    return _judge_loss(out["loss"], inputs["logits"], inputs["targets"])


def judge_cross_entropy_hidden(out, inputs, expected):
    return _judge_loss(out["loss"], inputs["logits"], inputs["targets"], reveal=False)


def judge_cross_entropy_uniform(out, inputs, expected):
    loss, V = out["loss"], inputs["logits"].shape[-1]
    if problem := shape_problem(loss, (), "the loss"):
        return problem
    figure = torch.tensor(V, dtype=torch.float64).log()
    if matches(loss, figure, atol=1e-12, rtol=0):
        return None
    known = first_diagnosis(loss, _cross_entropy_mistakes(inputs["logits"], inputs["targets"]), atol=1e-8, rtol=1e-6)
    lead = f"all-zero logits over V = {V} classes should give log V = {figure.item():.6f}"
    return f"{lead}: {known}" if known else f"{lead}, got {loss.item():.6g}"


def judge_cross_entropy_huge(out, inputs, expected):
    loss, logits, targets = out["loss"], inputs["logits"], inputs["targets"]
    if isinstance(loss, torch.Tensor) and loss.dim() == 0 and not torch.isfinite(loss.double()).all():
        return ("the loss is NaN or inf for logits around ±1e4: there is no max subtraction, so exp overflows "
                "(exp(1e4) = inf) or underflows to log(0). Subtract each row's own maximum before exp: "
                "log-softmax(z) = (z − max z) − log Σ exp(z − max z)")
    if (problem := _judge_loss(loss, logits, targets)) is not None:
        return f"with logits around ±1e4: {problem}"
    return None


def judge_cross_entropy_tiny(out, inputs, expected):
    loss, logits, targets = out["loss"], inputs["logits"], inputs["targets"]
    if isinstance(loss, torch.Tensor) and loss.dim() == 0 and not torch.isfinite(loss.double()).all():
        return ("the loss is inf when the target's logit is 1e4 below the others: its softmax probability "
                "underflows to 0 and log(0) = -inf. Take the log-softmax directly, (z − max z) − log Σ exp(z − max "
                "z), instead of the log of a softmax")
    if (problem := _judge_loss(loss, logits, targets)) is not None:
        return f"with a target's logit 1e4 below the others: {problem}"
    return None


def probe_cross_entropy_gradient(ns, logits, targets):
    leaf = logits.clone().requires_grad_(True)
    with torch.enable_grad():
        loss = ns.model.cross_entropy(leaf, targets.clone())
        if not isinstance(loss, torch.Tensor) or not loss.requires_grad:
            return {"gradient": None}
        (gradient,) = torch.autograd.grad(loss, leaf)
    return {"gradient": gradient}


def judge_cross_entropy_gradient(out, inputs, expected):
    logits, targets = inputs["logits"], inputs["targets"]
    if out["gradient"] is None:
        return ("the loss is not connected to the logits (autograd cannot differentiate it): keep it a tensor "
                "computed from the logits, without .item(), .detach() or torch.no_grad()")
    flat = logits.reshape(-1, logits.shape[-1])
    right = torch.softmax(flat, dim=-1)
    right[torch.arange(flat.shape[0]), targets.reshape(-1)] -= 1.0
    right = (right / flat.shape[0]).reshape(logits.shape)
    if matches(out["gradient"], right * flat.shape[0], atol=1e-10, rtol=1e-8):
        return ("the gradient is N times too large: the loss is summed instead of averaged over the "
                f"N = {flat.shape[0]} positions")
    if problem := compare(out["gradient"], right, "the gradient of the loss", atol=1e-10, rtol=1e-8):
        return f"{problem}; d loss / d logits should be (softmax − one-hot(target)) / N"
    return None


def _logits_inputs(shape, scale=2.0):
    def make(g):
        logits = torch.randn(*shape, generator=g, dtype=torch.float64) * scale
        targets = torch.randint(0, shape[-1], shape[:-1], generator=g)
        return {"logits": logits, "targets": targets}
    return make


def _huge_logits(g):
    B, T, V = 2, 3, 7
    logits = torch.randn(B, T, V, generator=g, dtype=torch.float64) * 2
    offsets = torch.tensor([1e4, -1e4, 5e3, -5e3, 1e4, 2e4], dtype=torch.float64).reshape(B, T, 1)
    return {"logits": logits + offsets, "targets": torch.randint(0, V, (B, T), generator=g)}


# ------------------------------------------------------------- parameter count


def probe_parameter_count(ns, configs):
    return {"counts": [ns.model.parameter_count(_config(ns, **sizes)) for sizes in configs]}


def _judge_counts(out, inputs, hidden):
    counts = out["counts"]
    for count, sizes in zip(counts, inputs["configs"]):
        if isinstance(count, bool) or not isinstance(count, int):
            return f"parameter_count should return a Python int, got {type(count).__name__}"
        if count == _ledger(sizes):
            continue
        why = _count_mistake(count, sizes)
        if hidden:
            return ("for one of the hidden configurations the count differs from the ledger " + LEDGER
                    + (f": {why}" if why else ""))
        return (f"for {_describe(sizes)} the ledger {LEDGER} gives {_ledger(sizes):,}, got {count:,}"
                + (f": {why}" if why else ""))
    return None


def judge_parameter_count(out, inputs, expected):
    return _judge_counts(out, inputs, hidden=False)


def judge_parameter_count_hidden(out, inputs, expected):
    return _judge_counts(out, inputs, hidden=True)


def probe_parameter_count_vs_model(ns, sizes):
    model = ns.model.TransformerLM(_config(ns, **sizes))
    return {"count": ns.model.parameter_count(_config(ns, **sizes)),
            "registered": sum(p.numel() for p in model.parameters())}


def judge_parameter_count_vs_model(out, inputs, expected):
    if isinstance(out["count"], bool) or not isinstance(out["count"], int):
        return f"parameter_count should return a Python int, got {type(out['count']).__name__}"
    if out["count"] != out["registered"]:
        why = _count_mistake(out["count"], inputs["sizes"])
        return (f"for {_describe(inputs['sizes'])} parameter_count gives {out['count']:,} but TransformerLM "
                f"registers {out['registered']:,}" + (f": {why}" if why else ""))
    return None


PUBLISHED = [dict(vocab_size=32, block_size=64, n_layers=2, d_model=64, n_heads=4, d_ff=256),
             dict(vocab_size=10, block_size=6, n_layers=2, d_model=4, n_heads=2, d_ff=8)]


def _random_configs(g, count=4):
    configs = []
    for _ in range(count):
        pick = lambda low, high: int(torch.randint(low, high + 1, (1,), generator=g))  # noqa: E731
        h = pick(1, 4)
        configs.append(dict(vocab_size=pick(5, 60), block_size=pick(3, 40), n_layers=pick(1, 4),
                            d_model=h * pick(1, 6), n_heads=h, d_ff=pick(2, 40)))
    return configs


# ------------------------------------------------------------------ the parts


def probe_lm_counts(ns, configs):
    return {"counts": [sum(p.numel() for p in ns.model.TransformerLM(_config(ns, **sizes)).parameters())
                       for sizes in configs]}


def _judge_lm_counts(out, inputs, hidden):
    for count, sizes in zip(out["counts"], inputs["configs"]):
        if count == _ledger(sizes):
            continue
        why = _count_mistake(count, sizes)
        if hidden:
            return ("for one of the hidden configurations TransformerLM registers a different number of "
                    f"parameters than the ledger {LEDGER}" + (f": {why}" if why else ""))
        return (f"for {_describe(sizes)} TransformerLM(cfg) registers {count:,} parameters; the ledger "
                f"{LEDGER} gives {_ledger(sizes):,}" + (f": {why}" if why else ""))
    return None


def judge_lm_ledger(out, inputs, expected):
    return _judge_lm_counts(out, inputs, hidden=False)


def judge_lm_ledger_hidden(out, inputs, expected):
    return _judge_lm_counts(out, inputs, hidden=True)


def judge_lm_heads(out, inputs, expected):
    counts = out["counts"]
    if len(set(counts)) != 1:
        return (f"the parameter count changes with the number of heads ({', '.join(f'{c:,}' for c in counts)} "
                "for h = 1, 2, 4): heads split d into slices, they add no parameters")
    return _judge_lm_counts(out, inputs, hidden=False)


def probe_lm_parts(ns, sizes):
    from torch import nn

    model = ns.model.TransformerLM(_config(ns, **sizes))
    parts = {name: getattr(model, name, None)
             for name in ("token_embedding", "position_embedding", "blocks", "ln_final", "head")}
    blocks, head, ln_final, token = parts["blocks"], parts["head"], parts["ln_final"], parts["token_embedding"]
    listed = list(blocks) if isinstance(blocks, (list, tuple, nn.Module)) and hasattr(blocks, "__iter__") else []
    block_parameters = [{id(p) for p in b.parameters()} for b in listed if isinstance(b, nn.Module)]
    shared = any(block_parameters[i] & block_parameters[j]
                 for i in range(len(block_parameters)) for j in range(i + 1, len(block_parameters)))
    head_weight = getattr(head, "weight", None)
    token_weight = getattr(token, "weight", None)
    tied = (isinstance(head_weight, torch.Tensor) and isinstance(token_weight, torch.Tensor)
            and (head_weight is token_weight or (head_weight.shape == token_weight.shape
                                                 and head_weight.data_ptr() == token_weight.data_ptr())))
    return {
        "missing": [name for name, part in parts.items() if part is None],
        "blocks_type": type(blocks).__name__,
        "blocks_registered": isinstance(blocks, nn.Module),
        "n_blocks": len(listed),
        "distinct_blocks": len({id(b) for b in listed}),
        "block_types": sorted({type(b).__name__ for b in listed}),
        "blocks_share_parameters": shared,
        "head_type": type(head).__name__,
        "head_bias": getattr(head, "bias", None) is not None,
        "head_shape": list(head_weight.shape) if isinstance(head_weight, torch.Tensor) else None,
        "tied": tied,
        "ln_final_type": type(ln_final).__name__,
        "ln_final_size": (getattr(ln_final, "weight", None).numel()
                          if isinstance(getattr(ln_final, "weight", None), torch.Tensor) else None),
        "names": {name: list(p.shape) for name, p in model.named_parameters()},
    }


def _missing(out, *names):
    gone = [name for name in names if name in out["missing"]]
    if gone:
        return (f"TransformerLM has no attribute(s) {', '.join(gone)}; the names token_embedding, "
                "position_embedding, blocks, ln_final, head are part of the contract")
    return None


def judge_lm_blocks(out, inputs, expected):
    if problem := _missing(out, "blocks"):
        return problem
    N = _full_sizes(inputs["sizes"])["n_layers"]
    if out["n_blocks"] != N:
        return f"model.blocks holds {out['n_blocks']} blocks; n_layers = {N} asks for {N}"
    if out["distinct_blocks"] != N:
        return (f"one block object reused N times: model.blocks holds {out['distinct_blocks']} distinct "
                f"object(s) for {N} places. [TransformerBlock(cfg)] * N repeats one object; build a new "
                "block for each layer")
    if out["block_types"] != ["TransformerBlock"]:
        return f"model.blocks should hold TransformerBlock objects, found {', '.join(out['block_types'])}"
    if out["blocks_share_parameters"]:
        return "two blocks share parameters: every block needs its own (N separate, non-shared blocks)"
    if not out["blocks_registered"]:
        return (f"model.blocks is a plain {out['blocks_type']}: its parameters are not registered. "
                "Use nn.ModuleList")
    return None


def judge_lm_head(out, inputs, expected):
    if problem := _missing(out, "head", "token_embedding"):
        return problem
    s = _full_sizes(inputs["sizes"])
    if out["tied"]:
        return ("the head is tied to the token embedding (the same weight): this model's head is untied, "
                "with its own V×d weight")
    if out["head_bias"]:
        return "the head has a bias: it must be bias-free (nn.Linear(d, V, bias=False))"
    if out["head_shape"] != [s["vocab_size"], s["d_model"]]:
        return (f"head.weight has shape {out['head_shape']}, expected [V, d] = "
                f"[{s['vocab_size']}, {s['d_model']}] (nn.Linear(d, V) stores [V, d])")
    return None


def judge_lm_final_norm(out, inputs, expected):
    if "ln_final" in out["missing"]:
        return "there is no final LayerNorm: the model needs ln_final = LayerNorm(d) before the head"
    d = _full_sizes(inputs["sizes"])["d_model"]
    if out["ln_final_type"] != "LayerNorm" or out["ln_final_size"] != d:
        return f"ln_final should be the course's LayerNorm(d) with d = {d}, found {out['ln_final_type']}"
    return None


def judge_lm_names(out, inputs, expected):
    wanted, names = contract_names(inputs["sizes"]), out["names"]
    missing = [n for n in wanted if n not in names]
    extra = [n for n in names if n not in wanted]
    if missing or extra:
        parts = ([f"missing {', '.join(missing[:4])}{' …' if len(missing) > 4 else ''}"] if missing else []) + \
                ([f"unexpected {', '.join(extra[:4])}{' …' if len(extra) > 4 else ''}"] if extra else [])
        return ("the registered parameters do not follow the contract's names "
                "(token_embedding, position_embedding, blocks.i, ln_final, head): " + "; ".join(parts))
    for name, shape in wanted.items():
        if names[name] != shape:
            return f"{name} has shape {names[name]}, expected {shape}"
    return None


def probe_lm_init_forward(ns, sizes, idx):
    model = _model(ns, sizes)
    with torch.no_grad():
        out = model(idx.clone())
    return {"logits": out[0] if isinstance(out, (tuple, list)) else out}


def judge_lm_init_forward(out, inputs, expected):
    B, T = inputs["idx"].shape
    V = _full_sizes(inputs["sizes"])["vocab_size"]
    if problem := shape_problem(out["logits"], (B, T, V), "the logits"):
        return f"the forward pass on your model's parts: {problem}"
    return None


# -------------------------------------------------------------------- forward


def probe_lm_forward(ns, sizes, state, idx, targets):
    model = _model(ns, sizes, state)
    with torch.no_grad():
        plain = model(idx.clone())
        scored = model(idx.clone(), targets.clone())
    as_list = lambda value: [v for v in value] if isinstance(value, (tuple, list)) else value  # noqa: E731
    return {"plain": as_list(plain), "scored": as_list(scored)}


def _triple(value, what):
    if not isinstance(value, list) or len(value) != 3:
        return f"{what} should return (logits, loss, presents), got {type(value).__name__}"
    value[:] = [v for v in value]
    return None


def judge_lm_shapes(out, inputs, expected):
    B, T = inputs["idx"].shape
    V = _full_sizes(inputs["sizes"])["vocab_size"]
    if problem := _triple(out["plain"], "model(idx)"):
        return problem
    logits, loss, presents = out["plain"]
    if problem := shape_problem(logits, (B, T, V), "the logits"):
        return f"{problem}: one score per vocabulary entry at every position, [B, T, V]"
    if loss is not None:
        return "without targets the loss should be None"
    if presents is not None:
        return "with use_cache=False presents should be None"
    return None


def judge_lm_loss(out, inputs, expected):
    if problem := _triple(out["scored"], "model(idx, targets)"):
        return problem
    logits, loss, _ = out["scored"]
    targets = inputs["targets"]
    if loss is None:
        return "targets were given but the loss is None: return cross_entropy(logits, targets)"
    if not isinstance(loss, torch.Tensor) or not isinstance(logits, torch.Tensor):
        return "the logits and the loss should be tensors"
    if loss.dim() == 0 and logits.shape[:-1] == targets.shape:
        shifted = _stable_cross_entropy(logits[:, :-1], targets[:, 1:])
        if not matches(loss, _stable_cross_entropy(logits, targets), atol=1e-10, rtol=1e-9) and matches(
                loss, shifted, atol=1e-10, rtol=1e-9):
            return ("the targets are shifted again: targets[b, t] is already the token that follows idx[b, t], "
                    "so score logits[:, t] against targets[:, t]")
    if problem := _judge_loss(loss, logits, targets, "the loss"):
        return f"the loss should be the cross-entropy of the returned logits against the targets: {problem}"
    return None


def judge_lm_final_norm_feeds_head(out, inputs, expected):
    if problem := _triple(out["plain"], "model(idx)"):
        return problem
    logits = out["plain"][0]
    B, T = inputs["idx"].shape
    state = inputs["state"]
    constant = state["head.weight"] @ state["ln_final.bias"]
    if problem := shape_problem(logits, (B, T, constant.shape[0]), "the logits"):
        return problem
    if matches(logits, constant.expand(B, T, -1), atol=1e-9, rtol=1e-7):
        return None
    return ("with ln_final's gamma set to 0 and beta to b, every position's logits should be head(b): the head "
            "must read the final LayerNorm's output (logits = head(ln_final(hidden))), and nothing may come "
            "after it")


def judge_lm_positions_matter(out, inputs, expected):
    if problem := _triple(out["plain"], "model(idx)"):
        return problem
    logits = out["plain"][0]
    if problem := shape_problem(logits, (*inputs["idx"].shape, _full_sizes(inputs["sizes"])["vocab_size"]),
                                "the logits"):
        return problem
    if matches(logits, logits[:, :1].expand_as(logits), atol=1e-9, rtol=1e-7):
        return ("a token repeated at every position gets the same logits at every position: the position "
                "embeddings are not added to the token embeddings")
    return None


def probe_lm_logits(ns, sizes, state, idx):
    model = _model(ns, sizes, state)
    with torch.no_grad():
        return {"logits": model(idx.clone())[0]}


def judge_lm_causal(out, inputs, expected):
    return causal_diagnosis(out["idx"]["logits"], out["changed"]["logits"], inputs["_first_changed"], "the model")


def probe_lm_cache(ns, sizes, state, idx, chunks, part, earlier):
    model = _model(ns, sizes, state)
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


def judge_lm_cache(out, inputs, expected, hidden=False):
    B, T = inputs["idx"].shape
    s = _full_sizes(inputs["sizes"])
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
                        f"{[B, h, seen, d_h]}, got {pair[0]}: pass each block its own past and keep its present")
    if compare(out["stepwise"], out["full"], atol=1e-9, rtol=1e-7) is None:
        return None
    if matches(out["stepwise"], out["no_offset"], atol=1e-9, rtol=1e-7):
        return ("positions are not offset by the cache length: tokens fed after a cache of length L sit at "
                "positions L, L + 1, …; yours restart at 0. Pass past_length (the cached keys' length) to "
                "the position embedding")
    problem = compare(out["stepwise"], out["full"], "the cached logits", atol=1e-9, rtol=1e-7)
    return f"feeding the tokens in pieces through the KV cache differs from one full pass: {problem}"


def judge_lm_cache_hidden(out, inputs, expected):
    return judge_lm_cache(out, inputs, expected, hidden=True)


LM_MISTAKES = {
    "no_final_norm": "there is no final LayerNorm before the head: logits = head(ln_final(hidden))",
    "no_positions": "the position embeddings are not added to the token embeddings",
    "first_block_only": "only the first block is applied: run the hidden state through every block in turn",
    "last_block_only": "only the last block is applied, or every block reads the embeddings instead of the previous "
                       "block's output: each block reads what the block before it returned",
    "no_blocks": "the blocks are never applied",
    "final_norm_twice": "the final LayerNorm is applied twice",
    "blocks_reversed": "the blocks run in reverse order: blocks[0] comes first",
}


def _lm_composed(model, idx):
    """The model's own parts composed as the lesson's forward, and as the classic wrong ones."""
    with torch.no_grad():
        tokens = model.token_embedding(idx)
        hidden = model.position_embedding(tokens, 0)

        def through(h, blocks):
            for block in blocks:
                h = block(h)[0]
            return h

        head = lambda h: model.head(model.ln_final(h))  # noqa: E731
        blocks = list(model.blocks)
        return {
            "right": head(through(hidden, blocks)),
            "no_final_norm": model.head(through(hidden, blocks)),
            "no_positions": head(through(tokens, blocks)),
            "first_block_only": head(through(hidden, blocks[:1])),
            "last_block_only": head(through(hidden, blocks[-1:])),
            "no_blocks": head(hidden),
            "final_norm_twice": model.head(model.ln_final(model.ln_final(through(hidden, blocks)))),
            "blocks_reversed": head(through(hidden, blocks[::-1])),
        }


def _expect_lm(ref, inputs):
    """The reference logits and loss, and what the classic wrong forwards would output."""
    model = _model(ref, inputs["sizes"], inputs["state"])
    composed = _lm_composed(model, inputs["idx"])
    right = composed["right"]
    return {"logits": right, "loss": _stable_cross_entropy(right, inputs["targets"]),
            "mistakes": [(text, composed[label]) for label, text in LM_MISTAKES.items()]}


def probe_lm_formula(ns, sizes, state, idx, targets=None):
    model = _model(ns, sizes, state)
    with torch.no_grad():
        return {"logits": model(idx.clone())[0], "composed": _lm_composed(model, idx.clone())}


def judge_lm_formula(out, inputs, expected):
    composed = out["composed"]
    if compare(out["logits"], composed["right"], atol=1e-9, rtol=1e-7) is None:
        return None
    known = first_diagnosis(out["logits"], [(text, composed[label]) for label, text in LM_MISTAKES.items()],
                            atol=1e-8, rtol=1e-6)
    return known or (compare(out["logits"], composed["right"], "the logit tensor", atol=1e-9, rtol=1e-7)
                     + ": the logits are not head(ln_final(blocks(token_embedding + position_embedding))) "
                       "computed with the model's own parts")


def judge_lm_reference(out, inputs, expected):
    if problem := _triple(out["scored"], "model(idx, targets)"):
        return problem
    logits, loss, _ = out["scored"]
    if compare(logits, expected["logits"], atol=1e-9, rtol=1e-7) is not None:
        known = first_diagnosis(logits, expected["mistakes"], atol=1e-8, rtol=1e-6)
        return known or compare(logits, expected["logits"], "the logit tensor", atol=1e-9, rtol=1e-7)
    if not isinstance(loss, torch.Tensor) or compare(loss, expected["loss"], atol=1e-10, rtol=1e-9) is not None:
        return "the logits are right but the loss is not their mean cross-entropy against the targets"
    return None


SIZES = dict(vocab_size=11, block_size=12, d_model=8, n_heads=2, n_layers=2, d_ff=16)
HIDDEN_SIZES = dict(vocab_size=13, block_size=10, d_model=12, n_heads=3, n_layers=3, d_ff=20)


def _lm_inputs(sizes, B=2, T=7):
    def make(g):
        V = sizes["vocab_size"]
        return {"sizes": sizes, "state": random_lm_state(g, sizes),
                "idx": torch.randint(0, V, (B, T), generator=g), "targets": torch.randint(0, V, (B, T), generator=g)}
    return make


def _lm_final_norm_inputs(g):
    inputs = _lm_inputs(SIZES)(g)
    inputs["state"]["ln_final.weight"] = torch.zeros(SIZES["d_model"], dtype=torch.float64)
    return inputs


def _lm_repeated_inputs(g):
    inputs = _lm_inputs(SIZES, T=6)(g)
    inputs["idx"] = torch.tensor([[3] * 6, [7] * 6])
    return inputs


def _lm_causal_inputs(g):
    inputs = _lm_inputs(SIZES, T=8)(g)
    changed = inputs["idx"].clone()
    V = SIZES["vocab_size"]
    changed[:, 5:] = (changed[:, 5:] + 1 + torch.randint(0, V - 1, (2, 3), generator=g)) % V  # every one differs
    return {"sizes": SIZES, "state": inputs["state"], "idx": inputs["idx"], "changed": changed, "_first_changed": 5}


def _lm_cache_inputs(sizes, chunks):
    def make(g):
        inputs = _lm_inputs(sizes, T=sum(chunks))(g)
        return {"sizes": sizes, "state": inputs["state"], "idx": inputs["idx"], "chunks": list(chunks)}
    return make


# ----------------------------------------------------------------------- checks

CHECKS = [
    check("ch07.cross_entropy.matches_log_softmax", "cross_entropy", 2,
          "logits [2, 3, 5]: the loss equals the mean of −log softmax(logits)[target]",
          probe_cross_entropy, judge_cross_entropy, inputs=_logits_inputs((2, 3, 5))),
    check("ch07.cross_entropy.huge_logits", "cross_entropy", 2,
          "logits around ±1e4 give a finite, exact loss (the max is subtracted before exp)",
          probe_cross_entropy, judge_cross_entropy_huge, inputs=_huge_logits),
    check("ch07.cross_entropy.tiny_probabilities", "cross_entropy", 1,
          "a target whose logit is 1e4 below the others gives the finite loss 1e4 (no log of an underflowed 0)",
          probe_cross_entropy, judge_cross_entropy_tiny,
          inputs=lambda g: {"logits": torch.tensor([[[0.0, -1e4, 0.0], [2.0, 1.0, -1e4 + 2.0]]], dtype=torch.float64),
                            "targets": torch.tensor([[1, 2]])}),
    check("ch07.cross_entropy.uniform", "cross_entropy", 1,
          "all-zero logits over V = 27 classes give exactly log 27 ≈ 3.295837",
          probe_cross_entropy, judge_cross_entropy_uniform,
          inputs=lambda g: {"logits": torch.zeros(2, 4, 27, dtype=torch.float64),
                            "targets": torch.randint(0, 27, (2, 4), generator=g)}),
    check("ch07.cross_entropy.gradient", "cross_entropy", 1,
          "the loss stays differentiable: d loss / d logits = (softmax − one-hot) / N",
          probe_cross_entropy_gradient, judge_cross_entropy_gradient, inputs=_logits_inputs((3, 4, 6))),
    check("ch07.cross_entropy.matches_reference", "cross_entropy", 2,
          "random logits of other shapes ([N, V] and [B, T, V]) match the reference",
          probe_cross_entropy, judge_cross_entropy_hidden, inputs=_logits_inputs((17, 9), scale=4.0), hidden=True),
    check("ch07.parameter_count.published_figures", "parameter_count", 2,
          "V=32, C=64, N=2, d=64, h=4, f=256 gives 107,776; V=10, C=6, N=2, d=4, h=2, f=8 gives 424",
          probe_parameter_count, judge_parameter_count, inputs=lambda g: {"configs": PUBLISHED}),
    check("ch07.parameter_count.matches_model", "parameter_count", 1,
          "parameter_count(cfg) equals the parameters TransformerLM(cfg) registers",
          probe_parameter_count_vs_model, judge_parameter_count_vs_model,
          inputs=lambda g: {"sizes": dict(vocab_size=27, block_size=16, n_layers=3, d_model=12, n_heads=3, d_ff=48)}),
    check("ch07.parameter_count.random_configs", "parameter_count", 2,
          "random configurations follow the ledger " + LEDGER,
          probe_parameter_count, judge_parameter_count_hidden, inputs=lambda g: {"configs": _random_configs(g)},
          hidden=True),
    check("ch07.lm_init.parameter_ledger", "lm_init", 2,
          "TransformerLM registers 107,776 parameters for V=32, C=64, N=2, d=64, h=4, f=256 and 424 for "
          "V=10, C=6, N=2, d=4, h=2, f=8",
          probe_lm_counts, judge_lm_ledger, inputs=lambda g: {"configs": PUBLISHED}),
    check("ch07.lm_init.separate_blocks", "lm_init", 2,
          "model.blocks holds N distinct TransformerBlock objects that share no parameters",
          probe_lm_parts, judge_lm_blocks, inputs=lambda g: {"sizes": dict(SIZES, n_layers=3)}),
    check("ch07.lm_init.untied_bias_free_head", "lm_init", 2,
          "the head is its own [V, d] weight: no bias, not tied to the token embedding",
          probe_lm_parts, judge_lm_head, inputs=lambda g: {"sizes": SIZES}),
    check("ch07.lm_init.final_layer_norm", "lm_init", 1, "the model has ln_final, a LayerNorm(d)",
          probe_lm_parts, judge_lm_final_norm, inputs=lambda g: {"sizes": SIZES}),
    check("ch07.lm_init.module_names", "lm_init", 1,
          "the parameters carry the contract's names (token_embedding, position_embedding, blocks.i, "
          "ln_final, head) and shapes",
          probe_lm_parts, judge_lm_names, inputs=lambda g: {"sizes": SIZES}),
    check("ch07.lm_init.heads_do_not_change_count", "lm_init", 1,
          "h = 1, 2, 4 with d = 8 give the same count, the ledger's",
          probe_lm_counts, judge_lm_heads,
          inputs=lambda g: {"configs": [dict(SIZES, n_heads=h) for h in (1, 2, 4)]}),
    check("ch07.lm_init.forward_runs", "lm_init", 1,
          "the forward pass runs on your parts and gives logits [2, 5, V]",
          probe_lm_init_forward, judge_lm_init_forward,
          inputs=lambda g: {"sizes": SIZES, "idx": torch.randint(0, 11, (2, 5), generator=g)}),
    check("ch07.lm_init.ledger_random_configs", "lm_init", 2,
          "random configurations register exactly the ledger's count",
          probe_lm_counts, judge_lm_ledger_hidden, inputs=lambda g: {"configs": _random_configs(g, 3)},
          hidden=True),
    check("ch07.lm_forward.shapes", "lm_forward", 2,
          "idx [2, 7] gives logits [2, 7, V]; loss and presents are None unless asked for",
          probe_lm_forward, judge_lm_shapes, inputs=_lm_inputs(SIZES)),
    check("ch07.lm_forward.loss", "lm_forward", 2,
          "with targets the loss equals the mean cross-entropy of the returned logits",
          probe_lm_forward, judge_lm_loss, inputs=_lm_inputs(SIZES)),
    check("ch07.lm_forward.formula", "lm_forward", 2,
          "3 blocks: the logits are head(ln_final(blocks(token_embedding + position_embedding))) of the model's own "
          "parts, each block reading the one before",
          probe_lm_formula, judge_lm_formula, inputs=_lm_inputs(dict(SIZES, n_layers=3), T=6)),
    check("ch07.lm_forward.final_norm_feeds_head", "lm_forward", 1,
          "with ln_final's gamma = 0 and beta = b every position's logits are head(b): the head reads ln_final",
          probe_lm_forward, judge_lm_final_norm_feeds_head, inputs=_lm_final_norm_inputs),
    check("ch07.lm_forward.positions_matter", "lm_forward", 1,
          "a token repeated at every position gets different logits at different positions",
          probe_lm_forward, judge_lm_positions_matter, inputs=_lm_repeated_inputs),
    check("ch07.lm_forward.causal_invariance", "lm_forward", 2,
          "changing tokens 5.. leaves the logits at positions 0..4 unchanged (the whole model)",
          probe_lm_logits, judge_lm_causal, inputs=_lm_causal_inputs, separately=("idx", "changed")),
    check("ch07.lm_forward.cache_matches_full", "lm_forward", 3,
          "a 3-token prompt then 4 tokens one at a time through past_key_values gives the logits of one "
          "full pass; presents hold one (keys, values) per block",
          probe_lm_cache, judge_lm_cache, inputs=_lm_cache_inputs(SIZES, (3, 1, 1, 1, 1)), parts=("full", "stepwise")),
    check("ch07.lm_forward.matches_reference", "lm_forward", 3,
          "random weights (the reference's state_dict) give the reference logits and loss",
          probe_lm_forward, judge_lm_reference, inputs=_lm_inputs(HIDDEN_SIZES, B=3, T=9), expect=_expect_lm,
          hidden=True),
    check("ch07.lm_forward.cache_chunks", "lm_forward", 1,
          "uneven chunks through the cache give the logits of one full pass",
          probe_lm_cache, judge_lm_cache_hidden, inputs=_lm_cache_inputs(HIDDEN_SIZES, (4, 2, 1, 3)), hidden=True,
          parts=("full", "stepwise")),
]
