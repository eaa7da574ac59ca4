"""The course's contract, in one place: the sizes the lessons walk through, the
configuration and module names the lessons fix, the parameter ledger's formula (as the
lessons write it; the counts it gives are data the kit computes, facts.json), and
random states for those names. A rename in the lessons touches this file, not the checks.

Imported on both sides (the sandbox builds modules with it, the grader computes
expected values with it), so it needs torch and nothing else."""

from __future__ import annotations

import torch

F64 = torch.float64
EPS = 1e-5  # LayerNorm's and RMSNorm's eps, inside the square root

# Chapter 04 and 05's walk-through: B=2, T=3, d=4, h=2, f=8, chosen so no two axes are equal.
WALK_THROUGH = {"batch": 2, "time": 3, "d_model": 4, "n_heads": 2, "d_ff": 8}
# The published model of chapter 07: V=32, C=64, N=2, d=64, h=4, f=256 has 107,776 parameters.
PUBLISHED = {"vocab_size": 32, "block_size": 64, "n_layers": 2, "d_model": 64, "n_heads": 4, "d_ff": 256}

CONFIG_FIELDS = ("vocab_size", "block_size", "d_model", "n_heads", "n_layers", "d_ff", "dropout")
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj")  # attention's four bias-free d×d linears
BLOCK_PARTS = ("ln_attention", "attention", "ln_feedforward", "feedforward")
LM_PARTS = ("token_embedding", "position_embedding", "blocks", "ln_final", "head")
LEDGER = "2Vd + Cd + N(4d² + 2df + f + 5d) + 2d"


def config(ns, defaults: dict, **sizes):
    """The student's Config, from a chapter's default sizes with `sizes` on top."""
    return ns.model.Config(**{"dropout": 0.0, **defaults, **sizes})


def random_block_state(g: torch.Generator, sizes: dict, prefix: str = "", scale: float = 1.0) -> dict:
    """A block's state_dict under the contract's names, drawn in a fixed order."""
    d, f = sizes["d_model"], sizes["d_ff"]
    r = lambda *shape, s=0.5: torch.randn(*shape, generator=g, dtype=F64) * s * scale  # noqa: E731
    state = {"ln_attention.weight": 1 + r(d, s=0.3), "ln_attention.bias": r(d, s=0.3),
             "attention.q_proj.weight": r(d, d), "attention.k_proj.weight": r(d, d),
             "attention.v_proj.weight": r(d, d), "attention.o_proj.weight": r(d, d),
             "ln_feedforward.weight": 1 + r(d, s=0.3), "ln_feedforward.bias": r(d, s=0.3),
             "feedforward.fc1.weight": r(f, d), "feedforward.fc1.bias": r(f),
             "feedforward.fc2.weight": r(d, f), "feedforward.fc2.bias": r(d)}
    return {prefix + key: value for key, value in state.items()}


def random_lm_state(g: torch.Generator, sizes: dict, scale: float = 1.0) -> dict:
    """The whole model's state_dict under the contract's names (chapter 07), with
    weights large enough that every mistake shows."""
    V, C, d = sizes["vocab_size"], sizes["block_size"], sizes["d_model"]
    r = lambda *shape, s=1.0: torch.randn(*shape, generator=g, dtype=F64) * s * scale  # noqa: E731
    state = {"token_embedding.weight": r(V, d), "position_embedding.weight": r(C, d)}
    for i in range(sizes["n_layers"]):
        state.update(random_block_state(g, sizes, prefix=f"blocks.{i}.", scale=scale))
    state.update({"ln_final.weight": 1 + r(d, s=0.3), "ln_final.bias": r(d, s=0.3), "head.weight": r(V, d, s=0.5)})
    return state


# What a probe can find wrong with an object the student's code built before it can ask
# anything of it, in the kit's words (a probe raises Unfit(key); the worker sends the key).
UNFIT = {
    "lazy_parameters": "creates parameters lazily (nn.LazyLinear and the like): they have no shape until the first "
                       "forward, so the model cannot be loaded, counted or optimised before it; create every "
                       "parameter with its shape in __init__ (nn.Linear(d_in, d_out))",
}


class Unfit(Exception):
    """Raised by a probe (never by student code, which could only make its own grade
    worse by raising it): the object is unfit for the reason UNFIT[key] gives."""

    def __init__(self, key: str):
        super().__init__(UNFIT[key])
        self.key = key


def fit(module):
    """The module a student's __init__ built, once it is fit to be probed: every parameter
    has its shape (none is created lazily); else Unfit says why."""
    if isinstance(module, torch.nn.Module) and any(isinstance(p, torch.nn.parameter.UninitializedParameter)
                                                   for p in module.parameters()):
        raise Unfit("lazy_parameters")
    return module


def load_state(module: torch.nn.Module, state: dict | None) -> torch.nn.Module:
    """module in float64 holding a copy of `state` (every name, strictly), in eval mode."""
    module = fit(module).double()
    if state:
        module.load_state_dict({k: v.clone() for k, v in state.items()}, strict=True)
    return module.eval()
