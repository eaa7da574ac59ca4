"""The Value's primitive operations: a + b, a * b, a ** k, exp, log and relu.

One probe serves every operation: it builds Values, applies the op, runs the (certified)
backward and returns the value and the input gradients. The judges compare them with the
hand-computed truth and name the classic mistake a wrong gradient reproduces; on the
public checks' inputs both are data the kit computed (grader/checks/facts.py).
"""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.confusions import confusion
from grader.checks.ch00_micro.common import NEAR, all_close, close_enough, kind_of, off_by, task_of
from grader.checks.facts import known_facts

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
        try:
            y = _apply_op(case["op"], xs, case.get("k"))
        except (ArithmeticError, TypeError, ValueError) as error:
            # kept per case, so that an earlier case's wrong number can still be named
            out.append({"raised": type(error).__name__})
            continue
        if not isinstance(y, Value):
            out.append({"type": kind_of(y)})
            continue
        if any(isinstance(local, str) for local in getattr(y, "_local_grads", ())):
            out.append({"label": True})  # micrograd's Value takes an operation label where this one's derivatives go
            continue
        y.backward()
        out.append({"data": y.data, "grads": [x.grad for x in xs]})
    return out


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


def judge_ops(out, cases, reveal: bool, facts) -> "str | None":
    """facts: per case, the value and gradients ("value", "grads") and the classic mistakes'
    gradients ("mistakes", [(what to tell the student, gradients)])."""
    if not isinstance(out, list) or len(out) != len(cases):
        return "the probe did not get one result per case"
    for case, got, said in zip(cases, out, facts):
        op, x, k = case["op"], case["x"], case.get("k")
        expr = _EXPRESSIONS[op].replace("k", repr(k)) if op == "pow" else _EXPRESSIONS[op]
        where = (" with " + ", ".join(f"{n} = {v!r}" for n, v in zip(_names(op), x))) if reveal else ""
        if "type" in got:
            return f"{expr} returned something else; it should return a new Value"
        if "raised" in got:
            return f"{expr}{where} raised {got['raised']}; it should return a new Value"
        if "label" in got:
            return (f"{expr} gives the new Value text where its local derivatives go, as micrograd's Value takes "
                    f"an operation label there: the third argument is one number per child, ∂(result)/∂(child)")
        value, grads = said["value"], said["grads"]
        if op == "relu" and x[0] < 0 and close_enough(got["data"], x[0]):
            return f"relu of a negative input{where} gave the input back: relu(x) = max(0, x)"
        if not close_enough(got["data"], value, 1e-12):
            if reveal and (slip := _value_confusion(op, x, k, got["data"])):
                return f"{expr}{where}: {slip}"
            if reveal:
                return f"{expr}{where} gave {got['data']!r}, expected {value!r}"
            return f"the value of {expr} is off by {abs(got['data'] - value):.3g} for some inputs"
        if not all_close(got["grads"], grads, 1e-12):
            for text, wrong in said["mistakes"]:
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
    return judge_ops(out, inputs["cases"], True, known_facts(inputs))
