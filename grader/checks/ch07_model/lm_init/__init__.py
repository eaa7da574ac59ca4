"""TransformerLM's parts: token_embedding, position_embedding, blocks, ln_final, head.

The names and shapes are part of the contract. The checks pin the registered count
against the ledger (the lesson's figures, random configurations, any number of heads),
N separate blocks in an nn.ModuleList, an untied bias-free head, the final LayerNorm,
and that the forward pass runs on the student's parts. The ledger's counts for the public
configurations are data the kit computed (grader/checks/facts.py).
"""

from __future__ import annotations

import torch

from grader.checks._api import Task, check, plain_shape, shape_problem, shown_count, shown_shape
from grader.checks.catalogue import known_class_name
from grader.checks.ch07_model.common import FIGURES, SIZES, count_problem, describe_value, full_sizes, model_of
from grader.checks.course import LEDGER, LM_PARTS, config, random_lm_state
from grader.checks.facts import known_facts

TASKS = [
    Task("lm_init", "model", "TransformerLM.__init__", "the model's parts"),
]


# ------------------------------------------------------------------ the count


def probe_lm_counts(ns, configs):
    return {"counts": [sum(p.numel() for p in ns.model.TransformerLM(config(ns, SIZES, **sizes)).parameters())
                       for sizes in configs]}


def judge_lm_counts(out, inputs, facts, hidden):
    """facts: per configuration, the ledger's count and the known mistakes' (count_problem)."""
    for count, sizes, said in zip(out["counts"], inputs["configs"], facts):
        if count == said["ledger"]:
            continue
        why = count_problem(count, said)
        if hidden:
            return ("for one of the hidden configurations TransformerLM registers a different number of "
                    f"parameters than the ledger {LEDGER}" + (f": {why}" if why else ""))
        return (f"for {describe_value(sizes)} TransformerLM(cfg) registers {shown_count(count)} parameters; the ledger "
                f"{LEDGER} gives {said['ledger']:,}" + (f": {why}" if why else ""))
    return None


@check("parameter_ledger", 2,
       "TransformerLM registers 107,776 parameters for V=32, C=64, N=2, d=64, h=4, f=256 and 424 for "
       "V=10, C=6, N=2, d=4, h=2, f=8",
       probe=probe_lm_counts, inputs=lambda g: {"configs": FIGURES})
def parameter_ledger(out, inputs, expected):
    return judge_lm_counts(out, inputs, known_facts(inputs), hidden=False)


# ------------------------------------------------------------------ the parts


def probe_lm_parts(ns, sizes):
    from torch import nn

    model = ns.model.TransformerLM(config(ns, SIZES, **sizes))
    parts = {name: getattr(model, name, None) for name in LM_PARTS}
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


@check("separate_blocks", 2, "model.blocks holds N distinct TransformerBlock objects that share no parameters",
       probe=probe_lm_parts, inputs=lambda g: {"sizes": dict(SIZES, n_layers=3)})
def separate_blocks(out, inputs, expected):
    if problem := _missing(out, "blocks"):
        return problem
    N = full_sizes(inputs["sizes"])["n_layers"]
    if out["n_blocks"] != N:
        return f"model.blocks holds {out['n_blocks']} blocks; n_layers = {N} asks for {N}"
    if out["distinct_blocks"] != N:
        return (f"one block object reused N times: model.blocks holds {out['distinct_blocks']} distinct "
                f"object(s) for {N} places. [TransformerBlock(cfg)] * N repeats one object; build a new "
                "block for each layer")
    if out["block_types"] != ["TransformerBlock"]:
        found = sorted({known_class_name(kind) or "objects of another class" for kind in out["block_types"]})
        return f"model.blocks should hold TransformerBlock objects, found {', '.join(found)}"
    if out["blocks_share_parameters"]:
        return "two blocks share parameters: every block needs its own (N separate, non-shared blocks)"
    if not out["blocks_registered"]:
        kind = known_class_name(out["blocks_type"])
        return (f"model.blocks is {f'a plain {kind}' if kind else 'not an nn.Module'}: its parameters are not "
                "registered. Use nn.ModuleList")
    return None


@check("untied_bias_free_head", 2, "the head is its own [V, d] weight: no bias, not tied to the token embedding",
       probe=probe_lm_parts, inputs=lambda g: {"sizes": SIZES})
