"""The hidden checks of grader/checks/ch06_backward/gelu_backward/__init__.py."""

from __future__ import annotations

from grader.checks._api import check, exact_gelu
from grader.checks.ch06_backward.common import judge_grads, random_tensor
from grader.checks.ch06_backward.gelu_backward import GELU_BACKWARD_MISTAKES, probe_gelu_backward
from grader.checks.ch06_backward.hidden.oracles import differences_facts, gelu_mistakes, grads_facts
from grader.checks.facts import facts_for


@facts_for("ch06.gelu_backward.matches_autograd", "ch06.gelu_backward.key_values")
def autograd_facts(ref, inputs):
    g, x = inputs["grad_out"], inputs["x"]
    return grads_facts(exact_gelu, g, [x], lambda right: {"dx": gelu_mistakes(g, x)})


@facts_for("ch06.gelu_backward.finite_differences")
def finite_difference_facts(ref, inputs):
    return differences_facts(exact_gelu, inputs["grad_out"], [inputs["x"]], inputs["_directions"])


def _expect_gelu(ref, inputs):
    return ref.backward.gelu_backward(inputs["grad_out"], inputs["x"])


@check("matches_reference", 2, "random tensors of another shape match the reference gradient",
       probe=probe_gelu_backward,
       inputs=lambda g: {"grad_out": random_tensor(g, 2, 3, 4, 5), "x": random_tensor(g, 2, 3, 4, 5, scale=2.5)},
       expect=_expect_gelu, hidden=True)
def judge_gelu_reference(out, inputs, expected):
    g, x = inputs["grad_out"], inputs["x"]
    return judge_grads(out, ("dx",), "gelu_backward", [expected], {}, {"dx": gelu_mistakes(g, x)},
                       GELU_BACKWARD_MISTAKES, hidden=True)
