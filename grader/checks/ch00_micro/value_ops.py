"""The Value's primitive operations: a + b, a * b, a ** k, exp, log and relu.

One probe serves every operation: it builds Values, applies the op, runs the (certified)
backward and returns the value and the input gradients. The judges compare them with the
hand-computed truth and name the classic mistake a wrong gradient reproduces.
"""

from __future__ import annotations

import math

from grader.checks._api import check
from grader.checks.confusions import confusion
from grader.checks.ch00_micro.common import NEAR, all_close, close_enough, kind_of, off_by, task_of

TASKS = [
    task_of("micro_value_add", "Value.__add__", "Value: a + b"),
    task_of("micro_value_mul", "Value.__mul__", "Value: a * b"),
    task_of("micro_value_pow", "Value.__pow__", "Value: a ** k"),
    task_of("micro_value_exp", "Value.exp", "Value: exp"),
    task_of("micro_value_log", "Value.log", "Value: log"),
    task_of("micro_value_relu", "Value.relu", "Value: relu"),
]


_EXPRESSIONS = {
    "add": "a + b", "add_const": "a + 2.5", "radd": "2.5 + a", "add_self": "a + a",
    "mul": "a * b", "mul_const": "a * -3.0", "rmul": "-3.0 * a", "square": "a * a",
    "pow": "a ** k", "exp": "a.exp()", "log": "a.log()", "relu": "a.relu()",
}


def _apply_op(op, xs, k):
    a = xs[0]
    return {
        "add": lambda: a + xs[1], "add_const": lambda: a + 2.5, "radd": lambda: 2.5 + a, "add_self": lambda: a + a,
        "mul": lambda: a * xs[1], "mul_const": lambda: a * -3.0, "rmul": lambda: -3.0 * a, "square": lambda: a * a,
        "pow": lambda: a**k, "exp": lambda: a.exp(), "log": lambda: a.log(), "relu": lambda: a.relu(),
    }[op]()


def probe_value_ops(ns, cases):
    Value = ns.micro.Value
    out = []
    for case in cases:
        xs = [Value(x) for x in case["x"]]
        y = _apply_op(case["op"], xs, case.get("k"))
        if not isinstance(y, Value):
            out.append({"type": kind_of(y)})
            continue
        y.backward()
        out.append({"data": y.data, "grads": [x.grad for x in xs]})
    return out


def _op_truth(op, x, k):
    """(value, gradients) of the operation, by hand."""
    a = x[0]
    b = x[1] if len(x) > 1 else None
    return {
        "add": lambda: (a + b, [1.0, 1.0]), "add_const": lambda: (a + 2.5, [1.0]),
        "radd": lambda: (a + 2.5, [1.0]), "add_self": lambda: (2 * a, [2.0]),
        "mul": lambda: (a * b, [b, a]), "mul_const": lambda: (-3.0 * a, [-3.0]),
        "rmul": lambda: (-3.0 * a, [-3.0]), "square": lambda: (a * a, [2 * a]),
        "pow": lambda: (a**k, [k * a ** (k - 1)]), "exp": lambda: (math.exp(a), [math.exp(a)]),
        "log": lambda: (math.log(a), [1.0 / a]),
        "relu": lambda: (a if a > 0 else 0.0, [1.0 if a > 0 else 0.0]),
    }[op]()


