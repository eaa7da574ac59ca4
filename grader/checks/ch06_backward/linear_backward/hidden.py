"""The hidden checks of grader/checks/ch06_backward/linear_backward/__init__.py."""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.ch06_backward.common import judge_grads
from grader.checks.ch06_backward.hidden.oracles import autograd_of, differences_facts, grads_facts, linear_of
from grader.checks.ch06_backward.linear_backward import (
    LINEAR_NAMES, MISTAKES, finite_differences, linear_inputs, linear_shapes, matches_autograd,
    probe_linear_backward,
)
from grader.checks.facts import facts_for


def linear_mistakes(grad_out, x, weight):
    """What each mistake of MISTAKES gives, by gradient and name;
    the transposes only where the weight is square, where they have the right shape."""
    # dweight and dbias from autograd on x Wᵀ + b (neither depends on b).
    positions = grad_out.numel() // grad_out.shape[-1]
    _, dweight, dbias = autograd_of(linear_of, grad_out, x, weight, grad_out.new_zeros(weight.shape[0]))
    square = weight.shape[0] == weight.shape[1]
    return {
        "dx": {"weight_transposed": grad_out @ weight.T} if square else {},
        "dweight": {**({"transposed": dweight.T} if square else {}), "averaged": dweight / positions},
        "dbias": {"averaged": dbias / positions},
    }


@facts_for(matches_autograd)
def autograd_facts(ref, inputs):
    g, x, w = inputs["grad_out"], inputs["x"], inputs["weight"]
    return grads_facts(linear_of, g, [x, w, inputs["_bias"]], lambda right: linear_mistakes(g, x, w))


@facts_for(finite_differences)
def finite_difference_facts(ref, inputs):
    return differences_facts(linear_of, inputs["grad_out"], [inputs["x"], inputs["weight"], inputs["_bias"]],
                             inputs["_directions"])


def _expect_linear(ref, inputs):
    return list(ref.backward.linear_backward(inputs["grad_out"], inputs["x"], inputs["weight"]))


@check("matches_reference", 2, "4-D inputs and a square weight match the reference gradients",
       probe=probe_linear_backward, inputs=linear_inputs((2, 2, 3, 5), 5), expect=_expect_linear, hidden=True)
def matches_reference(out, inputs, expected):
    g, x, w = inputs["grad_out"], inputs["x"], inputs["weight"]
    return judge_grads(out, LINEAR_NAMES, "linear_backward", expected, linear_shapes(g, x, w),
                        linear_mistakes(g, x, w), MISTAKES, hidden=True)
