"""Chapter 05: LayerNorm, exact GELU, the feed-forward and the pre-LN block."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close

from hero_transformer.model import (
    LAYER_NORM_EPS,
    Config,
    FeedForward,
    LayerNorm,
    TransformerBlock,
    gelu,
)


def small_config(d=4, h=2, f=8, dropout=0.0):
    return Config(vocab_size=10, block_size=16, d_model=d, n_heads=h, n_layers=1, d_ff=f, dropout=dropout)


def randomise(module: nn.Module, std=0.5):
    """Non-trivial weights everywhere, LayerNorm gamma/beta included."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * std)
        for m in module.modules():
            if isinstance(m, LayerNorm):
                m.weight.add_(1.0)
    return module


# ------------------------------------------------------------------- LayerNorm


@pytest.mark.parametrize("shape", [(5,), (3, 7), (2, 3, 4), (4, 5, 16), (2, 2, 3, 6)])
def test_layer_norm_matches_torch(f64, shape):
    d = shape[-1]
    ln = LayerNorm(d)
    with torch.no_grad():
        ln.weight.copy_(torch.randn(d))
        ln.bias.copy_(torch.randn(d))
    x = torch.randn(*shape) * 3 + 1
    expected = F.layer_norm(x, (d,), ln.weight, ln.bias, eps=1e-5)
    assert_close(ln(x), expected, rtol=1e-12, atol=1e-12)


def test_layer_norm_defaults():
    ln = LayerNorm(6)
    assert ln.eps == LAYER_NORM_EPS == 1e-5
    assert torch.equal(ln.weight.detach(), torch.ones(6))
    assert torch.equal(ln.bias.detach(), torch.zeros(6))
    assert {n for n, _ in ln.named_parameters()} == {"weight", "bias"}


def test_layer_norm_is_over_the_last_axis_only(f64):
    ln = LayerNorm(4)
    x = torch.randn(2, 3, 4)
    y = ln(x)
    changed = x.clone()
    changed[1, 2] = changed[1, 2] * 10 + 5  # another position, another batch row
    y_changed = ln(changed)
    assert torch.equal(y_changed[0], y[0])
    assert torch.equal(y_changed[1, :2], y[1, :2])
    assert_close(y.mean(-1), torch.zeros(2, 3), atol=1e-12, rtol=0)


def test_layer_norm_of_1_3(f64):
    ln = LayerNorm(2)
    y = ln(torch.tensor([1.0, 3.0]))
    expected = 1 / math.sqrt(1.00001)
    assert_close(y, torch.tensor([-expected, expected]), rtol=1e-14, atol=1e-14)


def test_layer_norm_uses_population_variance_not_d_minus_1(f64):
    x = torch.tensor([1.0, 3.0])
    centred = x - x.mean()
    wrong = centred / torch.sqrt((centred**2).sum() / (2 - 1) + 1e-5)  # the d - 1 mistake
    assert_close(wrong, torch.tensor([-0.7071, 0.7071]), atol=1e-4, rtol=0)
    y = LayerNorm(2)(x)
    assert (y - wrong).abs().max() > 0.25


def test_layer_norm_of_constant_vector_is_exactly_beta(f64):
    ln = LayerNorm(2)
    with torch.no_grad():
        ln.weight.copy_(torch.tensor([3.0, -2.0]))
        ln.bias.copy_(torch.tensor([0.25, -1.5]))
    y = ln(torch.tensor([[2.0, 2.0]]))
    assert torch.equal(y.detach(), torch.tensor([[0.25, -1.5]]))
    # without eps the same vector divides zero by zero
    no_eps = LayerNorm(2, eps=0.0)
    assert torch.isnan(no_eps(torch.tensor([2.0, 2.0]))).all()


def test_layer_norm_shift_invariant_but_not_scale_invariant(f64):
    ln = LayerNorm(5)
    with torch.no_grad():
        ln.bias.copy_(torch.randn(5))
    x = torch.randn(3, 5)
    for c in (-7.0, 0.5, 100.0):
        assert_close(ln(x + c), ln(x), rtol=1e-9, atol=1e-9)
    small = 0.01 * x  # variance comparable to eps: scaling now changes the output
    assert (ln(small) - ln(x)).abs().max() > 1e-3
    assert not torch.allclose(ln(2 * x), ln(x), rtol=0, atol=1e-12)
    # without eps, scaling by a positive factor would commute
    exact = LayerNorm(5, eps=0.0)
    assert_close(exact(small), exact(x), rtol=1e-9, atol=1e-9)


# ------------------------------------------------------------------------ GELU


