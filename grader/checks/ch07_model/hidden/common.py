"""What chapter 07's hidden modules share: random model configurations, and the
parameter ledger the counts are judged by (with what each known mistake changes it by),
which the kit also writes as data for the public checks' configurations."""

from __future__ import annotations

import torch

from grader.checks.ch05_block.hidden.oracles import block_parameters, model_parameters
from grader.checks.ch07_model.common import full_sizes


def random_lm_configs(g, count=4):
    configs = []
    for _ in range(count):
        pick = lambda low, high: int(torch.randint(low, high + 1, (1,), generator=g))  # noqa: E731
        h = pick(1, 4)
        configs.append(dict(vocab_size=pick(5, 60), block_size=pick(3, 40), n_layers=pick(1, 4),
                            d_model=h * pick(1, 6), n_heads=h, d_ff=pick(2, 40)))
    return configs


def ledger_of(sizes):
    return model_parameters(full_sizes(sizes))


def count_facts(sizes):
    """The ledger's count for sizes, and what each known mistake changes it by."""
    s = full_sizes(sizes)
    V, C, N, d, f = s["vocab_size"], s["block_size"], s["n_layers"], s["d_model"], s["d_ff"]
    block = block_parameters(d, f)
    known = [
        (-(N - 1) * block, "one block object reused N times: the N blocks must be N separate "
                           "TransformerBlock objects, each with its own parameters"),
        (-N * block, "the blocks' parameters are not counted/registered: keep the blocks in an nn.ModuleList "
                     "(a plain Python list hides them from .parameters())"),
        (V, "the head has a bias: the head is bias-free (nn.Linear(d, V, bias=False))"),
        (-V * d, "the head is tied to the token embedding (one shared V×d matrix): this model's head is "
                 "untied, with its own weight"),
        (-V * d + V, "the head is tied to the token embedding and has a bias: it is untied and bias-free"),
        (-2 * d, "there is no final LayerNorm (ln_final, 2d parameters) before the head"),
        (-C * d, "the position embedding (C·d parameters) is missing"),
        (4 * d * N, "the attention projections have biases (4d per block); Q/K/V/O are bias-free"),
        (-f * N, "the first feed-forward bias (f per block) is missing"),
        (-(f + d) * N, "the feed-forward biases (f + d per block) are missing"),
        (-4 * d * N, "the blocks' LayerNorm γ and β (4d per block) are missing"),
    ]
    return {"ledger": ledger_of(sizes), "mistakes": known}
