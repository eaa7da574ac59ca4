"""Chapter 07: the configuration, the full language model, its loss and its ledger."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close

from hero_transformer.model import (
    Config,
    LayerNorm,
    TransformerBlock,
    TransformerLM,
    cross_entropy,
    parameter_count,
)

LEDGER_CASES = [
    (dict(vocab_size=32, block_size=64, d_model=64, n_heads=4, n_layers=2, d_ff=256), 107_776),
    (dict(vocab_size=10, block_size=6, d_model=4, n_heads=2, n_layers=2, d_ff=8), 424),
]


def tiny_config(**overrides):
    values = dict(vocab_size=11, block_size=8, d_model=8, n_heads=2, n_layers=2, d_ff=16, dropout=0.0)
    values.update(overrides)
    return Config(**values)


def tiny_model(seed=0, **overrides):
    torch.manual_seed(seed)
    model = TransformerLM(tiny_config(**overrides))
    with torch.no_grad():  # bigger weights than the 0.02 init so every part matters
        for name, p in model.named_parameters():
            if p.dim() > 1:
                p.normal_(0, 0.3)
    return model


# ------------------------------------------------------------------- Config


def test_config_valid_and_d_head():
    cfg = tiny_config()
    assert cfg.d_head == 4
    assert cfg.dropout == 0.0
    with pytest.raises(Exception):
        cfg.d_model = 16  # frozen


@pytest.mark.parametrize("field", ["vocab_size", "block_size", "d_model", "n_heads", "n_layers", "d_ff"])
@pytest.mark.parametrize("value", [0, -3, 2.0, True])
def test_config_rejects_non_positive_or_non_integer_sizes(field, value):
    with pytest.raises(ValueError, match=rf"Config\.{field} must be a positive integer"):
        tiny_config(**{field: value})


def test_config_heads_must_divide_width():
    with pytest.raises(ValueError, match=r"n_heads=3 does not divide d_model=8"):
        tiny_config(n_heads=3)
    assert tiny_config(n_heads=8).d_head == 1


@pytest.mark.parametrize("dropout", [-0.1, 1.0, 1.5, float("nan")])
def test_config_rejects_dropout_outside_unit_interval(dropout):
    with pytest.raises(ValueError, match="dropout"):
        tiny_config(dropout=dropout)


def test_config_accepts_dropout_in_range():
    assert tiny_config(dropout=0.999).dropout == 0.999


# --------------------------------------------------------------- the ledger


@pytest.mark.parametrize("values,expected", LEDGER_CASES)
def test_registered_parameters_equal_the_ledger(values, expected):
    cfg = Config(**values)
    model = TransformerLM(cfg)
    assert sum(p.numel() for p in model.parameters()) == expected
    assert parameter_count(cfg) == expected


def test_ledger_formula_over_random_configs():
    for V, C, N, d, h, f in [(5, 3, 1, 2, 1, 3), (7, 9, 3, 6, 3, 10), (13, 4, 2, 12, 4, 5)]:
        cfg = Config(vocab_size=V, block_size=C, d_model=d, n_heads=h, n_layers=N, d_ff=f)
        count = sum(p.numel() for p in TransformerLM(cfg).parameters())
        assert count == parameter_count(cfg) == 2 * V * d + C * d + N * (4 * d * d + 2 * d * f + f + 5 * d) + 2 * d


def test_heads_do_not_change_the_count():
    base = dict(LEDGER_CASES[0][0])
    counts = set()
    for h in (1, 2, 4, 8, 16):
        cfg = Config(**{**base, "n_heads": h})
        counts.add(sum(p.numel() for p in TransformerLM(cfg).parameters()))
        counts.add(parameter_count(cfg))
    assert counts == {107_776}


def test_blocks_are_distinct_objects_with_distinct_parameters():
    model = TransformerLM(tiny_config(n_layers=3))
    assert len(model.blocks) == 3
    assert all(isinstance(b, TransformerBlock) for b in model.blocks)
    assert len({id(b) for b in model.blocks}) == 3
    params = list(model.parameters())
    assert len({id(p) for p in params}) == len(params)
    storages = {p.untyped_storage().data_ptr() for p in params}
    assert len(storages) == len(params)  # nothing shares memory either


def test_no_bias_on_qkvo_and_head_and_head_is_untied():
    model = TransformerLM(tiny_config())
    for block in model.blocks:
        for proj in (block.attention.q_proj, block.attention.k_proj, block.attention.v_proj, block.attention.o_proj):
            assert proj.bias is None
    assert model.head.bias is None
    assert tuple(model.head.weight.shape) == (11, 8)
    assert model.head.weight is not model.token_embedding.weight
    assert model.head.weight.data_ptr() != model.token_embedding.weight.data_ptr()
    assert isinstance(model.ln_final, LayerNorm)
    assert tuple(model.position_embedding.weight.shape) == (8, 8)


def test_every_parameter_requires_grad_and_gets_a_gradient():
    model = tiny_model()
    idx = torch.randint(0, 11, (3, 8))
    _, loss, _ = model(idx, targets=torch.randint(0, 11, (3, 8)))
    loss.backward()
    for name, p in model.named_parameters():
        assert p.requires_grad, name
        assert p.grad is not None and p.grad.abs().sum() > 0, name


# ---------------------------------------------------------------- forward


def test_forward_shapes_and_outputs():
    model = tiny_model().eval()
    idx = torch.randint(0, 11, (2, 5))
    logits, loss, presents = model(idx)
    assert tuple(logits.shape) == (2, 5, 11)
    assert loss is None and presents is None
    logits2, loss2, presents2 = model(idx, targets=idx, use_cache=True)
    assert torch.equal(logits, logits2)
    assert loss2.dim() == 0
    assert len(presents2) == 2
    for k, v in presents2:
        assert tuple(k.shape) == tuple(v.shape) == (2, 2, 5, 4)


def test_forward_equals_the_composition_of_its_parts(f64):
    model = tiny_model().eval()
    idx = torch.randint(0, 11, (2, 6))
    hidden = model.token_embedding.weight[idx] + model.position_embedding.weight[:6]
    for block in model.blocks:
        hidden = block(hidden)[0]
    expected = model.ln_final(hidden) @ model.head.weight.T
    assert_close(model(idx)[0], expected, rtol=1e-12, atol=1e-12)


def test_model_loss_is_cross_entropy_of_its_logits(f64):
    model = tiny_model()
    idx = torch.randint(0, 11, (3, 7))
    targets = torch.randint(0, 11, (3, 7))
    logits, loss, _ = model(idx, targets=targets)
    assert_close(loss, F.cross_entropy(logits.reshape(-1, 11), targets.reshape(-1)), rtol=1e-12, atol=1e-12)


def test_model_causal_invariance(f64):
    model = tiny_model().eval()
    idx = torch.randint(0, 11, (2, 8))
    logits, _, _ = model(idx)
    for t in range(1, 8):
        changed = idx.clone()
        changed[:, t:] = (changed[:, t:] + 1 + torch.randint(0, 9, changed[:, t:].shape)) % 11
        assert (changed[:, t] != idx[:, t]).all()
        logits_changed, _, _ = model(changed)
        assert torch.equal(logits_changed[:, :t], logits[:, :t]), f"a position before {t} changed"
        assert not torch.allclose(logits_changed[:, t], logits[:, t])


def test_token_by_token_generation_with_cache_equals_full_pass(f64):
    model = tiny_model().eval()
    idx = torch.randint(0, 11, (2, 8))  # the whole context
    full, _, _ = model(idx)
    past = None
    with torch.no_grad():
        for t in range(8):
            step, _, past = model(idx[:, t : t + 1], past_key_values=past, use_cache=True)
            assert tuple(step.shape) == (2, 1, 11)
            assert_close(step[:, 0], full[:, t], rtol=1e-10, atol=1e-10)
        assert past[0][0].shape[2] == 8
        with pytest.raises(ValueError, match="block_size"):
            model(idx[:, :1], past_key_values=past, use_cache=True)


def test_greedy_generation_with_cache_equals_recompute(f64):
    model = tiny_model(seed=3).eval()
    with torch.no_grad():
        prompt = torch.tensor([[1, 2]])
        logits, _, past = model(prompt, use_cache=True)
        seq = prompt
        for _ in range(5):
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            seq = torch.cat([seq, nxt], dim=1)
            recomputed = model(seq)[0][:, -1]
            logits, _, past = model(nxt, past_key_values=past, use_cache=True)
            assert_close(logits[:, -1], recomputed, rtol=1e-10, atol=1e-10)
    assert seq.shape == (1, 7)


def test_chunked_prompt_with_cache_equals_full_pass(f64):
    model = tiny_model().eval()
    idx = torch.randint(0, 11, (1, 7))
    full = model(idx)[0]
    first, _, past = model(idx[:, :4], use_cache=True)
    second, _, _ = model(idx[:, 4:], past_key_values=past, use_cache=True)
    assert_close(torch.cat([first, second], dim=1), full, rtol=1e-10, atol=1e-10)


def test_model_rejects_bad_ids_and_too_long_inputs():
    model = tiny_model().eval()
    with pytest.raises(ValueError, match="token id -1"):
        model(torch.tensor([[0, -1]]))
    with pytest.raises(ValueError, match="token id 11"):
        model(torch.tensor([[11]]))
    with pytest.raises(ValueError, match="block_size is 8"):
        model(torch.zeros(1, 9, dtype=torch.long))


def test_dropout_only_in_training_mode():
    model = tiny_model(dropout=0.2)
    idx = torch.randint(0, 11, (2, 6))
    model.eval()
    a, b = model(idx)[0], model(idx)[0]
    assert torch.equal(a, b)
    model.train()
    c, d = model(idx)[0], model(idx)[0]
    assert not torch.equal(c, d)
    plain = tiny_model(dropout=0.0)  # same seed, same weights
    plain.train()
    assert torch.equal(plain(idx)[0], plain(idx)[0])  # dropout=0: deterministic even in training
    assert_close(plain(idx)[0], a)


# ---------------------------------------------------------------- the loss


def test_cross_entropy_matches_torch(f64):
    logits = torch.randn(4, 5, 9)
    targets = torch.randint(0, 9, (4, 5))
    expected = F.cross_entropy(logits.reshape(-1, 9), targets.reshape(-1))
    assert_close(cross_entropy(logits, targets), expected, rtol=1e-12, atol=1e-12)
    flat = torch.randn(6, 3)
    flat_targets = torch.tensor([0, 1, 2, 2, 1, 0])
    assert_close(cross_entropy(flat, flat_targets), F.cross_entropy(flat, flat_targets), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cross_entropy_is_stable_for_huge_logits(dtype):
    torch.manual_seed(0)
    logits = (torch.randn(3, 4, 7) * 1e4).to(dtype)
    logits[0, 0] = torch.tensor([1e4, -1e4, 0, 0, 0, 0, 0], dtype=dtype)
    targets = torch.randint(0, 7, (3, 4))
    loss = cross_entropy(logits, targets)
    assert torch.isfinite(loss)
    expected = F.cross_entropy(logits.reshape(-1, 7), targets.reshape(-1))
    assert_close(loss, expected, rtol=1e-6, atol=1e-6 * float(expected.abs()) + 1e-6)
    # shifting every logit of a row by the same amount changes nothing
    assert_close(cross_entropy(logits + 5e3, targets), loss, rtol=1e-6, atol=1e-2)


def test_cross_entropy_gradient_matches_torch(f64):
    logits = (torch.randn(5, 6) * 30).requires_grad_(True)
    targets = torch.randint(0, 6, (5,))
    (g_ours,) = torch.autograd.grad(cross_entropy(logits, targets), logits)
    (g_torch,) = torch.autograd.grad(F.cross_entropy(logits, targets), logits)
    assert torch.isfinite(g_ours).all()
    assert_close(g_ours, g_torch, rtol=1e-10, atol=1e-12)


def test_cross_entropy_of_uniform_logits_is_log_v(f64):
    loss = cross_entropy(torch.zeros(2, 3, 27), torch.randint(0, 27, (2, 3)))
    assert_close(loss, torch.log(torch.tensor(27.0)))


def test_init_small_weights_and_zero_biases():
    model = TransformerLM(tiny_config())
    for module in model.modules():
        if isinstance(module, nn.Linear):
            assert module.weight.std() < 0.1
            if module.bias is not None:
                assert torch.equal(module.bias.detach(), torch.zeros_like(module.bias))
        if isinstance(module, LayerNorm):
            assert torch.equal(module.weight.detach(), torch.ones_like(module.weight))
            assert torch.equal(module.bias.detach(), torch.zeros_like(module.bias))