def test_gelu_is_exact_erf_form(f64):
    x = torch.linspace(-6, 6, 2001)
    assert_close(gelu(x), F.gelu(x, approximate="none"), rtol=1e-12, atol=1e-12)
    assert_close(gelu(x), x * 0.5 * (1 + torch.erf(x / math.sqrt(2))), rtol=1e-12, atol=1e-12)


def test_gelu_is_not_the_tanh_approximation_nor_relu(f64):
    x = torch.linspace(-4, 4, 801)
    y = gelu(x)
    assert (y - F.gelu(x, approximate="tanh")).abs().max() > 1e-4
    assert (y - torch.relu(x)).abs().max() > 0.1
    # g(a) - g(-a) = a holds for ReLU too; the values above are what tell them apart
    assert_close(y - gelu(-x), x, rtol=1e-12, atol=1e-12)
    assert_close(gelu(torch.tensor([1.0, -1.0])), torch.tensor([0.8413447460685429, -0.15865525393145707]))


# ----------------------------------------------------------------- feed-forward


def test_feedforward_shapes_and_formula(f64):
    cfg = small_config(d=4, f=8)
    ff = randomise(FeedForward(cfg))
    assert tuple(ff.fc1.weight.shape) == (8, 4) and tuple(ff.fc1.bias.shape) == (8,)
    assert tuple(ff.fc2.weight.shape) == (4, 8) and tuple(ff.fc2.bias.shape) == (4,)
    x = torch.randn(2, 3, 4)
    seen = {}
    ff.fc1.register_forward_hook(lambda m, i, o: seen.update(hidden=o.shape))  # returns None
    y = ff(x)
    assert tuple(seen["hidden"]) == (2, 3, 8)
    assert tuple(y.shape) == (2, 3, 4)
    w1 = ff.fc1.weight.T  # the math W1 [d, f]
    expected = F.gelu(x @ w1 + ff.fc1.bias) @ ff.fc2.weight.T + ff.fc2.bias
    assert_close(y, expected, rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------- block


def test_block_attributes():
    block = TransformerBlock(small_config())
    assert isinstance(block.ln_attention, LayerNorm)
    assert isinstance(block.ln_feedforward, LayerNorm)
    assert isinstance(block.feedforward, FeedForward)
    assert block.ln_attention is not block.ln_feedforward
    assert hasattr(block.attention, "q_proj")


def test_block_matches_torch_encoder_layer_norm_first(f64):
    d, h, f, T = 8, 2, 16, 5
    block = randomise(TransformerBlock(small_config(d=d, h=h, f=f))).eval()
    ref = nn.TransformerEncoderLayer(
        d, h, dim_feedforward=f, dropout=0.0, activation="gelu", norm_first=True, batch_first=True
    ).eval()
    attn = block.attention
    with torch.no_grad():
        ref.self_attn.in_proj_weight.copy_(torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight]))
        ref.self_attn.in_proj_bias.zero_()
        ref.self_attn.out_proj.weight.copy_(attn.o_proj.weight)
        ref.self_attn.out_proj.bias.zero_()
        ref.linear1.weight.copy_(block.feedforward.fc1.weight)
        ref.linear1.bias.copy_(block.feedforward.fc1.bias)
        ref.linear2.weight.copy_(block.feedforward.fc2.weight)
        ref.linear2.bias.copy_(block.feedforward.fc2.bias)
        ref.norm1.weight.copy_(block.ln_attention.weight)
        ref.norm1.bias.copy_(block.ln_attention.bias)
        ref.norm2.weight.copy_(block.ln_feedforward.weight)
        ref.norm2.bias.copy_(block.ln_feedforward.bias)
    assert ref.norm1.eps == block.ln_attention.eps
    x = torch.randn(3, T, d)
    mask = nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)
    expected = ref(x, src_mask=mask, is_causal=True)
    out, present = block(x)
    assert present is None
    assert_close(out, expected, rtol=1e-10, atol=1e-10)


