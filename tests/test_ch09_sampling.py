"""Chapter 09: sampling one step (temperature, top-k, seeded generator) and generation
through the KV cache."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from hero_transformer import sample
from hero_transformer.model import Config, TransformerLM
from hero_transformer.sample import generate, sample_next

V = 13
BOS = V - 1


def tiny_model(block_size=10, seed=0, **overrides):
    torch.manual_seed(seed)
    values = dict(vocab_size=V, block_size=block_size, d_model=16, n_heads=2, n_layers=2, d_ff=32)
    values.update(overrides)
    model = TransformerLM(Config(**values))
    with torch.no_grad():  # livelier logits than the 0.02 init, so sampling has something to do
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.5)
    return model


# ------------------------------------------------------------------ sample_next


def test_temperature_zero_and_near_zero_are_greedy():
    logits = torch.randn(64, V, generator=torch.Generator().manual_seed(0))
    greedy = logits.argmax(dim=-1)
    assert torch.equal(sample_next(logits, temperature=0.0), greedy)
    for temperature in (1e-3, 1e-6, 1e-30):
        generator = torch.Generator().manual_seed(1)
        assert torch.equal(sample_next(logits, temperature=temperature, generator=generator), greedy)


def test_top_k_never_samples_outside_the_k_largest():
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(V, generator=generator)
    allowed = set(torch.topk(logits, 3).indices.tolist())
    draws = sample_next(logits.expand(4000, V), temperature=5.0, top_k=3, generator=generator)
    assert draws.shape == (4000,) and draws.dtype == torch.long
    assert set(draws.tolist()) == allowed  # all three appear at this temperature, nothing else
    assert torch.equal(sample_next(logits.expand(5, V), top_k=1, generator=generator), logits.argmax().expand(5))


def test_top_k_keeps_exactly_k_even_with_ties():
    logits = torch.zeros(2000, V)  # every id ties for the largest
    draws = sample_next(logits, top_k=4, generator=torch.Generator().manual_seed(0))
    assert len(set(draws.tolist())) == 4


def test_top_k_at_least_vocabulary_changes_nothing():
    logits = torch.randn(50, V, generator=torch.Generator().manual_seed(3))
    a = sample_next(logits, top_k=V, generator=torch.Generator().manual_seed(9))
    b = sample_next(logits, top_k=None, generator=torch.Generator().manual_seed(9))
    assert torch.equal(a, b)


def test_sampling_follows_the_softmax():
    logits = torch.tensor([0.0, 1.0, 2.0])
    draws = sample_next(logits.expand(20000, 3), temperature=2.0, generator=torch.Generator().manual_seed(0))
    frequencies = torch.bincount(draws, minlength=3).double() / 20000
    assert_close(frequencies, torch.softmax(logits.double() / 2.0, dim=0), rtol=0, atol=0.02)


def test_seeded_draws_repeat():
    logits = torch.randn(100, V)
    a = sample_next(logits, generator=torch.Generator().manual_seed(42))
    b = sample_next(logits, generator=torch.Generator().manual_seed(42))
    c = sample_next(logits, generator=torch.Generator().manual_seed(43))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_bad_sampling_arguments_are_refused():
    logits = torch.randn(2, V)
    with pytest.raises(ValueError, match="temperature"):
        sample_next(logits, temperature=-1.0)
    with pytest.raises(ValueError, match="top_k"):
        sample_next(logits, top_k=0)


# --------------------------------------------------------------------- generate


def test_cached_generation_equals_recomputing_the_whole_prefix(f64):
    model = tiny_model(block_size=10)
    prompt = torch.tensor([[BOS, 3, 4], [BOS, 7, 1]])
    out, logits = generate(
        model, prompt, max_new_tokens=8, generator=torch.Generator().manual_seed(0), return_logits=True
    )
    assert out.shape == (2, 11) and logits.shape == (2, 8, V)
    assert torch.equal(out[:, :3], prompt)
    for step in range(8):
        full, _, _ = model(out[:, : 3 + step])  # no cache: the whole prefix again
        assert_close(logits[:, step], full[:, -1], rtol=0, atol=1e-10, msg=lambda m: f"step {step}: {m}")


def test_generation_feeds_one_token_per_step_after_the_prompt():
    model = tiny_model(block_size=10)
    lengths = []
    handle = model.register_forward_pre_hook(lambda module, args: lengths.append(args[0].shape[1]))
    try:
        generate(model, [BOS, 2, 5], max_new_tokens=6, generator=torch.Generator().manual_seed(0))
    finally:
        handle.remove()
    assert lengths == [3, 1, 1, 1, 1, 1]  # the last new id is predicted, never fed


def test_greedy_generation_takes_the_argmax_every_step():
    model = tiny_model()
    out = generate(model, [BOS], max_new_tokens=9, temperature=0.0)
    for t in range(1, out.shape[0]):
        logits, _, _ = model(out[:t].unsqueeze(0))
        assert out[t] == logits[0, -1].argmax()


def test_seeded_generation_repeats():
    model = tiny_model()
    prompt = torch.full((8, 1), BOS)
    runs = [generate(model, prompt, 9, generator=torch.Generator().manual_seed(s)) for s in (5, 5, 6)]
    assert torch.equal(runs[0], runs[1])
    assert not torch.equal(runs[0], runs[2])


def test_generation_stops_at_bos():
    model = tiny_model()
    with torch.no_grad():  # the head always prefers BOS, by far
        model.ln_final.weight.zero_()
        model.ln_final.bias.zero_()
        model.ln_final.bias[0] = 1.0
        model.head.weight.zero_()
        model.head.weight[BOS, 0] = 50.0
    out = generate(model, [BOS, 4], max_new_tokens=8, stop_id=BOS, generator=torch.Generator().manual_seed(0))
    assert out.tolist() == [BOS, 4, BOS]


def test_finished_rows_wait_for_the_others():
    model = tiny_model()
    prompt = torch.full((40, 1), BOS)
    out = generate(model, prompt, 10, stop_id=3, temperature=2.0, generator=torch.Generator().manual_seed(0))
    new = out[:, 1:]
    stopped = False
    for row in new.tolist():
        if 3 in row:
            first = row.index(3)
            assert all(t == 3 for t in row[first:]), "a row went on after its stop id"
            stopped = True
    assert stopped
    if new.shape[1] < 10:  # it ended early: only because every row had stopped
        assert (new == 3).any(dim=1).all() and (new[:, -1] == 3).all()


def test_exceeding_the_context_is_a_clear_error():
    model = tiny_model(block_size=6)
    # 2 prompt ids + 5 new ids: the 7th id is predicted from 6 fed positions, which fits
    assert generate(model, [BOS, 1], max_new_tokens=5, temperature=0.0).shape == (7,)
    with pytest.raises(ValueError, match="block_size"):
        generate(model, [BOS, 1], max_new_tokens=6)
    with pytest.raises(ValueError, match="block_size"):
        generate(model, [BOS] * 7, max_new_tokens=0)
    # stopping at the limit only when asked to
    out = generate(model, [BOS, 1], max_new_tokens=50, temperature=0.0, stop_at_block_size=True)
    assert out.shape == (7,)


def test_generate_restores_the_mode_and_keeps_no_graph():
    model = tiny_model().train()
    out, logits = generate(model, [BOS], 4, return_logits=True, generator=torch.Generator().manual_seed(0))
    assert model.training and not logits.requires_grad
    assert generate(model, [BOS, 2], 0).tolist() == [BOS, 2]


def test_sample_main_explains_a_missing_checkpoint(tmp_path, capsys):
    assert sample.main(["--checkpoint", str(tmp_path / "missing.pt")]) == 1
    assert "make train" in capsys.readouterr().out
