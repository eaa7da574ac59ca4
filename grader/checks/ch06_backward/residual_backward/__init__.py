"""The residual feed-forward half-block's backward: residual_feedforward_backward(grad_out,
x, gamma, beta, w1, b1, w2, b2) gives the seven gradients of x + fc2(gelu(fc1(LN(x)))).

Judged against autograd on the same forward, with fc2's weight zero (the skip path
alone must carry grad_out through unchanged), and by finite differences; the mistakes
tables name a missing, lone or doubled skip gradient, transposed weight gradients and
per-feature gradients summed over the wrong axes. On the public checks' fixed inputs
autograd's gradients, the mistakes' and the differences are data the kit computed
(grader/checks/facts.py; hidden.py).
"""

from __future__ import annotations

import torch

from grader.checks._api import (
    Float32Verdict, Task, check, float32_close, matches, matches_to_float32, shape_problem,
)
from grader.checks.ch06_backward.common import (
    ANY_LEADING,
    ATOL, BY_HAND, NO_AUTOGRAD, RTOL, judge_finite_differences, judge_grads, random_tensor, reduced_shapes,
    returned_of, shipped,
)
from grader.checks.facts import known_facts

TASKS = [
    Task("residual_backward", "backward", "residual_feedforward_backward",
         "the backward of the residual feed-forward half-block",
         forbidden=NO_AUTOGRAD, promises=ANY_LEADING, forbidden_methods=("backward",), **BY_HAND),
]

RESIDUAL_NAMES = ("dx", "dgamma", "dbeta", "dw1", "db1", "dw2", "db2")
RESIDUAL_ARGS = ("x", "gamma", "beta", "w1", "b1", "w2", "b2")

# The mistakes on the skip path, each by name; what it gives dx is computed under the same name
# (hidden.py).
MISTAKES_SKIP = {
    "skip_missing": "the residual (skip) gradient is missing: y = x + F(x), so dx = grad_out + the branch's dx",
    "skip_only": "dx is only the skip path: the branch's gradient (through LayerNorm, fc1, GELU, fc2) must be added "
                 "to grad_out",
    "skip_twice": "the skip gradient is added twice: dx = grad_out + the branch's dx, once",
}

# Each slip in the chain rule (a tensor taken from the wrong place), by name: what the first
# gradient it changes equals, in words. dpre = dact·GELU′(U) is the gradient reaching fc1's
# output U = LN(x)·W1ᵀ + b1; dact = grad_out·W2 the one reaching GELU's output. The kit
# computes what each slip gives every gradient it changes, under its name (hidden.py).
RESIDUAL_SLIPS = {
    "dw1_from_x": "dw1 equals dpreᵀ · x: it pairs fc1's upstream gradient with the block input x, not with LN(x), "
                  "the tensor fc1 read: dw1 = dpreᵀ · LN(x)",
    "dw1_before_gelu": "fc1's gradients were computed from dact, the gradient at GELU's output, before the "
                       "multiplication by GELU′(U) (dw1 equals dactᵀ · LN(x)): dw1 = dpreᵀ · LN(x) and db1 = Σ dpre, "
                       "with dpre = dact·GELU′(U)",
    "dw2_from_pre": "dw2 equals grad_outᵀ · U: it pairs grad_out with fc1's output U (before GELU), not with "
                    "GELU(U), the tensor fc2 read: dw2 = grad_outᵀ · GELU(U)",
    "dw2_from_normed": "dw2 equals grad_outᵀ · LN(x): it pairs grad_out with the normalised input, not with "
                       "GELU(U), the tensor fc2 read",
    "gelu_at_output": "GELU′ was evaluated at GELU(U), the activation's output: the derivative belongs at its "
                      "input, U = LN(x)·W1ᵀ + b1 (dpre = dact·GELU′(U))",
    "gelu_at_no_bias": "GELU′ was evaluated at LN(x)·W1ᵀ without b1: GELU's input is U = LN(x)·W1ᵀ + b1",
    "no_gelu_slope": "the backward passes through GELU as if it were the identity: dpre = dact·GELU′(U), "
                     "not dact",
    "layer_norm_at_output": "LayerNorm's backward was evaluated at LN(x), its output: it belongs at its input x",
}

# What a gradient's judge says for each mistake by name: a slip named on a gradient its words
# do not begin with is said to make that gradient wrong too.
MISTAKES = {
    name: {**(MISTAKES_SKIP if name == "dx" else {}),
           **{slip: why if why.startswith(f"{name} ") else f"{name} is wrong: {why}"
              for slip, why in RESIDUAL_SLIPS.items()}}
    for name in RESIDUAL_NAMES
}


def probe_residual_backward(ns, grad_out, x, gamma, beta, w1, b1, w2, b2):
    out = ns.backward.residual_feedforward_backward(grad_out.clone(), x.clone(), gamma.clone(), beta.clone(),
                                                    w1.clone(), b1.clone(), w2.clone(), b2.clone())
    return shipped(out)


def residual_shapes(inputs):
    x, w1, w2 = inputs["x"], inputs["w1"], inputs["w2"]
    transposed = "it is transposed: keep nn.Linear's [out, in] layout"
    return {"dgamma": reduced_shapes(x.shape, "dgamma"), "dbeta": reduced_shapes(x.shape, "dbeta"),
            "dw1": [(tuple(w1.shape[::-1]), transposed)], "dw2": [(tuple(w2.shape[::-1]), transposed)],
            "db1": reduced_shapes(tuple(x.shape[:-1]) + (w1.shape[0],), "db1"),
            "db2": reduced_shapes(x.shape, "db2")}