def test_example_1_figures(f64):
    cfg = Config(vocab_size=3, block_size=4, d_model=2, n_heads=1, n_layers=1, d_ff=2)
    block = TransformerBlock(cfg)
    with torch.no_grad():
        block.attention.o_proj.weight.zero_()  # attention outputs zero
        block.feedforward.fc1.weight.copy_(torch.eye(2))
        block.feedforward.fc1.bias.zero_()
        block.feedforward.fc2.weight.copy_(0.5 * torch.eye(2))
        block.feedforward.fc2.bias.zero_()
    x = torch.tensor([[[1.0, 3.0]]])
    out, _ = block(x)
    increment = (out - x)[0, 0]
    # The published figures have 7 decimals (0.42066966... is printed as 0.4206696).
    assert_close(increment, torch.tensor([-0.0793278, 0.4206696]), atol=1e-7, rtol=0)
    assert_close(out[0, 0], torch.tensor([0.9206722, 3.4206696]), atol=1e-7, rtol=0)
    assert abs((increment[1] - increment[0]).item() - 0.49999750) < 5e-9
    # the same figure from the formula: 0.5 * gelu(LN(x))
    assert_close(increment, 0.5 * gelu(LayerNorm(2)(x[0, 0])))


def test_zero_branches_return_the_input_exactly(f64):
    block = randomise(TransformerBlock(small_config(d=4, h=2, f=8)))
    with torch.no_grad():
        block.attention.o_proj.weight.zero_()
        block.feedforward.fc2.weight.zero_()
        block.feedforward.fc2.bias.zero_()
    x = torch.randn(2, 3, 4) * 5 + 2
    out, _ = block(x)
    assert torch.equal(out, x)


def test_second_branch_reads_u_not_x(f64):
    block = randomise(TransformerBlock(small_config(d=4, h=2, f=8)))
    x = torch.randn(2, 3, 4)
    u = x + block.attention(block.ln_attention(x))[0]
    expected = u + block.feedforward(block.ln_feedforward(u))
    wrong = u + block.feedforward(block.ln_feedforward(x))
    out, _ = block(x)
    assert_close(out, expected, rtol=1e-12, atol=1e-12)
    assert (out - wrong).abs().max() > 1e-3


def test_shape_walk_through_b2_t3_d4_h2_f8(f64):
    block = randomise(TransformerBlock(small_config(d=4, h=2, f=8)))
    attn = block.attention
    split_shapes = []
    original_split = attn.split_heads

    def recording_split(x):
        out = original_split(x)
        split_shapes.append(tuple(out.shape))
        return out

    attn.split_heads = recording_split  # instance attribute: used by forward
    hidden_shape = {}
    block.feedforward.fc1.register_forward_hook(lambda m, i, o: hidden_shape.update(f=tuple(o.shape)))
    x = torch.randn(2, 3, 4)
    out, _ = block(x)
    assert split_shapes == [(2, 2, 3, 2)] * 3  # Q, K, V
    assert tuple(attn.last_attention.shape) == (2, 2, 3, 3)
    assert hidden_shape["f"] == (2, 3, 8)
    assert tuple(out.shape) == (2, 3, 4)


def test_increment_of_the_wrong_shape_is_not_broadcast(f64):
    block = TransformerBlock(small_config(d=4, h=2, f=8))
    x = torch.randn(2, 3, 4)

    class Squash(nn.Module):  # a feed-forward that returns [B, 1, d]
        def forward(self, h):
            return h.mean(dim=1, keepdim=True)

    block.feedforward = Squash()
    with pytest.raises(ValueError, match="shape|!="):
        block(x)


def test_block_causal_invariance(f64):
    block = randomise(TransformerBlock(small_config(d=8, h=2, f=16)))
    x = torch.randn(2, 6, 8)
    out, _ = block(x)
    for t in range(1, 6):
        changed = x.clone()
        changed[:, t:] += torch.randn(2, 6 - t, 8)
        out_changed, _ = block(changed)
        assert torch.equal(out_changed[:, :t], out[:, :t]), f"a position before {t} changed"
        assert not torch.allclose(out_changed[:, t], out[:, t])


def test_block_with_cache_equals_recomputed(f64):
    block = randomise(TransformerBlock(small_config(d=8, h=2, f=16)))
    x = torch.randn(2, 5, 8)
    full, present = block(x, use_cache=True)
    assert tuple(present[0].shape) == (2, 2, 5, 4)
    first, past = block(x[:, :2], use_cache=True)
    rest, past = block(x[:, 2:], past_key_value=past, use_cache=True)
    assert_close(torch.cat([first, rest], dim=1), full, rtol=1e-12, atol=1e-12)
    assert_close(past[0], present[0])
    assert_close(past[1], present[1])


def test_block_dropout_only_in_training(f64):
    torch.manual_seed(1)
    block = randomise(TransformerBlock(small_config(d=8, h=2, f=16, dropout=0.3)))
    x = torch.randn(2, 4, 8)
    block.eval()
    assert torch.equal(block(x)[0], block(x)[0])
    block.train()
    assert not torch.equal(block(x)[0], block(x)[0])
