"""Chapter 08: AdamW by hand, gradient clipping, padded batches, the training step,
the validation loss per character and the bigram baseline."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch.testing import assert_close

from hero_transformer.data import train_validation_split
from hero_transformer.model import Config, TransformerLM, cross_entropy
from hero_transformer.tokenizer import CharTokenizer, training_windows
from hero_transformer.train import (
    AdamW,
    bigram_baseline,
    clip_grad_norm,
    encode_documents,
    evaluate,
    learning_rate,
    load_checkpoint,
    make_batch,
    masked_loss,
    save_checkpoint,
    train,
    train_step,
)

NAMES = ["ana", "bob", "christopher", "eve", "zoe", "maximiliano", "li", "kai", "oscar", "emma"]


def tiny_config(vocab_size=27, **overrides):
    values = dict(vocab_size=vocab_size, block_size=8, d_model=16, n_heads=2, n_layers=2, d_ff=32)
    values.update(overrides)
    return Config(**values)


@pytest.fixture(scope="module")
def names_split():
    train_docs, val_docs = train_validation_split()
    return train_docs, val_docs, CharTokenizer(train_docs + val_docs)


# ---------------------------------------------------------------------- AdamW


def _random_batch(generator, cfg, B=3, T=5):
    idx = torch.randint(0, cfg.vocab_size, (B, T), generator=generator)
    targets = torch.randint(0, cfg.vocab_size, (B, T), generator=generator)
    return idx, targets


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_adamw_matches_torch_over_many_steps(f64, weight_decay):
    cfg = tiny_config(vocab_size=11, d_model=8, d_ff=16, block_size=6)
    ours_model = TransformerLM(cfg)
    torch_model = copy.deepcopy(ours_model)
    ours = AdamW(ours_model.parameters(), lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=weight_decay)
    reference = torch.optim.AdamW(
        torch_model.parameters(), lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=weight_decay
    )
    generator = torch.Generator().manual_seed(0)
    for step in range(60):
        lr = learning_rate(step, 60, 1e-2, warmup=5)  # a changing lr must be honoured too
        ours.lr = lr
        reference.param_groups[0]["lr"] = lr
        idx, targets = _random_batch(generator, cfg)
        for model, optimizer in ((ours_model, ours), (torch_model, reference)):
            optimizer.zero_grad()
            _, loss, _ = model(idx, targets)
            loss.backward()
            optimizer.step()
        for (name, p), q in zip(ours_model.named_parameters(), torch_model.parameters()):
            assert_close(p, q, rtol=0, atol=1e-10, msg=lambda m: f"step {step}, {name}: {m}")
    # the parameters really moved: the comparison is not between two untouched copies
    assert not torch.equal(ours_model.head.weight, TransformerLM(cfg).head.weight)


def test_adamw_skips_parameters_without_grad_like_torch(f64):
    a = torch.randn(4, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    a2, b2 = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    ours = AdamW([a, b], lr=0.05, weight_decay=0.2)
    reference = torch.optim.AdamW([a2, b2], lr=0.05, weight_decay=0.2)
    for step in range(55):
        for params, optimizer in (((a, b), ours), ((a2, b2), reference)):
            optimizer.zero_grad()
            loss = (params[0] ** 2).sum()
            if step % 3 == 0:  # b has a gradient only every third step
                loss = loss + (params[1].sin()).sum()
            loss.backward()
            optimizer.step()
    assert_close(a, a2, rtol=0, atol=1e-10)
    assert_close(b, b2, rtol=0, atol=1e-10)
    assert ours.steps == [55, 19]


def test_adamw_holds_a_shared_parameter_once(f64):
    shared = torch.randn(5, requires_grad=True)
    other = torch.randn(2, requires_grad=True)
    optimizer = AdamW([shared, other, shared], lr=0.1)
    assert len(optimizer.params) == 2
    assert optimizer.params[0] is shared and optimizer.params[1] is other
    twin = shared.detach().clone().requires_grad_()
    reference = torch.optim.AdamW([twin], lr=0.1)
    for _ in range(3):
        for p, opt in ((shared, optimizer), (twin, reference)):
            opt.zero_grad()
            (p**3).sum().backward()
            opt.step()
    assert_close(shared, twin, rtol=0, atol=1e-12)  # stepped once per step, not twice


def test_adamw_rejects_a_frozen_parameter_and_an_empty_list():
    frozen = torch.zeros(3)
    with pytest.raises(ValueError, match="does not require grad"):
        AdamW([torch.zeros(2, requires_grad=True), frozen])
    with pytest.raises(ValueError, match="empty"):
        AdamW([])
    with pytest.raises(TypeError):
        AdamW(torch.zeros(2, requires_grad=True))


def test_adamw_accepts_a_generator_and_zero_grad_forgets_gradients():
    model = TransformerLM(tiny_config())
    optimizer = AdamW(model.parameters())  # a generator, consumed once
    assert len(optimizer.params) == len(list(model.parameters()))
    idx = torch.randint(0, 27, (2, 4))
    model(idx, idx)[1].backward()
    assert all(p.grad is not None for p in optimizer.params)
    optimizer.zero_grad()
    assert all(p.grad is None for p in optimizer.params)


# ------------------------------------------------------------------ clipping


@pytest.mark.parametrize("max_norm", [0.5, 1.0, 100.0])
def test_clip_grad_norm_matches_torch(f64, max_norm):
    generator = torch.Generator().manual_seed(1)
    shapes = [(3, 4), (4,), (2, 2, 2)]
    ours = [torch.zeros(s, requires_grad=True) for s in shapes]
    theirs = [torch.zeros(s, requires_grad=True) for s in shapes]
    for p, q in zip(ours, theirs):
        grad = torch.randn(p.shape, generator=generator)
        p.grad, q.grad = grad.clone(), grad.clone()
    extra = torch.zeros(3, requires_grad=True)  # no gradient: ignored by both
    total = clip_grad_norm(ours + [extra], max_norm)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm)
    assert_close(total, expected, rtol=0, atol=1e-12)
    for p, q in zip(ours, theirs):
        assert_close(p.grad, q.grad, rtol=0, atol=1e-12)
    after = math.sqrt(sum(float((p.grad**2).sum()) for p in ours))
    assert after <= max_norm + 1e-9
    if float(expected) <= max_norm:
        assert after == pytest.approx(float(expected))  # below the limit: untouched


# ------------------------------------------------------------------- batches


def test_make_batch_pads_at_the_end_and_masks_padding():
    tok = CharTokenizer(NAMES)
    docs = encode_documents(["ana", "christopher", "li"], tok)
    inputs, targets, mask = make_batch(docs, block_size=8, pad_id=tok.bos_id)
    assert inputs.shape == targets.shape == mask.shape == (3, 8)
    assert inputs.dtype == targets.dtype == torch.long and mask.dtype == torch.bool
    assert mask.sum(dim=1).tolist() == [4, 8, 3]  # min(block_size, len(ids) - 1)
    for row, ids in enumerate(docs):
        x, y = training_windows(ids, 8)
        assert inputs[row, : len(x)].tolist() == x
        assert targets[row, : len(y)].tolist() == y
        assert not mask[row, len(x) :].any()
    assert inputs[0].tolist()[:4] == [tok.bos_id, *tok.encode("ana")]


def test_the_judges_batch_is_make_batch():
    """The public judge of make_batch builds its own batch one document at a time from
    the windows; on random documents, block sizes and pad ids it is make_batch's."""
    from grader.checks.ch08_training.make_batch.hidden import right_batch

    g = torch.Generator().manual_seed(5)
    for _ in range(200):
        count = int(torch.randint(1, 7, (1,), generator=g))
        documents = [[9, *torch.randint(0, 9, (int(torch.randint(0, 12, (1,), generator=g)),), generator=g).tolist(), 9]
                     for _ in range(count)]
        block_size, pad_id = int(torch.randint(1, 10, (1,), generator=g)), int(torch.randint(0, 10, (1,), generator=g))
        for judge, ours in zip(right_batch(documents, block_size, pad_id), make_batch(documents, block_size, pad_id)):
            assert judge.dtype == ours.dtype
            assert torch.equal(judge, ours)


