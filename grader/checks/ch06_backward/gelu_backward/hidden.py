"""The hidden checks of grader/checks/ch06_backward/gelu_backward/__init__.py."""

from __future__ import annotations

import math

import torch

from grader.checks._api import check, exact_gelu, tanh_gelu
from grader.checks.ch06_backward.common import judge_grads, random_tensor
from grader.checks.ch06_backward.gelu_backward import (
    MISTAKES, finite_differences, key_values, matches_autograd, probe_gelu_backward,
)
from grader.checks.ch06_backward.hidden.oracles import autograd_of, differences_facts, grads_facts
from grader.checks.facts import facts_for


def gelu_mistakes(grad_out, x):
    """What each mistake of MISTAKES gives dx, by its name."""
    # GELU'(x) from autograd on the exact forward, Φ(x) from torch.special.ndtr, and the
    # product rule's other term as their difference: x·φ(x) = GELU'(x) − Φ(x).
    slope = autograd_of(exact_gelu, torch.ones_like(x), x)[0]
    cdf = torch.special.ndtr(x.double())
    x_pdf = slope - cdf
    return {
        "no_x_pdf_term": grad_out * cdf,
        "no_cdf_term": grad_out * x_pdf,
        "no_chain_rule": slope,
        "pdf_unnormalised": grad_out * (cdf + x_pdf * math.sqrt(2.0 * math.pi)),
        "pdf_without_half": grad_out * (cdf + x_pdf * torch.exp(-x * x / 2)),  # exp(−x²) = exp(−x²/2)·exp(−x²/2)
        "tanh_derivative": autograd_of(tanh_gelu, grad_out, x)[0],
        "at_output": grad_out * autograd_of(exact_gelu, torch.ones_like(x), exact_gelu(x))[0],
        "relu_derivative": grad_out * (x > 0).double(),
        "forward": grad_out * exact_gelu(x),
    }


@facts_for(matches_autograd, key_values)
def autograd_facts(ref, inputs):
    g, x = inputs["grad_out"], inputs["x"]
    return grads_facts(exact_gelu, g, [x], lambda right: {"dx": gelu_mistakes(g, x)})


@facts_for(finite_differences)
def finite_difference_facts(ref, inputs):
    return differences_facts(exact_gelu, inputs["grad_out"], [inputs["x"]], inputs["_directions"])


def _expect_gelu(ref, inputs):
    return ref.backward.gelu_backward(inputs["grad_out"], inputs["x"])


@check("matches_reference", 2, "random tensors of another shape match the reference gradient",
       probe=probe_gelu_backward,
       inputs=lambda g: {"grad_out": random_tensor(g, 2, 3, 4, 5), "x": random_tensor(g, 2, 3, 4, 5, scale=2.5)},
       expect=_expect_gelu, hidden=True)
def matches_reference(out, inputs, expected):
    g, x = inputs["grad_out"], inputs["x"]
    return judge_grads(out, ("dx",), "gelu_backward", [expected], {}, {"dx": gelu_mistakes(g, x)},
                       MISTAKES, hidden=True)
