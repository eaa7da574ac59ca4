"""The hidden checks of grader/checks/ch06_backward/layer_norm_backward/__init__.py."""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.ch05_block.hidden.oracles import layer_norm
from grader.checks.ch06_backward.common import judge_grads
from grader.checks.ch06_backward.hidden.oracles import differences_facts, grads_facts, layer_norm_mistakes
from grader.checks.ch06_backward.layer_norm_backward import (
    LN_MISTAKES, LN_NAMES, layer_norm_inputs, layer_norm_shapes, probe_layer_norm_backward,
)
from grader.checks.facts import facts_for


@facts_for("ch06.layer_norm_backward.matches_autograd")
def autograd_facts(ref, inputs):
    g, x, gamma = inputs["grad_out"], inputs["x"], inputs["gamma"]
    return grads_facts(layer_norm, g, [x, gamma, inputs["_beta"]], lambda right: layer_norm_mistakes(g, x, gamma))


@facts_for("ch06.layer_norm_backward.finite_differences")
def finite_difference_facts(ref, inputs):
    return differences_facts(layer_norm, inputs["grad_out"], [inputs["x"], inputs["gamma"], inputs["_beta"]],
                             inputs["_directions"])


def _expect_layer_norm(ref, inputs):
    return list(ref.backward.layer_norm_backward(inputs["grad_out"], inputs["x"], inputs["gamma"]))


@check("single_vector", 1, "a single vector x [d] gives dx, dgamma, dbeta of shape [d]",
       probe=probe_layer_norm_backward, inputs=layer_norm_inputs((6,)), expect=_expect_layer_norm, hidden=True)
@check("matches_reference", 2, "4-D inputs with random gamma match the reference gradients",
       probe=probe_layer_norm_backward, inputs=layer_norm_inputs((2, 2, 3, 7)), expect=_expect_layer_norm,
       hidden=True)
def judge_layer_norm_reference(out, inputs, expected):
    g, x, gamma = inputs["grad_out"], inputs["x"], inputs["gamma"]
    return judge_grads(out, LN_NAMES, "layer_norm_backward", expected, layer_norm_shapes(x),
                        layer_norm_mistakes(g, x, gamma), LN_MISTAKES, hidden=True)
