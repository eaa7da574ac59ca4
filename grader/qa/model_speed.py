"""Model speed figures for `make bench`, each a ratio measured in one run:
training tokens per second of the torch model against the scalar model of chapter 00
on the same configuration, and generating block_size tokens through the KV cache
against recomputing the whole prefix for every new token."""

from __future__ import annotations

import sys
import time

import torch

from grader import KIT_ROOT

SOLUTIONS = KIT_ROOT / "solutions"


def _reference():
    if str(SOLUTIONS) not in sys.path:
        sys.path.insert(0, str(SOLUTIONS))
    from hero_transformer import data, micro, model, sample, tokenizer, train

    return data, micro, model, sample, tokenizer, train


def training_throughput(seconds: float = 4.0) -> tuple[float, float]:
    """(scalar tokens/s, torch tokens/s) training on names with E=16, L=1, T=16, 4 heads, H=4."""
    data, micro, model, _, tokenizer_module, train = _reference()
    names = list(data.load_names())
    tok = tokenizer_module.CharTokenizer(names)
    docs = [tok.encode_document(n) for n in names[:4000]]

    import gc

    scalar = micro.MicroGPT(tok.vocab_size, n_embd=16, n_layer=1, block_size=16, n_head=4, seed=0)
    gc.disable()  # as `make micro` does: the Value graphs hold no cycles, so gc only costs time
    optimizer = micro.Adam(scalar.params, total_steps=10**6)
    tokens, started, i = 0, time.perf_counter(), 0
    while time.perf_counter() - started < seconds:
        ids = docs[i % len(docs)]
        loss = micro.document_loss(scalar, ids)
        loss.backward()
        optimizer.step()
        scalar.finish_sequence()
        tokens += min(16, len(ids) - 1)
        i += 1
    scalar_rate = tokens / (time.perf_counter() - started)
    gc.enable()

    torch.manual_seed(0)
    cfg = model.Config(vocab_size=tok.vocab_size, block_size=16, d_model=16, n_heads=4, n_layers=1, d_ff=64)
    net = model.TransformerLM(cfg)
    opt = train.AdamW(net.parameters(), lr=1e-3)
    tokens, started, i = 0, time.perf_counter(), 0
    while time.perf_counter() - started < seconds:
        batch = [docs[(i * 64 + j) % len(docs)] for j in range(64)]
        inputs, targets, mask = train.make_batch(batch, 16, tok.bos_id)
        train.train_step(net, opt, inputs, targets, mask)
        tokens += int(mask.sum())
        i += 1
    torch_rate = tokens / (time.perf_counter() - started)
    return scalar_rate, torch_rate


def generation_speed(repeats: int = 5) -> tuple[float, float, int]:
    """(seconds with the cache, seconds recomputing the prefix, tokens) for block_size tokens."""
    _, _, model, sample, _, _ = _reference()
    torch.manual_seed(0)
    cfg = model.Config(vocab_size=27, block_size=128, d_model=128, n_heads=4, n_layers=4, d_ff=512)
    net = model.TransformerLM(cfg).eval()
    prompt = torch.tensor([[26]])
    new = cfg.block_size  # the prompt's id plus block_size new ids: every position is used

    def cached():
        sample.generate(net, prompt, new, temperature=0.0)

    @torch.no_grad()
    def recomputed():
        ids = prompt
        for _ in range(new):
            logits, _, _ = net(ids[:, -cfg.block_size:])
            ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], dim=1)

    timings = []
    for run in (cached, recomputed):
        run()  # warm-up
        started = time.perf_counter()
        for _ in range(repeats):
            run()
        timings.append((time.perf_counter() - started) / repeats)
    return timings[0], timings[1], new


def model_rows():
    scalar, torch_rate = training_throughput()
    cached, recomputed, tokens = generation_speed()
    return [
        ("training, scalar model of chapter 00 (E=16, L=1, T=16)", f"{scalar:,.0f} tokens/s", ""),
        ("training, torch model of chapter 07, same sizes, batch 64", f"{torch_rate:,.0f} tokens/s",
         f"torch is {torch_rate / scalar:,.0f}× faster"),
        (f"generate {tokens} tokens with the KV cache (d=128, 4 layers)", f"{cached * 1000:.0f} ms", ""),
        (f"generate {tokens} tokens recomputing the prefix", f"{recomputed * 1000:.0f} ms",
         f"the cache is {recomputed / cached:.1f}× faster"),
    ]