def residual_inputs(x_shape, f, dead=False):
    def make(g):
        d = x_shape[-1]
        tensors = {"x": random_tensor(g, *x_shape, scale=1.5, shift=0.5), "gamma": random_tensor(g, d, scale=0.5, shift=1.0),
                   "beta": random_tensor(g, d, scale=0.5), "w1": random_tensor(g, f, d, scale=0.7), "b1": random_tensor(g, f, scale=0.5),
                   "w2": random_tensor(g, d, f, scale=0.7), "b2": random_tensor(g, d, scale=0.5)}
        if dead:
            tensors["w2"] = torch.zeros(d, f, dtype=torch.float64)
        directions = [random_tensor(g, *tensors[name].shape) for name in RESIDUAL_ARGS]
        return {"grad_out": random_tensor(g, *x_shape), **tensors, "_directions": directions}
    return make


# --------------------------------------------------------------------- checks


@check("matches_autograd", 3,
       "x [2, 3, 4], f = 8: all seven gradients of x + fc2(gelu(fc1(LN(x)))) equal autograd's, to float64's "
       "precision",
       probe=probe_residual_backward, inputs=residual_inputs((2, 3, 4), 8), fixed_inputs=True)
def matches_autograd(out, inputs, expected):
    facts = known_facts(inputs)
    problem = judge_grads(out, RESIDUAL_NAMES, "residual_feedforward_backward", facts["right"],
                          residual_shapes(inputs), facts["mistakes"], MISTAKES, precision=True)
    said = {MISTAKES[name][mistake] for name, outputs in facts["mistakes"].items() for mistake in outputs}
    if problem is None or problem in said or isinstance(problem, Float32Verdict):
        return problem
    where = wrong_stage(out, facts["right"])
    return f"{problem}. {where}" if where else problem


# The backward runs through the half-block from its end: fc2 first, then GELU and fc1, then
# LayerNorm, then the skip. The gradients a stage gives, in that order.
STAGES = (("fc2", ("dw2", "db2")), ("fc1", ("dw1", "db1")), ("LayerNorm", ("dgamma", "dbeta")),
          ("the skip", ("dx",)))
BETWEEN = {
    "fc2": "at fc2 itself: dw2 = grad_outᵀ · GELU(U), db2 = Σ grad_out",
    "fc1": "between fc2 and fc1: in dact = grad_out · W2, in GELU's derivative (dpre = dact·GELU′(U), at "
           "U = LN(x)·W1ᵀ + b1) or in fc1's own gradients (dw1 = dpreᵀ · LN(x), db1 = Σ dpre)",
    "LayerNorm": "between fc1 and LayerNorm: in dnormed = dpre · W1 or in LayerNorm's own backward (at x)",
    "the skip": "at the very end: dx = grad_out + the branch's dx",
}


def wrong_stage(out, right) -> "str | None":
    """Where the backward first goes wrong, from which gradients are right: every stage
    before the first wrong one computed from the right upstream gradient."""
    if returned_of(out, RESIDUAL_NAMES, "residual_feedforward_backward"):
        return None
    got = dict(zip(RESIDUAL_NAMES, out["grads"]))
    want = dict(zip(RESIDUAL_NAMES, right))
    if any(tuple(got[name].shape) != tuple(want[name].shape) for name in RESIDUAL_NAMES):
        return None
    ok = {name: matches_to_float32(got[name], want[name], atol=ATOL, rtol=RTOL) for name in RESIDUAL_NAMES}
    for stage, names in STAGES:
        if not all(ok[name] for name in names):
            good = [name for name in RESIDUAL_NAMES if ok[name]]
            bad = [name for name in RESIDUAL_NAMES if not ok[name]]
            if not good:
                return None
            return (f"{', '.join(good)} {'is' if len(good) == 1 else 'are'} right and {', '.join(bad)} "
                    f"{'is' if len(bad) == 1 else 'are'} wrong: the backward first goes wrong {BETWEEN[stage]}")
    return None


@check("dead_branch", 1, "with fc2's weight zero, dx equals grad_out exactly: the skip path passes it unchanged",
       probe=probe_residual_backward, inputs=residual_inputs((2, 3, 4), 8, dead=True))
def dead_branch(out, inputs, expected):
    if problem := returned_of(out, RESIDUAL_NAMES, "residual_feedforward_backward"):
        return problem
    g = inputs["grad_out"]
    dx = out["grads"][0]
    if problem := shape_problem(dx, g.shape, "dx"):
        return problem
    if matches(dx, g, atol=1e-12, rtol=0) or float32_close(dx, g):
        return None  # float32 arithmetic: matches_autograd, the precision check, names it
    if matches(dx, torch.zeros_like(g), atol=1e-12, rtol=0):
        return ("with fc2's weight zero the branch passes no gradient, yet dx is 0: the residual (skip) gradient "
                "is missing: dx = grad_out + the branch's dx")
    if matches(dx, 2 * g, atol=1e-12, rtol=0):
        return "with fc2's weight zero dx is 2·grad_out: the skip gradient is added twice"
    return ("with fc2's weight zero the branch passes no gradient, so dx must equal grad_out exactly "
            "(the skip path carries it unchanged); yours differs")


@check("finite_differences", 1,
       "x [1, 3, 4], f = 6: each gradient agrees with central finite differences of the half-block (gradcheck's "
       "test)",
       probe=probe_residual_backward, inputs=residual_inputs((1, 3, 4), 6), fixed_inputs=True)
def finite_differences(out, inputs, expected):
    tensors = [inputs[name] for name in RESIDUAL_ARGS]
    return judge_finite_differences(out, RESIDUAL_NAMES, "residual_feedforward_backward", tensors,
                                     inputs["_directions"], known_facts(inputs)["numeric"])