def test_padded_batch_scores_what_the_documents_score_one_by_one():
    torch.manual_seed(0)
    tok = CharTokenizer(NAMES)
    model = TransformerLM(tiny_config(vocab_size=tok.vocab_size))
    docs = encode_documents(NAMES, tok)
    inputs, targets, mask = make_batch(docs, 8, tok.bos_id)
    logits, _, _ = model(inputs)
    total, count = 0.0, 0
    for ids in docs:
        x, y = training_windows(ids, 8)
        single, loss, _ = model(torch.tensor([x]), torch.tensor([y]))
        total += loss.item() * len(x)
        count += len(x)
    assert masked_loss(logits, targets, mask).item() == pytest.approx(total / count, abs=1e-6)


# ------------------------------------------------------------------ the model


def test_every_parameter_trains_and_is_held_once(names_split):
    train_docs, _, tok = names_split
    torch.manual_seed(0)
    model = TransformerLM(tiny_config(vocab_size=tok.vocab_size, block_size=16))
    params = list(model.parameters())
    assert all(p.requires_grad for p in params)
    optimizer = AdamW(model.parameters(), lr=1e-3)
    assert len(optimizer.params) == len(params) == len({id(p) for p in params})
    assert {id(p) for p in optimizer.params} == {id(p) for p in params}
    inputs, targets, mask = make_batch(encode_documents(train_docs[:64], tok), 16, tok.bos_id)
    train_step(model, optimizer, inputs, targets, mask, max_norm=None)
    zero = [name for name, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert not zero, f"no gradient reached {zero}"


def test_a_short_run_lowers_the_loss(names_split):
    train_docs, val_docs, tok = names_split
    torch.manual_seed(0)
    model = TransformerLM(tiny_config(vocab_size=tok.vocab_size, block_size=16, n_layers=1))
    before = evaluate(model, val_docs[:300], tok)
    assert before == pytest.approx(math.log(tok.vocab_size), abs=0.05)  # small init: near uniform
    history = train(model, train_docs[:2000], val_docs[:300], tok, steps=60, batch_size=32, lr=1e-2, seed=0)
    assert len(history["train_loss"]) == 60 and history["val_step"] == [59]
    assert history["val_loss"][-1] < before - 0.4
    assert sum(history["train_loss"][-10:]) / 10 < sum(history["train_loss"][:10]) / 10 - 0.4


def test_training_stops_at_the_time_budget():
    tok = CharTokenizer(NAMES)
    model = TransformerLM(tiny_config(vocab_size=tok.vocab_size))
    history = train(model, NAMES, NAMES[:2], tok, steps=50, batch_size=4, lr=1e-3, max_seconds=0.0)
    assert history["stopped_early"] and len(history["step"]) == 1 and len(history["val_loss"]) == 1


def test_learning_rate_warms_up_then_decays():
    lrs = [learning_rate(s, 100, 1.0, warmup=10) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert lrs[-1] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:]))


