"""Chapter 06: hand-written backward passes against autograd, in float64."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.autograd import gradcheck
from torch.testing import assert_close

from hero_transformer.backward import (
    GELUFunction,
    LayerNormFunction,
    LinearFunction,
    ResidualFeedForwardFunction,
    gelu_backward,
    layer_norm_backward,
    linear_backward,
    residual_feedforward_backward,
)

TOL = dict(rtol=1e-10, atol=1e-10)


def leaf(*shape, scale=1.0, shift=0.0):
    return (torch.randn(*shape, dtype=torch.float64) * scale + shift).requires_grad_(True)


def autograd_grads(output, inputs, grad_out):
    return torch.autograd.grad(output, inputs, grad_out)


@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 4), (2, 2, 3, 7)])
def test_layer_norm_backward_matches_autograd(shape):
    torch.manual_seed(0)
    d = shape[-1]
    x, gamma, beta = leaf(*shape, scale=2, shift=1), leaf(d, shift=1), leaf(d)
    y = F.layer_norm(x, (d,), gamma, beta, eps=1e-5)
    g = torch.randn_like(y)
    expected = autograd_grads(y, (x, gamma, beta), g)
    got = layer_norm_backward(g, x.detach(), gamma.detach())
    assert len(got) == 3
    for name, a, b in zip(("dx", "dgamma", "dbeta"), got, expected):
        assert a.shape == b.shape, name
        assert_close(a, b, **TOL, msg=name)


def test_layer_norm_backward_of_a_single_vector():
    """x [d] is a valid input ("x [..., d]"): dgamma and dbeta must still be [d]."""
    torch.manual_seed(0)
    x, gamma, beta = leaf(6, scale=2), leaf(6, shift=1), leaf(6)
    y = F.layer_norm(x, (6,), gamma, beta, eps=1e-5)
    g = torch.randn_like(y)
    expected = autograd_grads(y, (x, gamma, beta), g)
    got = layer_norm_backward(g, x.detach(), gamma.detach())
    for name, a, b in zip(("dx", "dgamma", "dbeta"), got, expected):
        assert a.shape == b.shape, f"{name}: {tuple(a.shape)} != {tuple(b.shape)}"
        assert_close(a, b, **TOL, msg=name)


def test_layer_norm_backward_dx_sums_to_zero_per_position():
    torch.manual_seed(1)
    x = torch.randn(3, 5, dtype=torch.float64)
    dx, _, _ = layer_norm_backward(torch.randn(3, 5, dtype=torch.float64), x, torch.ones(5, dtype=torch.float64))
    assert_close(dx.sum(-1), torch.zeros(3, dtype=torch.float64), atol=1e-12, rtol=0)


def test_gelu_backward_matches_autograd():
    torch.manual_seed(2)
    x = torch.linspace(-6, 6, 301, dtype=torch.float64).reshape(7, 43).requires_grad_(True)
    y = F.gelu(x, approximate="none")
    g = torch.randn_like(y)
    (expected,) = autograd_grads(y, (x,), g)
    assert_close(gelu_backward(g, x.detach()), expected, **TOL)
    # at zero the derivative is Phi(0) = 1/2
    zero = torch.zeros(1, dtype=torch.float64)
    assert_close(gelu_backward(torch.ones(1, dtype=torch.float64), zero), torch.tensor([0.5], dtype=torch.float64))


@pytest.mark.parametrize("x_shape", [(5, 4), (2, 3, 4), (2, 2, 3, 4)])
def test_linear_backward_matches_autograd(x_shape):
    torch.manual_seed(3)
    x, w, b = leaf(*x_shape), leaf(6, 4), leaf(6)
    y = F.linear(x, w, b)
    g = torch.randn_like(y)
    expected = autograd_grads(y, (x, w, b), g)
    got = linear_backward(g, x.detach(), w.detach())
    for name, a, e in zip(("dx", "dweight", "dbias"), got, expected):
        assert a.shape == e.shape, name
        assert_close(a, e, **TOL, msg=name)


def _residual_forward(x, gamma, beta, w1, b1, w2, b2):
    d = x.shape[-1]
    hidden = F.gelu(F.linear(F.layer_norm(x, (d,), gamma, beta, eps=1e-5), w1, b1))
    return x + F.linear(hidden, w2, b2)


def _residual_params(d=4, f=8):
    return [leaf(d, shift=1), leaf(d), leaf(f, d), leaf(f), leaf(d, f), leaf(d)]


@pytest.mark.parametrize("x_shape", [(3, 4), (2, 3, 4)])
def test_residual_feedforward_backward_matches_autograd(x_shape):
    torch.manual_seed(4)
    x = leaf(*x_shape)
    params = _residual_params(d=4, f=8)
    y = _residual_forward(x, *params)
    g = torch.randn_like(y)
    expected = autograd_grads(y, (x, *params), g)
    got = residual_feedforward_backward(g, x.detach(), *[p.detach() for p in params])
    names = ("dx", "dgamma", "dbeta", "dw1", "db1", "dw2", "db2")
    assert len(got) == len(names)
    for name, a, e in zip(names, got, expected):
        assert a.shape == e.shape, name
        assert_close(a, e, **TOL, msg=name)


def test_residual_backward_skip_path_passes_grad_unchanged():
    torch.manual_seed(5)
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    gamma, beta, w1, b1, w2, b2 = [p.detach() for p in _residual_params()]
    g = torch.randn(2, 3, 4, dtype=torch.float64)
    dx = residual_feedforward_backward(g, x, gamma, beta, w1, b1, torch.zeros_like(w2), b2)[0]
    assert_close(dx, g, rtol=0, atol=0)  # a dead branch leaves only the skip path


def test_gradcheck_layer_norm_function():
    torch.manual_seed(6)
    inputs = (leaf(2, 3, 5), leaf(5, shift=1), leaf(5))
    assert gradcheck(LayerNormFunction.apply, inputs, eps=1e-6, atol=1e-6)


def test_gradcheck_gelu_function():
    torch.manual_seed(7)
    assert gradcheck(GELUFunction.apply, (leaf(3, 4, scale=2),), eps=1e-6, atol=1e-6)


def test_gradcheck_linear_function():
    torch.manual_seed(8)
    inputs = (leaf(2, 3, 4), leaf(5, 4), leaf(5))
    assert gradcheck(LinearFunction.apply, inputs, eps=1e-6, atol=1e-6)


def test_gradcheck_residual_feedforward_function():
    torch.manual_seed(9)
    inputs = (leaf(2, 3, 4), *_residual_params(d=4, f=6))
    assert gradcheck(ResidualFeedForwardFunction.apply, inputs, eps=1e-6, atol=1e-6)


def test_functions_forward_match_torch():
    torch.manual_seed(10)
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    gamma, beta, w1, b1, w2, b2 = [p.detach() for p in _residual_params()]
    assert_close(LayerNormFunction.apply(x, gamma, beta), F.layer_norm(x, (4,), gamma, beta, eps=1e-5))
    assert_close(GELUFunction.apply(x), F.gelu(x))
    assert_close(LinearFunction.apply(x, w2.T.contiguous(), b1), F.linear(x, w2.T, b1))
    assert_close(
        ResidualFeedForwardFunction.apply(x, gamma, beta, w1, b1, w2, b2),
        _residual_forward(x, gamma, beta, w1, b1, w2, b2),
    )
