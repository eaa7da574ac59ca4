"""The hidden checks of grader/checks/ch06_backward/residual_backward/__init__.py."""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.ch06_backward.common import judge_grads
from grader.checks.ch06_backward.hidden.oracles import (
    differences_facts, grads_facts, residual_forward, residual_mistakes,
)
from grader.checks.ch06_backward.residual_backward import (
    RESIDUAL_ARGS, RESIDUAL_MISTAKES, RESIDUAL_NAMES, residual_inputs, residual_shapes, probe_residual_backward,
)
from grader.checks.facts import facts_for


@facts_for("ch06.residual_backward.matches_autograd")
def autograd_facts(ref, inputs):
    g, tensors = inputs["grad_out"], [inputs[name] for name in RESIDUAL_ARGS]
    return grads_facts(residual_forward, g, tensors, lambda right: residual_mistakes(g, tensors, right))


@facts_for("ch06.residual_backward.finite_differences")
def finite_difference_facts(ref, inputs):
    return differences_facts(residual_forward, inputs["grad_out"], [inputs[name] for name in RESIDUAL_ARGS],
                             inputs["_directions"])


def _expect_residual(ref, inputs):
    return list(ref.backward.residual_feedforward_backward(inputs["grad_out"],
                                                           *(inputs[name] for name in RESIDUAL_ARGS)))


@check("matches_reference", 2, "other shapes (x [3, 2, 6], f = 10) match the reference gradients",
       probe=probe_residual_backward, inputs=residual_inputs((3, 2, 6), 10), expect=_expect_residual, hidden=True)
def judge_residual_reference(out, inputs, expected):
    return judge_grads(out, RESIDUAL_NAMES, "residual_feedforward_backward", expected, residual_shapes(inputs),
                        residual_mistakes(inputs["grad_out"], [inputs[name] for name in RESIDUAL_ARGS],
                                          expected), RESIDUAL_MISTAKES, hidden=True)
