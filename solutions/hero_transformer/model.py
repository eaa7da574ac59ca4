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
        ### BEGIN SOLUTION embedding
        if idx.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
            raise ValueError(f"token ids must be an integer tensor, got dtype {idx.dtype}")
        vocab_size = self.weight.shape[0]
        if idx.numel() and (idx.min() < 0 or idx.max() >= vocab_size):
            bad = idx[(idx < 0) | (idx >= vocab_size)][0].item()
            raise ValueError(f"token id {bad} is outside the vocabulary [0, {vocab_size})")
        return self.weight[idx.long()]
        ### END SOLUTION


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
        ### BEGIN SOLUTION positions
        T = hidden.shape[1]
        block_size = self.weight.shape[0]
        if past_length < 0:
            raise ValueError(f"past_length must be >= 0, got {past_length}")
        if past_length + T > block_size:
            raise ValueError(
                f"sequence reaches position {past_length + T - 1} but block_size is {block_size}: "
                f"at most {block_size} positions fit (past_length={past_length}, T={T})"
            )
        return hidden + self.weight[past_length : past_length + T]
        ### END SOLUTION


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
        ### BEGIN SOLUTION attention_init
        self.q_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.k_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.v_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.o_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        ### END SOLUTION
        self.attn_dropout = nn.Dropout(cfg.dropout)
        self.last_attention = None  # the weights [B, h, T, T_past + T] of the latest call

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, d] -> [B, h, T, d_h]: head i owns features i*d_h .. (i+1)*d_h - 1."""
        ### BEGIN SOLUTION split_heads
        B, T, _ = x.shape
        return x.view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        ### END SOLUTION

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """[B, h, T, d_h] -> [B, T, d]: the inverse of split_heads."""
        ### BEGIN SOLUTION merge_heads
        B, _, T, _ = x.shape
        return x.transpose(1, 2).reshape(B, T, self.n_heads * self.d_head)
        ### END SOLUTION

    def forward(self, x, past_key_value=None, use_cache=False):
        """Attend from each of the T new positions to every earlier position, cached
        ones included, and to itself; never to a later one. Scores are scaled by
        1/sqrt(d_h). Keep the softmax weights in self.last_attention."""
        ### BEGIN SOLUTION attention
        q = self.split_heads(self.q_proj(x))
        k = self.split_heads(self.k_proj(x))
        v = self.split_heads(self.v_proj(x))
        if past_key_value is not None:
            past_k, past_v = past_key_value
            k = torch.cat([past_k, k], dim=2)
            v = torch.cat([past_v, v], dim=2)
        T, total = q.shape[2], k.shape[2]
        past = total - T
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        query_pos = torch.arange(past, total, device=x.device).unsqueeze(1)
        key_pos = torch.arange(total, device=x.device).unsqueeze(0)
        scores = scores.masked_fill(key_pos > query_pos, float("-inf"))
        scores = scores - scores.amax(dim=-1, keepdim=True)
        weights = scores.exp()
        weights = weights / weights.sum(dim=-1, keepdim=True)
        self.last_attention = weights
        out = self.merge_heads(self.attn_dropout(weights) @ v)
        present = (k, v) if use_cache else None
        return self.o_proj(out), present
        ### END SOLUTION


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
        ### BEGIN SOLUTION layer_norm
        mean = x.mean(dim=-1, keepdim=True)
        centred = x - mean
        variance = (centred * centred).mean(dim=-1, keepdim=True)
        return centred / torch.sqrt(variance + self.eps) * self.weight + self.bias
        ### END SOLUTION


def gelu(x: torch.Tensor) -> torch.Tensor:
    """Exact GELU: x * Phi(x) = x/2 * (1 + erf(x / sqrt 2)); not the tanh form.
    Element by element, on a tensor of any shape."""
    ### BEGIN SOLUTION gelu
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    ### END SOLUTION


class FeedForward(nn.Module):
    """Position-wise MLP: d -> f (with bias) -> GELU -> d (with bias)."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.fc1 = nn.Linear(cfg.d_model, cfg.d_ff)  # math W1 is [d, f]; stored as [f, d]
        self.fc2 = nn.Linear(cfg.d_ff, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, T, d] -> [B, T, d], each position on its own."""
        ### BEGIN SOLUTION feedforward
        return self.fc2(gelu(self.fc1(x)))
        ### END SOLUTION


class TransformerBlock(nn.Module):
    """Pre-LN decoder block: U = X + A(LN1(X)); Y = U + F(LN2(U))."""

    def __init__(self, cfg: Config):
        """Two separate LayerNorms, the attention and the feed-forward, named
        ln_attention, attention, ln_feedforward, feedforward."""
        super().__init__()
        ### BEGIN SOLUTION block_init
        self.ln_attention = LayerNorm(cfg.d_model)
        self.attention = CausalSelfAttention(cfg)
        self.ln_feedforward = LayerNorm(cfg.d_model)
        self.feedforward = FeedForward(cfg)
        ### END SOLUTION
        self.residual_dropout = nn.Dropout(cfg.dropout)

    def forward(self, hidden, past_key_value=None, use_cache=False):
        """hidden [B,T,d] -> (hidden [B,T,d], present). Each branch reads its own
        LayerNorm; the second reads U, not X. Both increments must already have the
        exact shape of hidden; none is broadcast."""
        ### BEGIN SOLUTION block
        attended, present = self.attention(self.ln_attention(hidden), past_key_value, use_cache)
        if attended.shape != hidden.shape:
            raise ValueError(f"attention increment {tuple(attended.shape)} != hidden {tuple(hidden.shape)}")
        hidden = hidden + self.residual_dropout(attended)
        fed = self.feedforward(self.ln_feedforward(hidden))
        if fed.shape != hidden.shape:
            raise ValueError(f"feed-forward increment {tuple(fed.shape)} != hidden {tuple(hidden.shape)}")
        hidden = hidden + self.residual_dropout(fed)
        return hidden, present
        ### END SOLUTION


# ------------------------------------------------------------- chapter 07: the model


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood of targets [...] under logits [..., V], computed
    with a stable log-softmax (subtract the row maximum before exp)."""
    ### BEGIN SOLUTION cross_entropy
    logits = logits.reshape(-1, logits.shape[-1])
    targets = targets.reshape(-1)
    shifted = logits - logits.amax(dim=-1, keepdim=True)
    log_probs = shifted - shifted.exp().sum(dim=-1, keepdim=True).log()
    picked = log_probs[torch.arange(targets.shape[0], device=logits.device), targets]
    return -picked.mean()
    ### END SOLUTION


