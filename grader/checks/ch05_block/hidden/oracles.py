"""Chapter 05's formulas written out in plain torch, the kit's own: LayerNorm (with a
switch for each classic mistake) and the block's parameter count. The hidden checks
judge with them; on the public checks' fixed inputs the kit writes what they give into
facts.json (grader/generate/facts.py), and chapter 06's kit code builds its forwards
with this LayerNorm.
"""

from __future__ import annotations

import math

import torch

from grader.checks._api import exact_gelu, tanh_gelu
from grader.checks.ch05_block.feedforward import FEEDFORWARD_MISTAKES
from grader.checks.ch05_block.gelu import GELU_MISTAKES
from grader.checks.ch05_block.layer_norm import LAYER_NORM_MISTAKES, combination_name, slip_combinations
from grader.checks.course import EPS


def layer_norm(x, gamma, beta, eps=EPS, divisor_offset=0, dims=(-1,), eps_outside=False):
    """LayerNorm over `dims`; the keyword arguments reproduce the classic mistakes
    (d - 1 divisor, eps outside the root, statistics over the wrong axes)."""
    mean = x.mean(dim=dims, keepdim=True)
    centred = x - mean
    count = math.prod(x.shape[d] for d in dims)
    variance = (centred * centred).sum(dim=dims, keepdim=True) / (count - divisor_offset)
    scale = torch.sqrt(variance) + eps if eps_outside else torch.sqrt(variance + eps)
    return centred / scale * gamma + beta


def layer_norm_with_slips(x, gamma, beta, slips=()):
    """LayerNorm over the last axis with the named LAYER_NORM_SLIPS made."""
    if "no_affine" in slips:
        gamma, beta = torch.ones_like(gamma), torch.zeros_like(beta)
    return layer_norm(x, gamma, beta, eps=0.0 if "no_eps" in slips else EPS,
                      divisor_offset=1 if "d_minus_1" in slips else 0, eps_outside="eps_outside" in slips)


def layer_norm_mistakes(x, gamma, beta):
    """{name: output} of each classic mistake (LAYER_NORM_MISTAKES), then of each combination
    of the formula's slips (LAYER_NORM_SLIPS) made at once (layer_norm_mistake_texts)."""
    singles = {"d_minus_1": layer_norm(x, gamma, beta, divisor_offset=1),
               "no_eps": layer_norm(x, gamma, beta, eps=0.0),
               "eps_outside": layer_norm(x, gamma, beta, eps_outside=True),
               "no_affine": layer_norm(x, torch.ones_like(gamma), torch.zeros_like(beta)),
               "time_axis": layer_norm(x, gamma, beta, dims=(-2,)) if x.dim() >= 2 else x,
               "all_axes": layer_norm(x, gamma, beta, dims=tuple(range(x.dim())))}
    assert singles.keys() == LAYER_NORM_MISTAKES.keys(), "a LayerNorm mistake has a sentence but no output"
    return singles | {combination_name(slips): layer_norm_with_slips(x, gamma, beta, slips)
                      for slips in slip_combinations()}


def block_parameters(d: int, f: int) -> int:
    """One pre-LN block: Q/K/V/O 4d², the feed-forward 2df + f + d, two LayerNorms 4d."""
    return 4 * d * d + 2 * d * f + f + 5 * d


def model_parameters(sizes: dict) -> int:
    V, C, N, d, f = (sizes[k] for k in ("vocab_size", "block_size", "n_layers", "d_model", "d_ff"))
    return 2 * V * d + C * d + N * block_parameters(d, f) + 2 * d


def gelu_mistakes(x):
    outputs = {"tanh": tanh_gelu(x), "relu": torch.relu(x), "sigmoid": x * torch.sigmoid(1.702 * x), "identity": x,
               "phi_alone": 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))}
    assert outputs.keys() == GELU_MISTAKES.keys(), "a GELU mistake has a sentence but no output"
    return outputs


def feedforward_facts(x, state):
    w1, b1, w2, b2 = state["fc1.weight"], state["fc1.bias"], state["fc2.weight"], state["fc2.bias"]
    pre = x @ w1.T + b1
    outputs = {"no_nonlinearity": pre @ w2.T + b2, "relu": torch.relu(pre) @ w2.T + b2,
               "tanh": tanh_gelu(pre) @ w2.T + b2, "no_b2": exact_gelu(pre) @ w2.T,
               "no_b1": exact_gelu(x @ w1.T) @ w2.T + b2}
    assert outputs.keys() == FEEDFORWARD_MISTAKES.keys(), "a feed-forward mistake has a sentence but no output"
    return {"right": exact_gelu(pre) @ w2.T + b2, "mistakes": outputs}
