"""Which elementary operation a wrong number came from: the usual confusions.

When a value check's number is wrong and no known mistake of the task reproduces it,
these helpers try the operations a hand slips into (log in base 10 or 2 for the natural
log, exp(x) - 1, leaky ReLU, 2**x for x**2, x**1/2 read as (x**1)/2, the square of the mean
for the mean of squares, ...) and say which one the number equals:

    confusion("log", (2.0,), 0.30103)
    -> "log(2) gave 0.30103 = log₁₀ 2 (the logarithm in base 10); the natural log is 0.693147"

They run in the grader (judges only) and quote numbers only.
"""

from __future__ import annotations

import math

from typing import Callable

from grader.checks._slots import constant


def _safe(function: Callable[[], float]) -> "float | None":
    try:
        value = function()
    except (ArithmeticError, ValueError, TypeError):
        return None
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else None


def _candidates(op: str, args: tuple) -> list[tuple[str, Callable[[], float]]]:
    """(what the slip computes, how) for op applied to args; the right formula is not among them."""
    x = args[0]
    if op == "log":
        return [("log₁₀ {x} (the logarithm in base 10)", lambda: math.log10(x)),
                ("log₂ {x} (the logarithm in base 2)", lambda: math.log2(x)),
                ("log(1 + {x}) (log1p)", lambda: math.log1p(x)),
                ("log({x}) - 1", lambda: math.log(x) - 1), ("1/{x} (the derivative, not the value)", lambda: 1 / x),
                ("exp({x}) (exp, not log)", lambda: math.exp(x)), ("√{x}", lambda: math.sqrt(x))]
    if op == "exp":
        return [("exp({x}) - 1 (expm1)", lambda: math.expm1(x)), ("2 ** {x}", lambda: 2.0**x),
                ("10 ** {x}", lambda: 10.0**x), ("e · {x}", lambda: math.e * x), ("{x} ** e", lambda: x**math.e),
                ("1 + {x} (the first two terms of the series)", lambda: 1 + x),
                ("log({x}) (log, not exp)", lambda: math.log(x))]
    if op == "relu":
        return [("0.01 · {x} (leaky ReLU)", lambda: 0.01 * x if x < 0 else None),
                ("0.1 · {x} (a leaky ReLU)", lambda: 0.1 * x if x < 0 else None),
                ("|{x}| (the absolute value)", lambda: abs(x)), ("min(0, {x})", lambda: min(0.0, x)),
                ("{x} itself (nothing clipped)", lambda: x), ("1 (the gradient, not the value)",
                                                             lambda: 1.0 if x > 0 else None)]
    if op == "pow":
        k = args[1]
        return [("{k} ** {x} (base and exponent swapped)", lambda: k**x),
                ("{x} ** {k} read as ({x} ** 1) / {d} (a precedence slip: x**1/2 is x/2)",
                 lambda: x / round(1 / k) if k and abs(1 / k - round(1 / k)) < 1e-12 and round(1 / k) > 1 else None),
                ("{k} · {x} (multiplied, not raised)", lambda: k * x),
                ("-({x} ** {k}) (the minus sign outside the power)", lambda: -(abs(x) ** k) if x < 0 else None),
                ("{x} ** ({k} - 1) (the exponent lowered, as in a derivative)", lambda: x ** (k - 1)),
                ("{k} · {x} ** ({k} - 1) (the derivative, not the value)", lambda: k * x ** (k - 1)),
                ("{x} ** {k} via exp({k} · log|{x}|), which loses the sign", lambda: abs(x) ** k if x < 0 else None)]
    if op == "sqrt":
        return [("{x} ** 2 (square, not square root)", lambda: x * x), ("{x} / 2", lambda: x / 2)]
    if op == "mul":
        y = args[1]
        return [("{x} + {y} (added, not multiplied)", lambda: x + y), ("{x} ** {y}", lambda: x**y),
                ("{x} · {x} (self times self)", lambda: x * x), ("{y} · {y} (other times other)", lambda: y * y)]
    if op == "add":
        y = args[1]
        return [("{x} · {y} (multiplied, not added)", lambda: x * y), ("{x} - {y}", lambda: x - y),
                ("{x} + {x} (self twice)", lambda: x + x), ("{y} + {y} (other twice)", lambda: y + y),
                ("{x} alone (the other operand dropped)", lambda: x), ("{y} alone", lambda: y)]
    return []


