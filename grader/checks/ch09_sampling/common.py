"""What chapter 09's two task modules share: the generators, made inside the probe from
a seed the grader sends, and how a raised exception is reported."""

from __future__ import annotations

import torch

from grader.checks._api import exception_name


def raised(result, what):
    """'<what> raised <the exception's type>', for a try_call result that raised."""
    return f"{what} raised {exception_name(result['raised'])}"


def seeded_generator(seed):
    return torch.Generator().manual_seed(int(seed))