# ---------------------------------------------------------------- evaluation


def test_evaluate_is_the_mean_over_all_scored_characters():
    torch.manual_seed(0)
    tok = CharTokenizer(NAMES)
    model = TransformerLM(tiny_config(vocab_size=tok.vocab_size)).train()
    full = evaluate(model, NAMES, tok, batch_size=512)
    # batches of 3 leave a last batch of 1; a mean of batch means would differ
    assert evaluate(model, NAMES, tok, batch_size=3) == pytest.approx(full, abs=1e-6)
    logits_sum, count = 0.0, 0
    for name in NAMES:
        x, y = training_windows(tok.encode_document(name), 8)
        logits, _, _ = model(torch.tensor([x]))
        logits_sum += cross_entropy(logits[0], torch.tensor(y)).item() * len(x)
        count += len(x)
    assert full == pytest.approx(logits_sum / count, abs=1e-6)
    assert model.training  # the mode is restored


def test_bigram_baseline_by_hand():
    tok = CharTokenizer(["ab"])  # a=0, b=1, BOS=2, V=3
    # train pairs: (BOS,a) (a,b) (b,BOS). Add-one: P(b|BOS) = (0+1)/(1+3), P(BOS|b) = (1+1)/(1+3)
    assert bigram_baseline(["ab"], ["b"], tok) == pytest.approx((math.log(4) + math.log(2)) / 2)
    # add-k with k = 0.5: P(b|BOS) = 0.5/2.5, P(BOS|b) = 1.5/2.5
    assert bigram_baseline(["ab"], ["b"], tok, smoothing=0.5) == pytest.approx(
        -(math.log(0.2) + math.log(0.6)) / 2
    )
    # block_size 1 scores only the first position of "ab": P(a|BOS) = 2/4
    assert bigram_baseline(["ab"], ["ab"], tok, block_size=1) == pytest.approx(math.log(2))
    with pytest.raises(ValueError):
        bigram_baseline(["ab"], ["b"], tok, smoothing=0.0)


def test_bigram_baseline_on_the_names_is_a_sane_number(names_split):
    train_docs, val_docs, tok = names_split
    baseline = bigram_baseline(train_docs[:5000], val_docs[:500], tok, block_size=16)
    assert 2.2 < baseline < math.log(tok.vocab_size)  # better than uniform, worse than a real model


def test_checkpoint_round_trip(tmp_path):
    torch.manual_seed(0)
    tok = CharTokenizer(NAMES)
    model = TransformerLM(tiny_config(vocab_size=tok.vocab_size))
    save_checkpoint(tmp_path / "m.pt", model, tok, val_loss=1.5)
    loaded, loaded_tok, saved = load_checkpoint(tmp_path / "m.pt")
    assert loaded_tok.chars == tok.chars and loaded.cfg == model.cfg and saved["val_loss"] == 1.5
    idx = torch.randint(0, tok.vocab_size, (2, 5))
    assert torch.equal(loaded(idx)[0], model(idx)[0])