def untied_bias_free_head(out, inputs, expected):
    if problem := _missing(out, "head", "token_embedding"):
        return problem
    s = full_sizes(inputs["sizes"])
    if out["tied"]:
        return ("the head is tied to the token embedding (the same weight): this model's head is untied, "
                "with its own V×d weight")
    if out["head_bias"]:
        return "the head has a bias: it must be bias-free (nn.Linear(d, V, bias=False))"
    if plain_shape(out["head_shape"]) != [s["vocab_size"], s["d_model"]]:
        return (f"head.weight has shape {shown_shape(out['head_shape'])}, expected [V, d] = "
                f"[{s['vocab_size']}, {s['d_model']}] (nn.Linear(d, V) stores [V, d])")
    return None


@check("final_layer_norm", 1, "the model has ln_final, a LayerNorm(d)",
       probe=probe_lm_parts, inputs=lambda g: {"sizes": SIZES})
def final_layer_norm(out, inputs, expected):
    if "ln_final" in out["missing"]:
        return "there is no final LayerNorm: the model needs ln_final = LayerNorm(d) before the head"
    d = full_sizes(inputs["sizes"])["d_model"]
    if out["ln_final_type"] != "LayerNorm" or out["ln_final_size"] != d:
        found = known_class_name(out["ln_final_type"]) or "an object of another class"
        return f"ln_final should be the course's LayerNorm(d) with d = {d}, found {found}"
    return None


def contract_names(sizes):
    return {name: list(value.shape)
            for name, value in random_lm_state(torch.Generator().manual_seed(0), full_sizes(sizes)).items()}


@check("module_names", 1,
       "the parameters carry the contract's names (token_embedding, position_embedding, blocks.i, "
       "ln_final, head) and shapes",
       probe=probe_lm_parts, inputs=lambda g: {"sizes": SIZES})
def module_names(out, inputs, expected):
    wanted, names = contract_names(inputs["sizes"]), out["names"]
    missing = [n for n in wanted if n not in names]
    extra = [n for n in names if n not in wanted]
    if missing or extra:
        # An unexpected name is the submission's text: quoted only when spelt wholly in the
        # contract's words (blocks.0.attention.q_proj.bias), else only counted.
        spelt = [n for n in extra if _in_contract_words(n, wanted)]
        others = len(extra) - len(spelt)
        unexpected = ", ".join(spelt[:4]) + (" …" if len(spelt) > 4 else "")
        if others:
            unexpected += (" and " if spelt else "") + (f"{others} name{'s' if others > 1 else ''} of its own "
                                                        f"(not made of the contract's words)")
        parts = ([f"missing {', '.join(missing[:4])}{' …' if len(missing) > 4 else ''}"] if missing else []) + \
                ([f"unexpected {unexpected}"] if extra else [])
        return ("the registered parameters do not follow the contract's names "
                "(token_embedding, position_embedding, blocks.i, ln_final, head): " + "; ".join(parts))
    for name, shape in wanted.items():
        if plain_shape(names[name]) != shape:
            return f"{name} has shape {shown_shape(names[name])}, expected {shape}"
    return None


_INDICES = {str(i) for i in range(100)}


def _in_contract_words(name, wanted) -> bool:
    """Whether a parameter name is made only of the contract's own words (its module and
    parameter names, and small indices), so that quoting it repeats no text of the code's."""
    words = {word for key in wanted for word in key.split(".")} | {"weight", "bias"}
    parts = name.split(".") if isinstance(name, str) else []
    return 0 < len(parts) <= 6 and all(part in words or part in _INDICES for part in parts)


@check("heads_do_not_change_count", 1, "h = 1, 2, 4 with d = 8 give the same count, the ledger's",
       probe=probe_lm_counts, inputs=lambda g: {"configs": [dict(SIZES, n_heads=h) for h in (1, 2, 4)]})
def heads_do_not_change_count(out, inputs, expected):
    counts = out["counts"]
    if len(set(counts)) != 1:
        return (f"the parameter count changes with the number of heads ({', '.join(shown_count(c) for c in counts)} "
                "for h = 1, 2, 4): heads split d into slices, they add no parameters")
    return judge_lm_counts(out, inputs, known_facts(inputs), hidden=False)


def probe_lm_init_forward(ns, sizes, idx):
    model = model_of(ns, sizes)
    with torch.no_grad():
        out = model(idx.clone())
    return {"logits": out[0] if isinstance(out, (tuple, list)) else out}


@check("forward_runs", 1, "the forward pass runs on your parts and gives logits [2, 5, V]",
       probe=probe_lm_init_forward, runs_later=("lm_forward",),
       inputs=lambda g: {"sizes": SIZES, "idx": torch.randint(0, 11, (2, 5), generator=g)})
def forward_runs(out, inputs, expected):
    B, T = inputs["idx"].shape
    V = full_sizes(inputs["sizes"])["vocab_size"]
    if problem := shape_problem(out["logits"], (B, T, V), "the logits"):
        return f"the forward pass on your model's parts: {problem}"
    return None