def _op_mistakes(op, x, k):
    """The gradients the classic mistakes give, with what to tell the student."""
    a = x[0]
    b = x[1] if len(x) > 1 else None
    one_input = ("only one input of a + b gets a gradient: list both self and other as children, "
                 "with local gradients (1, 1)")
    one_factor = ("only one factor gets a gradient: the term for the other factor is missing "
                  "(children (self, other), local gradients (other.data, self.data))")
    power = "the power rule: the local gradient of x ** k is k * x ** (k - 1)"
    if op == "add":
        return [(one_input, [1.0, 0.0]), (one_input, [0.0, 1.0]),
                ("these are the local gradients of a product (b, a); for a + b both are 1", [b, a]),
                ("no gradient reaches the inputs: the new Value needs its children (self, other) "
                 "and local gradients (1, 1)", [0.0, 0.0])]
    if op == "add_self":
        return [("a + a gives a gradient of 1, not 2: " + one_input, [1.0])]
    if op in ("add_const", "radd"):
        return [("no gradient reaches a: the new Value needs its children and local gradients (1, 1)", [0.0])]
    if op == "mul":
        return [("the local gradients are swapped: d(a*b)/da is b (the OTHER factor) and d(a*b)/db is a", [a, b]),
                (one_factor, [b, 0.0]), (one_factor, [0.0, a]),
                ("these are the local gradients of a + b (1, 1); for a * b they are (b, a)", [1.0, 1.0])]
    if op == "square":
        return [("a * a gives a gradient of a, not 2a: " + one_factor, [a]),
                ("a * a gives a gradient of a * a: the local gradients should be the factors, not the product",
                 [2 * a * a])]
    if op in ("mul_const", "rmul"):
        return [("a * c gives a the gradient a instead of c: the local gradients are swapped", [a]),
                ("no gradient reaches a: " + one_factor, [0.0])]
    if op == "pow":
        return [(f"{power}; this is k * x ** k (the exponent was not lowered by one)", [k * a**k]),
                (f"{power}; the factor k is missing", [a ** (k - 1)]),
                (f"{power}; this is x ** k * log(x), the derivative with respect to the exponent",
                 [a**k * math.log(a)] if a > 0 else [math.nan]),
                (f"{power}; this is (k - 1) * x ** (k - 2), one step too far", [(k - 1) * a ** (k - 2)])]
    if op == "exp":
        return [("the local gradient is the input x; d exp(x)/dx is exp(x), the result itself", [a]),
                ("the local gradient is 1; d exp(x)/dx is exp(x), the result itself", [1.0]),
                ("no gradient reaches x: the local gradient of exp(x) is exp(x)", [0.0])]
    if op == "log":
        return [("the local gradient is the input x; d log(x)/dx is 1/x", [a]),
                ("the local gradient is log(x) itself; d log(x)/dx is 1/x", [math.log(a)]),
                ("the local gradient is -1/x², the derivative of 1/x; d log(x)/dx is 1/x", [-1.0 / (a * a)]),
                ("the local gradient is 1/x², not 1/x", [1.0 / (a * a)]),
                ("the local gradient is 1; d log(x)/dx is 1/x", [1.0])]
    if op == "relu":
        if a > 0:
            return [("the local gradient is the input x; relu's local gradient is 1 where x > 0", [a]),
                    ("no gradient for a positive input: relu's local gradient is 1 where x > 0", [0.0])]
        if a < 0:
            return [("a negative input passes the gradient: relu's local gradient is 0 where x <= 0 "
                     "(the output does not depend on x there)", [1.0]),
                    ("a negative input passes the gradient: relu's local gradient is 0 where x <= 0", [a])]
        return [("at exactly x = 0 the local gradient is taken to be 0 (use x > 0, not x >= 0)", [1.0])]
    return []


def _value_confusion(op, x, k, got) -> "str | None":
    """What a wrong value equals among the operation's usual confusions (grader.checks.confusions)."""
    a = x[0]
    plain = {"add": ("add", (a, x[-1])), "add_const": ("add", (a, 2.5)), "radd": ("add", (a, 2.5)),
             "add_self": ("add", (a, a)), "mul": ("mul", (a, x[-1])), "mul_const": ("mul", (a, -3.0)),
             "rmul": ("mul", (a, -3.0)), "square": ("mul", (a, a)), "pow": ("pow", (a, k)),
             "exp": ("exp", (a,)), "log": ("log", (a,)), "relu": ("relu", (a,))}.get(op)
    return confusion(*plain, got) if plain else None


def _names(op):
    return ["a", "b"] if op in ("add", "mul") else ["a"]


