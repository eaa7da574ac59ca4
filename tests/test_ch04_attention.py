"""Chapter 04: causal multi-head self-attention with a KV cache."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from hero_transformer.model import CausalSelfAttention, Config


def make_attention(d=4, h=2, dropout=0.0, seed=0):
    torch.manual_seed(seed)
    cfg = Config(vocab_size=10, block_size=16, d_model=d, n_heads=h, n_layers=1, d_ff=8, dropout=dropout)
    attn = CausalSelfAttention(cfg)
    for proj in (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj):
        torch.nn.init.normal_(proj.weight, std=0.5)  # larger than the 0.02 init: non-trivial weights
    return attn


def test_shape_walk_through_b2_t3_d4_h2(f64):
    attn = make_attention(d=4, h=2)
    x = torch.randn(2, 3, 4)
    q = attn.split_heads(attn.q_proj(x))
    k = attn.split_heads(attn.k_proj(x))
    v = attn.split_heads(attn.v_proj(x))
    assert tuple(q.shape) == tuple(k.shape) == tuple(v.shape) == (2, 2, 3, 2)
    out, present = attn(x)
    assert tuple(out.shape) == (2, 3, 4)
    assert present is None
    assert tuple(attn.last_attention.shape) == (2, 2, 3, 3)


def test_projections_are_bias_free_with_4_d_squared_parameters():
    d = 12
    attn = make_attention(d=d, h=3)
    for proj in (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj):
        assert proj.bias is None
        assert tuple(proj.weight.shape) == (d, d)
    assert sum(p.numel() for p in attn.parameters()) == 4 * d * d
    assert len({id(p) for p in attn.parameters()}) == 4


def test_split_heads_layout_and_merge_is_its_inverse(f64):
    attn = make_attention(d=6, h=3)
    x = torch.randn(2, 5, 6)
    heads = attn.split_heads(x)
    assert tuple(heads.shape) == (2, 3, 5, 2)
    for i in range(3):  # head i owns features 2i, 2i+1
        assert torch.equal(heads[:, i], x[..., 2 * i : 2 * i + 2])
    assert torch.equal(attn.merge_heads(heads), x)


@pytest.mark.parametrize("d,h,T", [(4, 2, 3), (8, 4, 7), (6, 1, 5), (6, 6, 4)])
def test_matches_scaled_dot_product_attention(f64, d, h, T):
    attn = make_attention(d=d, h=h)
    x = torch.randn(3, T, d)
    q = attn.split_heads(attn.q_proj(x))
    k = attn.split_heads(attn.k_proj(x))
    v = attn.split_heads(attn.v_proj(x))
    expected = attn.o_proj(attn.merge_heads(F.scaled_dot_product_attention(q, k, v, is_causal=True)))
    out, _ = attn(x)
    assert_close(out, expected, rtol=1e-12, atol=1e-12)


def test_attention_weights_are_causal_softmax_rows(f64):
    attn = make_attention(d=8, h=2)
    attn(torch.randn(2, 6, 8))
    w = attn.last_attention
    assert_close(w.sum(-1), torch.ones(2, 2, 6))
    assert (w >= 0).all()
    future = torch.triu(torch.ones(6, 6, dtype=torch.bool), diagonal=1)
    assert torch.equal(w[..., future], torch.zeros_like(w[..., future]))
    assert (w[..., ~future] > 0).all()
    assert_close(w[..., 0, 0], torch.ones(2, 2))  # the first token only sees itself


def test_changing_future_tokens_leaves_earlier_positions_unchanged(f64):
    attn = make_attention(d=8, h=4)
    x = torch.randn(2, 6, 8)
    out, _ = attn(x)
    for t in range(6):
        changed = x.clone()
        changed[:, t:] = torch.randn(2, 6 - t, 8)
        out_changed, _ = attn(changed)
        assert torch.equal(out_changed[:, :t], out[:, :t]), f"position < {t} moved"
        assert not torch.allclose(out_changed[:, t], out[:, t])


def test_large_scores_stay_finite(f64):
    attn = make_attention(d=4, h=2)
    out, _ = attn(1e3 * torch.randn(1, 5, 4))
    assert torch.isfinite(out).all()
    assert torch.isfinite(attn.last_attention).all()


def test_cached_equals_recomputed(f64):
    attn = make_attention(d=8, h=2)
    x = torch.randn(2, 7, 8)
    full, full_present = attn(x, use_cache=True)
    full_weights = attn.last_attention
    k_full, v_full = full_present
    assert tuple(k_full.shape) == tuple(v_full.shape) == (2, 2, 7, 4)

    pieces, past = [], None
    for start, stop in [(0, 3), (3, 4), (4, 7)]:
        out, past = attn(x[:, start:stop], past_key_value=past, use_cache=True)
        pieces.append(out)
        assert tuple(past[0].shape) == (2, 2, stop, 4)
        assert tuple(attn.last_attention.shape) == (2, 2, stop - start, stop)
        assert_close(attn.last_attention, full_weights[:, :, start:stop, :stop])
    assert_close(torch.cat(pieces, dim=1), full, rtol=1e-12, atol=1e-12)
    assert_close(past[0], k_full)
    assert_close(past[1], v_full)


def test_token_by_token_with_cache_equals_recomputed(f64):
    attn = make_attention(d=4, h=2)
    x = torch.randn(1, 5, 4)
    full, _ = attn(x)
    past = None
    for t in range(5):
        out, past = attn(x[:, t : t + 1], past_key_value=past, use_cache=True)
        assert_close(out[:, 0], full[:, t], rtol=1e-12, atol=1e-12)


def test_use_cache_false_returns_no_present_even_with_a_past(f64):
    attn = make_attention(d=4, h=2)
    x = torch.randn(1, 4, 4)
    _, past = attn(x[:, :2], use_cache=True)
    out, present = attn(x[:, 2:], past_key_value=past, use_cache=False)
    assert present is None
    assert_close(out, attn(x)[0][:, 2:])


def test_dropout_only_in_training_mode(f64):
    attn = make_attention(d=8, h=2, dropout=0.5)
    x = torch.randn(2, 6, 8)
    attn.eval()
    a, _ = attn(x)
    b, _ = attn(x)
    assert torch.equal(a, b)
    no_dropout = make_attention(d=8, h=2, dropout=0.0)  # same seed: same weights
    assert_close(a, no_dropout(x)[0])
    attn.train()
    c, _ = attn(x)
    d, _ = attn(x)
    assert not torch.equal(c, d)
    assert not torch.allclose(c, a)
