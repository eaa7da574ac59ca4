"""What chapter 07's hidden checks share: random model configurations."""

from __future__ import annotations

import torch


def random_lm_configs(g, count=4):
    configs = []
    for _ in range(count):
        pick = lambda low, high: int(torch.randint(low, high + 1, (1,), generator=g))  # noqa: E731
        h = pick(1, 4)
        configs.append(dict(vocab_size=pick(5, 60), block_size=pick(3, 40), n_layers=pick(1, 4),
                            d_model=h * pick(1, 6), n_heads=h, d_ff=pick(2, 40)))
    return configs