def judge_ops(out, cases, reveal: bool) -> "str | None":
    if not isinstance(out, list) or len(out) != len(cases):
        return "the probe did not get one result per case"
    for case, got in zip(cases, out):
        op, x, k = case["op"], case["x"], case.get("k")
        expr = _EXPRESSIONS[op].replace("k", repr(k)) if op == "pow" else _EXPRESSIONS[op]
        where = (" with " + ", ".join(f"{n} = {v!r}" for n, v in zip(_names(op), x))) if reveal else ""
        if "type" in got:
            return f"{expr} returned something else; it should return a new Value"
        value, grads = _op_truth(op, x, k)
        if op == "relu" and x[0] < 0 and close_enough(got["data"], x[0]):
            return f"relu of a negative input{where} gave the input back: relu(x) = max(0, x)"
        if not close_enough(got["data"], value, 1e-12):
            if reveal and (slip := _value_confusion(op, x, k, got["data"])):
                return f"{expr}{where}: {slip}"
            if reveal:
                return f"{expr}{where} gave {got['data']!r}, expected {value!r}"
            return f"the value of {expr} is off by {abs(got['data'] - value):.3g} for some inputs"
        if not all_close(got["grads"], grads, 1e-12):
            for text, wrong in _op_mistakes(op, x, k):
                if all_close(got["grads"], wrong, NEAR):
                    return f"{expr}{where}: {text}"
            if reveal:
                return (f"after ({expr}).backward(){where}, the input gradient(s) are {got['grads']!r}; "
                        f"expected {grads!r}")
            return (f"after ({expr}).backward() the input gradient is off by "
                    f"{off_by(got['grads'], grads):.3g} for some inputs")
    return None


def value_cases(op, *xs, k=None):
    return [{"op": op, "x": list(x), **({"k": k} if k is not None else {})} for x in xs]


# Stacked: the decorator nearest the judge is declared first, so these read bottom up,
# in the lesson's order (relu's value_and_gradient before its at_zero).
@check("at_zero", 1, "relu(0) = 0 with gradient 0 (the convention of the docstring)",
       task="micro_value_relu", probe=probe_value_ops, inputs=lambda g: {"cases": value_cases("relu", (0.0,))})
@check("value_and_gradient", 2, "relu at 1.3 and -0.8: (1.3, gradient 1) and (0, gradient 0)",
       task="micro_value_relu", probe=probe_value_ops,
       inputs=lambda g: {"cases": value_cases("relu", (1.3,), (-0.8,), (2.5,), (-3.0,))})
@check("value_and_gradient", 2, "log(x) at 2.5, 0.3, 1.0: value log x, gradient 1/x",
       task="micro_value_log", probe=probe_value_ops,
       inputs=lambda g: {"cases": value_cases("log", (2.5,), (0.3,), (1.0,))})
@check("value_and_gradient", 2, "exp(x) at 0.7, -1.3, 2.0: value and gradient both exp(x)",
       task="micro_value_exp", probe=probe_value_ops,
       inputs=lambda g: {"cases": value_cases("exp", (0.7,), (-1.3,), (2.0,))})
@check("power_rule", 2, "x ** k for k = 3, 2.5, -1, -0.5, 0.5: value x^k, gradient k * x^(k-1)",
       task="micro_value_pow", probe=probe_value_ops,
       inputs=lambda g: {"cases": [c for k in (3, 2.5, -1, -0.5, 0.5) for c in value_cases("pow", (1.7,), k=k)]})
@check("value_and_gradients", 2,
       "a * b gives a the gradient b and b the gradient a; a * a gives 2a; constants work on both sides",
       task="micro_value_mul", probe=probe_value_ops,
       inputs=lambda g: {"cases": value_cases("mul", (1.5, -2.25)) + value_cases("square", (1.25,))
                         + value_cases("mul_const", (0.5,)) + value_cases("rmul", (0.5,))})
@check("value_and_gradients", 2, "a + b, a + 2.5, 2.5 + a and a + a: right values, local gradients 1 (a + a gives 2)",
       task="micro_value_add", probe=probe_value_ops,
       inputs=lambda g: {"cases": value_cases("add", (1.5, -2.25)) + value_cases("add_const", (1.5,))
                         + value_cases("radd", (-0.75,)) + value_cases("add_self", (1.5,))})
def judge_ops_public(out, inputs, expected):
    return judge_ops(out, inputs["cases"], reveal=True)
