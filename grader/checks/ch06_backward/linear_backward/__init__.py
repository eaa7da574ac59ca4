"""The linear layer's backward: linear_backward(grad_out, x, weight) gives (dx, dweight,
dbias) for y = x Wᵀ + b with nn.Linear's [out, in] weight and x [..., in].

Judged against autograd on the same forward and by finite differences; the mistakes
tables name Wᵀ for W, a transposed dweight, and dweight or dbias averaged over the
positions or not summed over the batch. On the public checks' fixed inputs autograd's
gradients, the mistakes' and the differences are data the kit computed
(grader/checks/facts.py; hidden.py).
"""

from __future__ import annotations

from grader.checks._api import Task, check
from grader.checks.ch06_backward.common import (
    ANY_LEADING,
    BY_HAND, NO_AUTOGRAD, judge_finite_differences, judge_grads, random_tensor, reduced_shapes, shipped,
)
from grader.checks.facts import known_facts

TASKS = [
    Task("linear_backward", "backward", "linear_backward", "the linear layer's backward",
         forbidden=NO_AUTOGRAD, promises=ANY_LEADING, forbidden_methods=("backward",), **BY_HAND),
]


def probe_linear_backward(ns, grad_out, x, weight):
    out = ns.backward.linear_backward(grad_out.clone(), x.clone(), weight.clone())
    return shipped(out)


LINEAR_NAMES = ("dx", "dweight", "dbias")

# Each mistake by gradient and name; what it gives is computed under the same names (hidden.py).
MISTAKES = {
    "dx": {"weight_transposed": "dx uses Wᵀ: with nn.Linear's [out, in] weight, y = x Wᵀ + b gives dx = grad_out @ W"},
    "dweight": {"transposed": "dweight is transposed: nn.Linear stores weight as [out, in], so dweight = grad_outᵀ · x",
                "averaged": "dweight averages over the positions; it must sum them"},
    "dbias": {"averaged": "dbias averages over the positions; it must sum them"},
}


def linear_shapes(grad_out, x, weight):
    out_features, in_features = weight.shape
    dweight = [((in_features, out_features), "dweight is transposed: nn.Linear stores weight as [out, in], so "
                                             "dweight = grad_outᵀ · x has shape [out, in]")]
    if x.dim() > 2:
        dweight += [(tuple(x.shape[:-2]) + (out_features, in_features),
                     "dweight is not summed over the batch: every position uses the same W, so add up its "
                     "contributions from all of them"),
                    (tuple(x.shape[:-2]) + (in_features, out_features),
                     "dweight is transposed and not summed over the batch")]
    return {"dx": [(tuple(x.shape[:-1]) + (out_features,),
                    "dx has grad_out's shape; dx = grad_out @ W has x's shape [..., in]")],
            "dweight": dweight,
            "dbias": reduced_shapes(grad_out.shape, "dbias")}


def linear_inputs(x_shape, out_features):
    def make(g):
        in_features = x_shape[-1]
        x, w, b = random_tensor(g, *x_shape), random_tensor(g, out_features, in_features), random_tensor(g, out_features)
        out_shape = tuple(x_shape[:-1]) + (out_features,)
        return {"grad_out": random_tensor(g, *out_shape), "x": x, "weight": w, "_bias": b,
                "_directions": [random_tensor(g, *x_shape), random_tensor(g, out_features, in_features), random_tensor(g, out_features)]}
    return make


# --------------------------------------------------------------------- checks


@check("matches_autograd", 3,
       "x [2, 3, 4], W [6, 4]: dx, dW, db equal autograd's gradients of x Wᵀ + b, to float64's precision",
       probe=probe_linear_backward, inputs=linear_inputs((2, 3, 4), 6), fixed_inputs=True)
def matches_autograd(out, inputs, expected):
    facts = known_facts(inputs)
    return judge_grads(out, LINEAR_NAMES, "linear_backward", facts["right"],
                        linear_shapes(inputs["grad_out"], inputs["x"], inputs["weight"]), facts["mistakes"],
                        MISTAKES, precision=True)


@check("finite_differences", 1,
       "x [5, 3], W [2, 3]: each gradient agrees with central finite differences of x Wᵀ + b (gradcheck's test)",
       probe=probe_linear_backward, inputs=linear_inputs((5, 3), 2), fixed_inputs=True)
def finite_differences(out, inputs, expected):
    tensors = [inputs["x"], inputs["weight"], inputs["_bias"]]
    return judge_finite_differences(out, LINEAR_NAMES, "linear_backward", tensors, inputs["_directions"],
                                     known_facts(inputs)["numeric"])
