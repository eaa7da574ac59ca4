"""Chapters 02-03: token embedding lookup and learned absolute positions."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from hero_transformer.model import Config, PositionEmbedding, TokenEmbedding, TransformerLM


def test_token_embedding_shape_and_rows(f64):
    emb = TokenEmbedding(vocab_size=7, d_model=5)
    assert tuple(emb.weight.shape) == (7, 5)
    idx = torch.tensor([[0, 3, 6], [2, 2, 1]])
    out = emb(idx)
    assert tuple(out.shape) == (2, 3, 5)
    for b in range(2):
        for t in range(3):
            assert torch.equal(out[b, t], emb.weight[idx[b, t]])


def test_token_embedding_is_differentiable_into_its_rows(f64):
    emb = TokenEmbedding(vocab_size=4, d_model=3)
    emb(torch.tensor([[1, 1, 3]])).sum().backward()
    expected = torch.zeros(4, 3)
    expected[1] = 2.0
    expected[3] = 1.0
    assert_close(emb.weight.grad, expected)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8])
def test_token_embedding_accepts_integer_dtypes(dtype):
    emb = TokenEmbedding(vocab_size=4, d_model=3)
    out = emb(torch.tensor([[0, 3]], dtype=dtype))
    assert torch.equal(out[0, 1], emb.weight[3])


@pytest.mark.parametrize("bad", [7, 100, -1])
def test_token_embedding_bad_id_is_a_clear_value_error(bad):
    emb = TokenEmbedding(vocab_size=7, d_model=2)
    with pytest.raises(ValueError, match=rf"token id {bad}\b.*\[0, 7\)"):
        emb(torch.tensor([[0, 1, bad, 2]]))


def test_token_embedding_float_ids_are_rejected():
    emb = TokenEmbedding(vocab_size=7, d_model=2)
    with pytest.raises(ValueError, match="integer"):
        emb(torch.tensor([[0.0, 1.0]]))


def test_token_embedding_empty_batch():
    emb = TokenEmbedding(vocab_size=7, d_model=2)
    assert tuple(emb(torch.zeros(2, 0, dtype=torch.long)).shape) == (2, 0, 2)


def test_position_embedding_adds_row_p_at_position_p(f64):
    pos = PositionEmbedding(block_size=6, d_model=4)
    hidden = torch.randn(2, 3, 4)
    out = pos(hidden)
    assert tuple(out.shape) == (2, 3, 4)
    assert_close(out, hidden + pos.weight[:3].unsqueeze(0))


def test_position_embedding_is_offset_by_cache_length(f64):
    pos = PositionEmbedding(block_size=6, d_model=4)
    hidden = torch.randn(2, 2, 4)
    out = pos(hidden, past_length=3)
    assert_close(out, hidden + pos.weight[3:5].unsqueeze(0))
    # the whole context fits exactly
    assert_close(pos(torch.zeros(1, 6, 4)), pos.weight.unsqueeze(0))
    assert_close(pos(torch.zeros(1, 1, 4), past_length=5), pos.weight[5:6].unsqueeze(0))


def test_position_embedding_too_long_is_a_clear_error_not_a_wrap():
    pos = PositionEmbedding(block_size=4, d_model=2)
    with pytest.raises(ValueError, match="block_size is 4"):
        pos(torch.zeros(1, 5, 2))
    with pytest.raises(ValueError, match="block_size is 4"):
        pos(torch.zeros(1, 2, 2), past_length=3)


def test_model_rejects_too_long_input_and_bad_ids():
    cfg = Config(vocab_size=5, block_size=4, d_model=4, n_heads=2, n_layers=1, d_ff=8)
    model = TransformerLM(cfg).eval()
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="token id 5"):
        model(torch.tensor([[0, 5]]))
    # through the cache offset: 3 cached + 2 new > 4
    with torch.no_grad():
        _, _, presents = model(torch.zeros(1, 3, dtype=torch.long), use_cache=True)
        with pytest.raises(ValueError, match="block_size"):
            model(torch.zeros(1, 2, dtype=torch.long), past_key_values=presents, use_cache=True)
        logits, _, _ = model(torch.zeros(1, 1, dtype=torch.long), past_key_values=presents)
    assert tuple(logits.shape) == (1, 1, 5)
