"""What chapter 00's hidden checks share: random seeds and floats for their random inputs."""

from __future__ import annotations

import torch


def random_seed(g: torch.Generator) -> int:
    return int(torch.randint(0, 2**31 - 1, (1,), generator=g).item())


def uniform(g: torch.Generator, lo: float, hi: float) -> float:
    return lo + (hi - lo) * torch.rand((), generator=g, dtype=torch.float64).item()
