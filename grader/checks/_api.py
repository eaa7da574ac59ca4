"""The vocabulary of a check: what it is (data) and three small functions.

    probe(ns, **inputs)        runs in the sandbox on the student's code; returns plain data
    judge(out, inputs, expected) runs in the grader (inputs whose key starts with "_"
                               stay here and never reach the probe); returns None when right, else the
                               diagnosis a student can act on
    expect(ref, inputs)        optional, runs in the grader on the reference (hidden checks)

`ns` exposes the graded package's modules (ns.model, ns.tokenizer, ...), the task
under test being the student's and every other task certified.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch


@dataclass(frozen=True)
class Check:
    name: str  # ch05.block.zero_branch_identity
    task: str
    points: float
    summary: str  # one line: what a pass means
    probe: Callable[..., Any]
    judge: Callable[[Any, dict, Any], "str | None"]
    inputs: "dict | Callable[[torch.Generator], dict]" = field(default_factory=dict)
    expect: "Callable[[Any, dict], Any] | None" = None
    hidden: bool = False
    timeout: float = 10.0

    @property
    def chapter(self) -> str:
        return self.name.split(".")[0].removeprefix("ch")

    def make_inputs(self, generator: torch.Generator) -> dict:
        return self.inputs(generator) if callable(self.inputs) else dict(self.inputs)


@dataclass(frozen=True)
class Task:
    """A graded unit: one solution region, owned by module:qualname."""

    name: str
    module: str
    qualname: str
    title: str
    forbidden: tuple[str, ...] = ()  # dotted names whose use scores 'forbidden'
    forbidden_methods: tuple[str, ...] = ()  # attribute names forbidden on any object


def check(name: str, task: str, points: float, summary: str, probe, judge, **more) -> Check:
    return Check(name=name, task=task, points=points, summary=summary, probe=probe, judge=judge, **more)


# ----------------------------------------------------------------- judging helpers


def as_tensor(value, what: str = "the output") -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    raise TypeError(f"{what} should be a tensor, got {type(value).__name__}")


def shape_problem(actual, expected_shape, what: str = "the output") -> "str | None":
    if not isinstance(actual, torch.Tensor):
        return f"{what} should be a tensor, got {type(actual).__name__}"
    if tuple(actual.shape) != tuple(expected_shape):
        return f"{what} has shape {list(actual.shape)}, expected {list(expected_shape)}"
    return None


def max_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return (actual.double() - expected.double()).abs().max().item() if actual.numel() else 0.0


def matches(actual, expected: torch.Tensor, atol: float = 1e-8, rtol: float = 1e-6) -> bool:
    if not isinstance(actual, torch.Tensor) or tuple(actual.shape) != tuple(expected.shape):
        return False
    if not torch.isfinite(actual.double()).all() and torch.isfinite(expected.double()).all():
        return False
    return torch.allclose(actual.double(), expected.double(), atol=atol, rtol=rtol)


def compare(actual, expected: torch.Tensor, what: str = "the output", atol: float = 1e-8,
            rtol: float = 1e-6) -> "str | None":
    """None when actual matches expected; otherwise a description without values."""
    problem = shape_problem(actual, expected.shape, what)
    if problem:
        return problem
    if not torch.isfinite(actual.double()).all():
        return f"{what} contains NaN or inf"
    if matches(actual, expected, atol, rtol):
        return None
    error = (actual.double() - expected.double()).abs()
    where = tuple(int(i) for i in torch.nonzero(error == error.max())[0])
    return f"{what} is off by up to {error.max().item():.3g} (first at index {list(where)})"


def first_diagnosis(actual, candidates: "list[tuple[str, torch.Tensor]]", atol=1e-8, rtol=1e-6) -> "str | None":
    """The explanation of the first known mistake whose output actual reproduces."""
    for explanation, wrong in candidates:
        if matches(actual, wrong, atol, rtol):
            return explanation
    return None


def error_text(value) -> str:
    return f"{value.kind}: {value.message}" if hasattr(value, "kind") else repr(value)
