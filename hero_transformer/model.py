# Your copy of the course package. Fill in every part that raises
# NotImplementedError; `make check` tells you how each one is doing.
"""The GPT of chapters 02-07: embeddings, causal attention with a KV cache, the pre-LN
block and the full language model, kept in one file so it reads top to bottom.

Shapes: B batch, T time (tokens in this call), d model width, h heads, d_h = d / h,
f feed-forward width, V vocabulary, C context (block_size).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

LAYER_NORM_EPS = 1e-5


@dataclass(frozen=True)
class Config:
    vocab_size: int
    block_size: int
    d_model: int
    n_heads: int
    n_layers: int
    d_ff: int
    dropout: float = 0.0

    def __post_init__(self):
        for name in ("vocab_size", "block_size", "d_model", "n_heads", "n_layers", "d_ff"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"Config.{name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"Config.n_heads={self.n_heads} does not divide d_model={self.d_model}: "
                f"every head needs the same width d_model / n_heads"
            )
        if not isinstance(self.dropout, (int, float)) or isinstance(self.dropout, bool) or not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"Config.dropout must satisfy 0 <= dropout < 1, got {self.dropout!r}")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads


# ---------------------------------------------------------------- chapter 02: tokens


class TokenEmbedding(nn.Module):
    """One learned row of width d per token id: ids [B,T] -> vectors [B,T,d]."""

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, d_model))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Look up the row of every id. Ids that are not integers in [0, V) raise a
        ValueError that names the bad id, instead of an opaque indexing error."""
        raise NotImplementedError("embedding")


# ------------------------------------------------------------- chapter 03: positions


class PositionEmbedding(nn.Module):
    """Learned absolute positions: row p is added to the token at position p."""

    def __init__(self, block_size: int, d_model: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(block_size, d_model))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, hidden: torch.Tensor, past_length: int = 0) -> torch.Tensor:
        """Add position rows to hidden [B,T,d]. The first of these T tokens sits at
        position past_length (the tokens already in the KV cache come before it).
        Positions past block_size raise a ValueError: there is no row to add."""
        raise NotImplementedError("positions")


# ------------------------------------------------------------- chapter 04: attention


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with bias-free Q/K/V/O projections.

    forward(x, past_key_value=None, use_cache=False) -> (out, present)
    past_key_value and present are (keys, values), each [B, h, T_past, d_h].
    """

    def __init__(self, cfg: Config):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.d_head = cfg.d_head
        raise NotImplementedError("attention_init")
        self.attn_dropout = nn.Dropout(cfg.dropout)
        self.last_attention = None  # the weights [B, h, T, T_past + T] of the latest call

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, d] -> [B, h, T, d_h]: head i owns features i*d_h .. (i+1)*d_h - 1."""
        raise NotImplementedError("split_heads")

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """[B, h, T, d_h] -> [B, T, d]: the inverse of split_heads."""
        raise NotImplementedError("merge_heads")

    def forward(self, x, past_key_value=None, use_cache=False):
        """Attend from each of the T new positions to every earlier position, cached
        ones included, and to itself; never to a later one. Scores are scaled by
        1/sqrt(d_h). Keep the softmax weights in self.last_attention."""
        raise NotImplementedError("attention")


# ------------------------------------------------- chapter 05: norm, GELU, the block


class LayerNorm(nn.Module):
    """Normalise each position's d features (the last axis only), then scale by
    gamma (starts at 1) and shift by beta (starts at 0)."""

    def __init__(self, d_model: int, eps: float = LAYER_NORM_EPS):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))  # gamma
        self.bias = nn.Parameter(torch.zeros(d_model))  # beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, T, d] -> [B, T, d]. Mean and population variance (divide by d) over
        the last axis; eps goes inside the square root."""
        raise NotImplementedError("layer_norm")


def gelu(x: torch.Tensor) -> torch.Tensor:
    """Exact GELU: x * Phi(x) = x/2 * (1 + erf(x / sqrt 2)); not the tanh form.
    Element by element, on a tensor of any shape."""
    raise NotImplementedError("gelu")


class FeedForward(nn.Module):
    """Position-wise MLP: d -> f (with bias) -> GELU -> d (with bias)."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.fc1 = nn.Linear(cfg.d_model, cfg.d_ff)  # math W1 is [d, f]; stored as [f, d]
        self.fc2 = nn.Linear(cfg.d_ff, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, T, d] -> [B, T, d], each position on its own."""
        raise NotImplementedError("feedforward")


class TransformerBlock(nn.Module):
    """Pre-LN decoder block: U = X + A(LN1(X)); Y = U + F(LN2(U))."""

    def __init__(self, cfg: Config):
        """Two separate LayerNorms, the attention and the feed-forward, named
        ln_attention, attention, ln_feedforward, feedforward."""
        super().__init__()
        raise NotImplementedError("block_init")
        self.residual_dropout = nn.Dropout(cfg.dropout)

    def forward(self, hidden, past_key_value=None, use_cache=False):
        """hidden [B,T,d] -> (hidden [B,T,d], present). Each branch reads its own
        LayerNorm; the second reads U, not X. Both increments must already have the
        exact shape of hidden; none is broadcast."""
        raise NotImplementedError("block")


# ------------------------------------------------------------- chapter 07: the model


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood of targets [...] under logits [..., V], computed
    with a stable log-softmax (subtract the row maximum before exp)."""
    raise NotImplementedError("cross_entropy")


def parameter_count(cfg: Config) -> int:
    """The ledger: 2Vd + Cd + N(4d^2 + 2df + f + 5d) + 2d registered parameters."""
    raise NotImplementedError("parameter_count")


class TransformerLM(nn.Module):
    """Token + position embedding, N separate blocks, a final LayerNorm and an
    untied, bias-free head that gives logits [B, T, V]."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        raise NotImplementedError("lm_init")
        self.apply(_init_weights)

    def forward(self, idx, targets=None, past_key_values=None, use_cache=False):
        """idx [B,T] -> (logits [B,T,V], loss or None, presents or None).

        past_key_values holds one (keys, values) per block from an earlier call;
        the new tokens continue after them. loss is the mean cross-entropy against
        targets [B,T] when they are given."""
        raise NotImplementedError("lm_forward")


def _init_weights(module: nn.Module) -> None:
    # Small normal weights and zero biases, as in GPT-2; LayerNorm keeps gamma=1, beta=0.
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