def parameter_count(cfg: Config) -> int:
    """The ledger: 2Vd + Cd + N(4d^2 + 2df + f + 5d) + 2d registered parameters."""
    ### BEGIN SOLUTION parameter_count
    V, C, N, d, f = cfg.vocab_size, cfg.block_size, cfg.n_layers, cfg.d_model, cfg.d_ff
    per_block = 4 * d * d + 2 * d * f + f + 5 * d
    return 2 * V * d + C * d + N * per_block + 2 * d
    ### END SOLUTION


class TransformerLM(nn.Module):
    """Token + position embedding, N separate blocks, a final LayerNorm and an
    untied, bias-free head that gives logits [B, T, V]."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        ### BEGIN SOLUTION lm_init
        self.token_embedding = TokenEmbedding(cfg.vocab_size, cfg.d_model)
        self.position_embedding = PositionEmbedding(cfg.block_size, cfg.d_model)
        self.embedding_dropout = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList([TransformerBlock(cfg) for _ in range(cfg.n_layers)])
        self.ln_final = LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        ### END SOLUTION
        self.apply(_init_weights)

    def forward(self, idx, targets=None, past_key_values=None, use_cache=False):
        """idx [B,T] -> (logits [B,T,V], loss or None, presents or None).

        past_key_values holds one (keys, values) per block from an earlier call;
        the new tokens continue after them. loss is the mean cross-entropy against
        targets [B,T] when they are given."""
        ### BEGIN SOLUTION lm_forward
        past_length = 0 if past_key_values is None else past_key_values[0][0].shape[2]
        hidden = self.token_embedding(idx)
        hidden = self.embedding_dropout(self.position_embedding(hidden, past_length))
        presents = [] if use_cache else None
        for i, block in enumerate(self.blocks):
            past = None if past_key_values is None else past_key_values[i]
            hidden, present = block(hidden, past, use_cache)
            if use_cache:
                presents.append(present)
        logits = self.head(self.ln_final(hidden))
        loss = None if targets is None else cross_entropy(logits, targets)
        return logits, loss, presents
        ### END SOLUTION


def _init_weights(module: nn.Module) -> None:
    # Small normal weights and zero biases, as in GPT-2; LayerNorm keeps gamma=1, beta=0.
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