def _number(value: float) -> str:
    return f"{value:.6g}"


def confusion(op: str, args: tuple, got, tol: float = 1e-9) -> "str | None":
    """The sentence for a wrong scalar: what `got` equals among op's usual confusions,
    and what the right value is; None when it is none of them."""
    if not isinstance(got, (int, float)) or isinstance(got, bool) or not math.isfinite(got):
        return None
    names = {"x": _number(args[0])}
    if len(args) > 1:
        names.update(y=_number(args[1]), k=_number(args[1]))
        if args[1]:
            names["d"] = _number(round(1 / args[1])) if abs(1 / args[1]) < 1e6 else "?"
    for label, function in _candidates(op, tuple(args)):
        value = _safe(function)
        if value is not None and abs(value - got) <= tol * max(1.0, abs(value)):
            right = _safe(lambda: RIGHT[op](*args))
            where = f"{op}({', '.join(_number(a) for a in args)})"
            shown = f"; the right value is {_number(right)}" if right is not None else ""
            if op == "log" and right is not None:
                shown = f"; the natural log is {_number(right)}"
            return f"{where} gave {_number(got)} = {label.format(**names)}{shown}"
    return None


RIGHT: dict[str, Callable[..., float]] = {
    "log": math.log, "exp": math.exp, "relu": lambda x: max(0.0, x), "pow": lambda x, k: x**k,
    "sqrt": math.sqrt, "mul": lambda x, y: x * y, "add": lambda x, y: x + y,
}


# ------------------------------------------------------- formulas of several parts
# A judge that knows, as data the kit computed, what a formula gives with other choices
# for its parts (chapter 00's RMSNorm and softmax: hidden/oracles.py) names the parts a
# wrong output was built with, in these words; two slips at once get both. Nothing here
# computes the formula.

FORMULA_PARTS: dict[str, dict[str, dict]] = {
    "rmsnorm": {
        "centred": {True: "the mean is subtracted first, which makes it LayerNorm; RMSNorm does not centre x"},
        "stat": {
            "mean": "the scale uses the mean of x, not the mean of squares mean(x²)",
            "mean_abs": "the scale uses the mean of |x|, not the mean of squares mean(x²)",
            "sum_square": "the scale uses the sum of squares; RMSNorm takes their mean (sum / n)",
            "sample_mean_square": "the squares are divided by n - 1; their mean divides by n",
            "square_of_mean": "the scale uses the square of the mean, mean(x)², not the mean of squares mean(x²)",
        },
        "root": {
            "none": "the square root is missing: x is divided by mean(x²) + eps itself, not by its square root",
            "times": "x is multiplied by sqrt(mean(x²) + eps) instead of divided by it",
        },
        "eps": {
            "outside": "eps is added outside the square root; it belongs inside: sqrt(mean(x²) + 1e-5)",
            "none": "eps is missing: it goes inside the square root, sqrt(mean(x²) + 1e-5)",
            "1e-6": "eps should be 1e-5 (this is 1e-6)",
            "1e-8": "eps should be 1e-5 (this is 1e-8)",
        },
    },
    "softmax": {
        "base": {"2": "the powers are 2 ** l, not exp(l) = e ** l", "10": "the powers are 10 ** l, not exp(l) = e ** l"},
        "sign": {"negated": "the logits are negated, exp(max - l) instead of exp(l - max): the largest logit gets "
                            "the smallest probability"},
        "total": {"none": "the exps are not divided by their total",
                  "log": "this is log-softmax, l - max - log(sum of exps); softmax is its exponential"},
    },
}


def formula_confusion(formula: str, parts: dict) -> "str | None":
    """The sentence for an output a formula gives with other choices `parts` ({part:
    choice}, only the parts that differ from the lesson's); None for a choice without words."""
    words = FORMULA_PARTS.get(formula, {})
    said = [words.get(part, {}).get(choice) for part, choice in parts.items()]
    if not said or None in said:
        return None
    said = [constant(text) for text in said]  # the words above, whole whichever input showed them
    if len(said) == 1:
        return said[0]
    return f"{constant(len(said))} parts of {formula} differ: " + "; also, ".join(said)
