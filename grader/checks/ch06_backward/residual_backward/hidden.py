"""The hidden checks of grader/checks/ch06_backward/residual_backward/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check, exact_gelu
from grader.checks.ch05_block.hidden.oracles import layer_norm
from grader.checks.ch06_backward.common import judge_grads
from grader.checks.ch06_backward.hidden.oracles import autograd_of, differences_facts, grads_facts, residual_forward
from grader.checks.ch06_backward.residual_backward import (
    MISTAKES, RESIDUAL_ARGS, RESIDUAL_NAMES, RESIDUAL_SLIPS, finite_differences, matches_autograd,
    probe_residual_backward, residual_inputs, residual_shapes,
)
from grader.checks.facts import facts_for


def _gelu_slope(z):
    """GELU′ at z, from autograd on the exact forward."""
    return autograd_of(exact_gelu, torch.ones_like(z), z)[0]


def _flat(t):
    return t.reshape(-1, t.shape[-1])


def residual_chain(grad_out, x, gamma, beta, w1, b1, w2, b2, slip=None):
    """The half-block's seven gradients by the chain rule, stage by stage, with one slip
    (a tensor taken from the wrong place) or none; None when the slip does not fit these
    shapes. The stages: fc2 (dw2, db2, dact), GELU (dpre), fc1 (dw1, db1, dnormed),
    LayerNorm (dgamma, dbeta, the branch's dx), the skip (dx)."""
    normed = layer_norm(x, gamma, beta)
    plain = normed @ w1.T
    pre = plain + b1
    act = exact_gelu(pre)
    fc2_input = {"dw2_from_pre": pre, "dw2_from_normed": normed}.get(slip, act)
    if fc2_input.shape[-1] != w2.shape[1]:
        return None
    dw2, db2 = _flat(grad_out).T @ _flat(fc2_input), _flat(grad_out).sum(0)
    dact = grad_out @ w2
    at = {"gelu_at_output": act, "gelu_at_no_bias": plain}.get(slip, pre)
    dpre = dact if slip == "no_gelu_slope" else dact * _gelu_slope(at)
    fc1_grad = dact if slip == "dw1_before_gelu" else dpre
    fc1_input = {"dw1_from_x": x}.get(slip, normed)
    dw1, db1 = _flat(fc1_grad).T @ _flat(fc1_input), _flat(fc1_grad).sum(0)
    dnormed = dpre @ w1
    ln_point = normed if slip == "layer_norm_at_output" else x
    dx_branch, dgamma, dbeta = autograd_of(layer_norm, dnormed, ln_point, gamma, beta)
    return [grad_out + dx_branch, dgamma, dbeta, dw1, db1, dw2, db2]


def residual_mistakes(grad_out, tensors, right):
    """{gradient name: {mistake name: tensor}}: the skip-path mistakes of
    MISTAKES_SKIP on dx, and for each slip of RESIDUAL_SLIPS the value it gives every
    gradient it changes (a later gradient a slip changes is named with the slip too: the
    judge names the first wrong one)."""
    dx = right[0]
    table = {"dx": {"skip_missing": dx - grad_out, "skip_only": grad_out, "skip_twice": dx + grad_out}}
    for slip in RESIDUAL_SLIPS:
        grads = residual_chain(grad_out, *tensors, slip=slip)
        if grads is None:
            continue
        for name, wrong, want in zip(RESIDUAL_NAMES, grads, right):
            if wrong.shape == want.shape and not torch.allclose(wrong, want, atol=1e-8, rtol=1e-6):
                table.setdefault(name, {})[slip] = wrong
    return table


@facts_for(matches_autograd)
def autograd_facts(ref, inputs):
    g, tensors = inputs["grad_out"], [inputs[name] for name in RESIDUAL_ARGS]
    return grads_facts(residual_forward, g, tensors, lambda right: residual_mistakes(g, tensors, right))


@facts_for(finite_differences)
def finite_difference_facts(ref, inputs):
    return differences_facts(residual_forward, inputs["grad_out"], [inputs[name] for name in RESIDUAL_ARGS],
                             inputs["_directions"])


def _expect_residual(ref, inputs):
    return list(ref.backward.residual_feedforward_backward(inputs["grad_out"],
                                                           *(inputs[name] for name in RESIDUAL_ARGS)))


@check("matches_reference", 2, "other shapes (x [3, 2, 6], f = 10) match the reference gradients",
       probe=probe_residual_backward, inputs=residual_inputs((3, 2, 6), 10), expect=_expect_residual, hidden=True)
def matches_reference(out, inputs, expected):
    return judge_grads(out, RESIDUAL_NAMES, "residual_feedforward_backward", expected, residual_shapes(inputs),
                        residual_mistakes(inputs["grad_out"], [inputs[name] for name in RESIDUAL_ARGS],
                                          expected), MISTAKES, hidden=True)
