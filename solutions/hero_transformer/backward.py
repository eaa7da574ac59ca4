"""Chapter 06: backward passes by hand.

Each *_backward function takes the upstream gradient and what the forward saw, and
returns the gradients of the forward's inputs, with no help from autograd. The
Function classes at the bottom plug them into torch so gradcheck can test them.
Shapes: x [..., d]; gamma, beta [d]; weight [out, in] (nn.Linear's layout).
"""

from __future__ import annotations

import math

import torch

from .model import LayerNorm, gelu

LAYER_NORM_EPS = 1e-5


def layer_norm_backward(grad_out, x, gamma, eps=LAYER_NORM_EPS):
    """y = gamma * (x - mean) / sqrt(var + eps) + beta over the last axis.
    Returns (dx, dgamma, dbeta)."""
    ### BEGIN SOLUTION layer_norm_backward
    d = x.shape[-1]
    mean = x.mean(dim=-1, keepdim=True)
    centred = x - mean
    inv_std = 1.0 / torch.sqrt((centred * centred).mean(dim=-1, keepdim=True) + eps)
    normalised = centred * inv_std
    dgamma = (grad_out * normalised).reshape(-1, d).sum(dim=0)
    dbeta = grad_out.reshape(-1, d).sum(dim=0)
    dnorm = grad_out * gamma
    # The mean and the variance both depend on every feature: two correction terms.
    dx = inv_std / d * (
        d * dnorm
        - dnorm.sum(dim=-1, keepdim=True)
        - normalised * (dnorm * normalised).sum(dim=-1, keepdim=True)
    )
    return dx, dgamma, dbeta
    ### END SOLUTION


def gelu_backward(grad_out, x):
    """y = x * Phi(x); dy/dx = Phi(x) + x * phi(x)."""
    ### BEGIN SOLUTION gelu_backward
    cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
    pdf = torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return grad_out * (cdf + x * pdf)
    ### END SOLUTION


def linear_backward(grad_out, x, weight):
    """y = x @ weight.T + bias. Returns (dx, dweight, dbias)."""
    ### BEGIN SOLUTION linear_backward
    dx = grad_out @ weight
    flat_grad = grad_out.reshape(-1, grad_out.shape[-1])
    flat_x = x.reshape(-1, x.shape[-1])
    return dx, flat_grad.T @ flat_x, flat_grad.sum(dim=0)
    ### END SOLUTION


def residual_feedforward_backward(grad_out, x, gamma, beta, w1, b1, w2, b2, eps=LAYER_NORM_EPS):
    """y = x + fc2(gelu(fc1(LN(x)))), the feed-forward half of a pre-LN block.
    Returns (dx, dgamma, dbeta, dw1, db1, dw2, db2). The skip path adds grad_out to
    dx unchanged; the branch adds its own term on top."""
    ### BEGIN SOLUTION residual_backward
    normed = _layer_norm(x, gamma, beta, eps)  # the forward again: chapter 05's parts
    pre = normed @ w1.T + b1
    act = gelu(pre)
    dact, dw2, db2 = linear_backward(grad_out, act, w2)
    dpre = gelu_backward(dact, pre)
    dnormed, dw1, db1 = linear_backward(dpre, normed, w1)
    dx_branch, dgamma, dbeta = layer_norm_backward(dnormed, x, gamma, eps)
    return grad_out + dx_branch, dgamma, dbeta, dw1, db1, dw2, db2
    ### END SOLUTION


# ------------------------------------------------------------------ torch plumbing
# The forwards are chapter 05's own gelu and LayerNorm (from model.py), not restated here.


def _layer_norm(x, gamma, beta, eps):
    """Chapter 05's LayerNorm over the last axis, with this gamma and beta."""
    norm = LayerNorm(x.shape[-1], eps).to(device=x.device, dtype=x.dtype).requires_grad_(False)
    with torch.no_grad():
        norm.weight.copy_(gamma)
        norm.bias.copy_(beta)
    return norm(x)


class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, gamma, beta):
        ctx.save_for_backward(x, gamma)
        return _layer_norm(x, gamma, beta, LAYER_NORM_EPS)

    @staticmethod
    def backward(ctx, grad_out):
        x, gamma = ctx.saved_tensors
        return layer_norm_backward(grad_out, x, gamma)


class GELUFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return gelu(x)

    @staticmethod
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        return gelu_backward(grad_out, x)


class LinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return x @ weight.T + bias

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        return linear_backward(grad_out, x, weight)


class ResidualFeedForwardFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, gamma, beta, w1, b1, w2, b2):
        ctx.save_for_backward(x, gamma, beta, w1, b1, w2, b2)
        hidden = gelu(_layer_norm(x, gamma, beta, LAYER_NORM_EPS) @ w1.T + b1)
        return x + hidden @ w2.T + b2

    @staticmethod
    def backward(ctx, grad_out):
        return residual_feedforward_backward(grad_out, *ctx.saved_tensors)
