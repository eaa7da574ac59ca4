"""Chapter 00: the whole GPT in miniature, on scalar Values in plain Python (micro.py).

Everything here is plain Python too: the judges recompute what a right (or a known
wrong) implementation gives with `math` on floats, and the probes hand back floats
and lists of floats (a Value's .data and .grad), never Value objects. The model-level
checks build a small MicroGPT with a fixed seed inside the probe and return its weight
tables, so a judge can run the same network as a float "twin": the right one, and the
classic mistakes (no residual, a final norm, no position row, ...) to name the one a
submission reproduces. Hidden checks build the same model with the reference.
"""

from __future__ import annotations

import math
import random
import types

import torch

from grader.checks._api import Task, check, exception_name, first_difference

CHAPTER, TITLE = "00", "The whole GPT in miniature (scalar autograd)"
EPS = 1e-5
TOL = 1e-9  # pure Python float64 on both sides: only summation order differs
NEAR = 1e-7  # reproducing a known mistake

# micro.py is plain Python. The static scan resolves every name a graded function uses
# through micro.py's imports; the same names become tripwires in the sandbox, so they
# must be importable function attributes (never a bare module, never a class that the
# sandbox itself needs). "No torch or numpy anywhere in micro.py" is a check of its own
# (ch00.micro_forward.pure_python).
NO_TORCH = ("torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.exp", "torch.log", "torch.sqrt",
            "torch.rsqrt", "torch.softmax", "torch.log_softmax", "torch.relu", "torch.matmul",
            "torch.multinomial", "torch.nn.functional.softmax", "torch.nn.functional.log_softmax",
            "torch.nn.functional.relu", "torch.nn.functional.cross_entropy", "torch.nn.functional.rms_norm",
            "torch.autograd.grad", "torch.autograd.backward")


def _task(name, qualname, title):
    return Task(name, "micro", qualname, title, forbidden=NO_TORCH)


TASKS = [
    _task("micro_value_add", "Value.__add__", "Value: a + b"),
    _task("micro_value_mul", "Value.__mul__", "Value: a * b"),
    _task("micro_value_pow", "Value.__pow__", "Value: a ** k"),
    _task("micro_value_exp", "Value.exp", "Value: exp"),
    _task("micro_value_log", "Value.log", "Value: log"),
    _task("micro_value_relu", "Value.relu", "Value: relu"),
    _task("micro_backward", "Value.backward", "backward: the chain rule over the graph"),
    _task("micro_rmsnorm", "rmsnorm", "RMSNorm without gain"),
    _task("micro_softmax", "softmax", "a stable softmax"),
    _task("micro_attention", "attention_head", "one attention head for one position"),
    _task("micro_block", "MicroGPT.block", "the pre-norm layer with its KV cache"),
    _task("micro_forward", "MicroGPT.forward", "forward: one token at one position"),
    _task("micro_loss", "document_loss", "the mean NLL of one document"),
    _task("micro_adam", "Adam.step", "Adam with bias correction and lr decay"),
    _task("micro_sample", "sample", "sampling a name"),
]

# ----------------------------------------------------------------------- helpers


def _random_seed(g: torch.Generator) -> int:
    return int(torch.randint(0, 2**31 - 1, (1,), generator=g).item())


def _uniform(g: torch.Generator, lo: float, hi: float) -> float:
    return lo + (hi - lo) * torch.rand((), generator=g, dtype=torch.float64).item()


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _close(a: float, b: float, tol: float = TOL) -> bool:
    return _is_number(a) and abs(a - b) <= tol * max(1.0, abs(b))


def _flat(value):
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _flat(item)
    else:
        yield value


def _shape(value):
    return [len(value), *(_shape(value[0]) if value and isinstance(value[0], (list, tuple)) else [])] \
        if isinstance(value, (list, tuple)) else []


def _all_close(actual, expected, tol: float = TOL) -> bool:
    """Nested lists of numbers, equal in structure and to tol (relative above 1)."""
    if isinstance(expected, (list, tuple)):
        return (isinstance(actual, (list, tuple)) and len(actual) == len(expected)
                and all(_all_close(a, e, tol) for a, e in zip(actual, expected)))
    return _close(actual, expected, tol)


def _off_by(actual, expected) -> float:
    """The largest absolute difference of two nested lists of the same structure."""
    return max((abs(a - e) for a, e in zip(_flat(actual), _flat(expected))), default=0.0)


def _values(ns, numbers):
    return [ns.micro.Value(x) for x in numbers]


def _data(values, what="the result"):
    """Floats from a list of Values; a TypeError names what was returned instead."""
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{what} should be a list of Values, got {type(values).__name__}")
    out = []
    for v in values:
        if not hasattr(v, "data"):
            raise TypeError(f"{what} should be a list of Values, found a {type(v).__name__}")
        out.append(float(v.data))
    return out


def _kind(value) -> str:
    return type(value).__name__


# ----------------------------------------------------------- Value: the primitives
# One probe for every operation: build Values, apply the op, run the (certified)
# backward, return the value and the input gradients.

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
            out.append({"type": _kind(y)})
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


def _names(op):
    return ["a", "b"] if op in ("add", "mul") else ["a"]


def _judge_ops(out, cases, reveal: bool) -> "str | None":
    if not isinstance(out, list) or len(out) != len(cases):
        return "the probe did not get one result per case"
    for case, got in zip(cases, out):
        op, x, k = case["op"], case["x"], case.get("k")
        expr = _EXPRESSIONS[op].replace("k", repr(k)) if op == "pow" else _EXPRESSIONS[op]
        where = (" with " + ", ".join(f"{n} = {v!r}" for n, v in zip(_names(op), x))) if reveal else ""
        if "type" in got:
            return f"{expr} returned something else; it should return a new Value"
        value, grads = _op_truth(op, x, k)
        if op == "relu" and x[0] < 0 and _close(got["data"], x[0]):
            return f"relu of a negative input{where} gave the input back: relu(x) = max(0, x)"
        if not _close(got["data"], value, 1e-12):
            if reveal:
                return f"{expr}{where} gave {got['data']!r}, expected {value!r}"
            return f"the value of {expr} is off by {abs(got['data'] - value):.3g} for some inputs"
        if not _all_close(got["grads"], grads, 1e-12):
            for text, wrong in _op_mistakes(op, x, k):
                if _all_close(got["grads"], wrong, NEAR):
                    return f"{expr}{where}: {text}"
            if reveal:
                return (f"after ({expr}).backward(){where}, the input gradient(s) are {got['grads']!r}; "
                        f"expected {grads!r}")
            return (f"after ({expr}).backward() the input gradient is off by "
                    f"{_off_by(got['grads'], grads):.3g} for some inputs")
    return None


def judge_ops_public(out, inputs, expected):
    return _judge_ops(out, inputs["cases"], reveal=True)


def judge_ops_hidden(out, inputs, expected):
    return _judge_ops(out, inputs["cases"], reveal=False)


def _cases(op, *xs, k=None):
    return [{"op": op, "x": list(x), **({"k": k} if k is not None else {})} for x in xs]


def _random_cases(kind):
    def make(g):
        u = lambda lo, hi: _uniform(g, lo, hi)  # noqa: E731
        if kind == "add":
            cases = _cases("add", *[(u(-4, 4), u(-4, 4)) for _ in range(3)]) + _cases("add_self", (u(-4, 4),))
        elif kind == "mul":
            cases = _cases("mul", *[(u(-4, 4), u(-4, 4)) for _ in range(3)]) + _cases("square", (u(-4, 4),))
        elif kind == "pow":
            cases = [c for k in (3, 2.5, -1, -0.5, 0.5, 1.5) for c in _cases("pow", (u(0.2, 3.0),), k=k)]
        elif kind == "exp":
            cases = _cases("exp", *[(u(-3, 3),) for _ in range(4)])
        elif kind == "log":
            cases = _cases("log", *[(u(0.05, 6.0),) for _ in range(4)])
        else:
            cases = _cases("relu", (u(-3, -0.05),), (u(0.05, 3),), (u(-3, -0.05),), (u(0.05, 3),))
        return {"cases": cases}
    return make


# ------------------------------------------------------------------- backward


def _order_graph(Value, x0):
    """w = a * b with a = b * b + 1 and b = 3x: b is reached along a short and a long
    path, so b may push its grad to x only after the longer path has reached b."""
    x = Value(x0)
    b = x * 3.0
    c = b * b
    a = c + 1.0
    return x, a * b


def probe_backward_reuse(ns):
    Value = ns.micro.Value
    x = Value(3.0)
    y = x * x + x  # dy/dx = 2x + 1 = 7
    y.backward()
    first = {"x": x.grad, "root": y.grad}
    (x * 2.0).backward()  # leaf grads accumulate across graphs: 7 + 2
    return {**first, "x_after_second": x.grad}


def judge_backward_reuse(out, inputs, expected):
    if out["root"] != 1.0:
        return (f"after y.backward() y.grad is {out['root']!r}: backward starts by setting the root's own "
                f"grad to 1 (dy/dy = 1)")
    if out["x"] == 0.0:
        return "no gradient reached x: set self.grad = 1 on the root, then push grads down to the children"
    if out["x"] != 7.0:
        if out["x"] in (3.0, 6.0, 1.0):
            return (f"x is used three times in y = x*x + x and gets the gradient {out['x']!r}, not 2x + 1 = 7: "
                    f"each contribution must be ADDED (child.grad += local * node.grad), not overwrite the last")
        return f"y = x*x + x at x = 3 should give x.grad = 2x + 1 = 7, got {out['x']!r}"
    if out["x_after_second"] != 9.0:
        return (f"a second backward (of x*2) should add 2 to x.grad (7 + 2 = 9), got {out['x_after_second']!r}: "
                f"backward must not reset the grads it did not start from; leaf grads accumulate (+=)")
    return None


def probe_backward_order(ns, x0):
    x, w = _order_graph(ns.micro.Value, x0)
    w.backward()
    Value = ns.micro.Value
    u = Value(x0)
    z = u * 2.0
    (z * z).backward()  # z reached twice: dw/du = 2z * 2 = 8u
    return {"w": w.data, "x_grad": x.grad, "shared": u.grad}


def judge_backward_order(out, inputs, expected):
    x0 = inputs["x0"]
    b = 3 * x0
    right = 3 * (3 * b * b + 1)  # w = b**3 + b
    if _close(out["shared"], 2 * 8 * x0, 1e-12):
        return ("in w = z*z with z = 2u, u gets its gradient twice: z is listed twice in the order and pushes "
                "twice; put each node in the topological order only once (a visited set)")
    if not _close(out["shared"], 8 * x0, 1e-12):
        return f"z = 2u, w = z*z should give u.grad = 8u = {8 * x0!r}, got {out['shared']!r}"
    if not _close(out["x_grad"], right, 1e-12):
        return ("in w = a*b with a = b*b + 1, b = 3x, x's gradient misses part of the longer path through a: "
                "a node may push its grad to its children only after every node that uses it has pushed to it; "
                "visit the nodes in reverse topological order")
    return None


def probe_backward_deep(ns, depth):
    Value = ns.micro.Value
    x = Value(1.0)
    y = x
    for _ in range(depth):
        y = y + x * 1.0
    try:
        y.backward()
    except RecursionError:
        return {"recursion": True}
    return {"x": x.grad}


def judge_backward_deep(out, inputs, expected):
    depth = inputs["depth"]
    if out.get("recursion"):
        return (f"backward hit Python's recursion limit on a chain {2 * depth} nodes deep: walk the graph with "
                f"an explicit stack (a list you push and pop), not recursion")
    if out["x"] != depth + 1.0:
        return f"a chain y = y + x*1.0 repeated {depth} times should give x.grad = {depth + 1}, got {out['x']!r}"
    return None


def _random_graph(Value, seed):
    """A random graph of +, *, exp, log, relu and powers over four leaves, with reuse."""
    rng = random.Random(seed)
    leaves = [Value(rng.uniform(-1.5, 1.5)) for _ in range(4)]
    nodes = list(leaves)
    for _ in range(30):
        a, b = rng.choice(nodes), rng.choice(nodes)
        kind = rng.randrange(7)
        if kind == 0:
            new = a + b
        elif kind == 1:
            new = a * b
        elif kind == 2:
            new = (a * 0.3).exp()
        elif kind == 3:
            new = (a * a + 0.5).log()
        elif kind == 4:
            new = a.relu() - b
        elif kind == 5:
            new = (a * a + 1.0) ** -0.5
        else:
            new = a * rng.uniform(-2, 2) + b * b
        nodes.append(new)
    root = nodes[-1]
    for node in nodes[-8:-1]:
        root = root + node * 0.5
    return leaves, root


def probe_backward_random(ns, seed):
    leaves, root = _random_graph(ns.micro.Value, seed)
    root.backward()
    return {"grads": [x.grad for x in leaves]}


def _expect_backward_random(ref, inputs):
    leaves, root = _random_graph(ref.micro.Value, inputs["seed"])
    root.backward()
    return [x.grad for x in leaves]


def judge_backward_random(out, inputs, expected):
    if _all_close(out["grads"], expected, 1e-10):
        return None
    return (f"the leaf gradients of a random graph (with reused nodes) are off by up to "
            f"{_off_by(out['grads'], expected):.3g}: every contribution must be added, in reverse topological order")


# -------------------------------------------------------------------- RMSNorm


def _rms(xs, eps=EPS, stat="mean_square", eps_outside=False, centred=False):
    n = len(xs)
    if centred:
        mean = sum(xs) / n
        xs = [x - mean for x in xs]
    s = {"mean_square": sum(x * x for x in xs) / n, "sum_square": sum(x * x for x in xs),
         "mean": sum(xs) / n, "mean_abs": sum(abs(x) for x in xs) / n}[stat]
    scale = 1.0 / (math.sqrt(s) + eps) if eps_outside else (s + eps) ** -0.5 if s + eps > 0 else math.nan
    return [x * scale for x in xs]


def _rms_grads(xs, w, eps=EPS):
    """d/dx_j of sum_i w_i * rmsnorm(x)_i."""
    n = len(xs)
    m = sum(x * x for x in xs) / n + eps
    s = m**-0.5
    wx = sum(a * b for a, b in zip(w, xs))
    return [w[j] * s - wx * m**-1.5 * xs[j] / n for j in range(n)]


def _rms_mistakes(xs):
    return [
        ("eps is missing: it goes inside the square root, sqrt(mean(x²) + 1e-5)", _rms(xs, eps=0.0)),
        ("eps is added outside the square root; it belongs inside: 1 / sqrt(mean(x²) + 1e-5)",
         _rms(xs, eps_outside=True)),
        ("eps should be 1e-5 (this is 1e-6)", _rms(xs, eps=1e-6)),
        ("eps should be 1e-5 (this is 1e-8)", _rms(xs, eps=1e-8)),
        ("the scale uses the mean of x, not the mean of squares mean(x²)", _rms(xs, stat="mean")),
        ("the scale uses the mean of |x|, not the mean of squares mean(x²)", _rms(xs, stat="mean_abs")),
        ("the scale uses the sum of squares; RMSNorm divides by the root of their mean (sum / n)",
         _rms(xs, stat="sum_square")),
        ("the mean is subtracted first: that is LayerNorm; RMSNorm only divides by sqrt(mean(x²) + eps)",
         _rms(xs, centred=True)),
        ("the vector is multiplied by sqrt(mean(x²) + eps) instead of divided by it",
         [x * math.sqrt(sum(v * v for v in xs) / len(xs) + EPS) for x in xs]),
    ]


def probe_rmsnorm(ns, x, w=None):
    Value = ns.micro.Value
    xs = _values(ns, x)
    try:
        out = ns.micro.rmsnorm(xs)
    except ZeroDivisionError as error:
        return {"zero_division": str(error)}
    result = {"data": _data(out, "rmsnorm's result"), "values": all(isinstance(v, Value) for v in out)}
    if w is not None:
        ns.micro.vsum([wi * v for wi, v in zip(w, out)]).backward()
        result["grads"] = [v.grad for v in xs]
    return result


def _judge_rmsnorm(out, x, w, reveal):
    if "zero_division" in out:
        return (f"rmsnorm divided by zero ({out['zero_division']}): eps = 1e-5 goes inside the square root, "
                f"so an all-zero vector stays finite")
    if not out["values"]:
        return "rmsnorm should return a list of Values (the graph needs them for backward)"
    want = _rms(x)
    if len(out["data"]) != len(x):
        return f"rmsnorm of {len(x)} values returned {len(out['data'])}"
    if not _all_close(out["data"], want, 1e-12):
        for text, wrong in _rms_mistakes(x):
            if _all_close(out["data"], wrong, NEAR):
                return text
        if reveal:
            return f"rmsnorm({x}) gave {out['data']}, expected x / sqrt(mean(x²) + 1e-5) = {want}"
        return f"rmsnorm is off by up to {_off_by(out['data'], want):.3g}: x / sqrt(mean(x²) + 1e-5), no gain"
    if w is not None:
        grads = _rms_grads(x, w)
        if not _all_close(out["grads"], grads, 1e-10):
            if _all_close(out["grads"], [wi * (sum(v * v for v in x) / len(x) + EPS) ** -0.5 for wi in w], NEAR):
                return ("the values are right but the gradients are not: the scale 1/sqrt(mean(x²) + eps) is "
                        "treated as a constant (computed from .data); build it from Values so it is in the graph")
            if reveal:
                return f"the gradients through rmsnorm are {out['grads']}, expected {grads}"
            return f"the gradients through rmsnorm are off by up to {_off_by(out['grads'], grads):.3g}"
    return None


def judge_rmsnorm_figure(out, inputs, expected):
    problem = _judge_rmsnorm(out, inputs["x"], None, True)
    return f"(1, 3) should normalise to (1, 3) / sqrt(5.00001): {problem}" if problem else None


def judge_rmsnorm_public(out, inputs, expected):
    return _judge_rmsnorm(out, inputs["x"], inputs.get("w"), True)


def judge_rmsnorm_hidden(out, inputs, expected):
    return _judge_rmsnorm(out, inputs["x"], inputs.get("w"), False)


def _random_rmsnorm(g):
    n = 3 + int(torch.randint(0, 6, (1,), generator=g))
    return {"x": (torch.randn(n, generator=g, dtype=torch.float64) * 2).tolist(),
            "w": torch.randn(n, generator=g, dtype=torch.float64).tolist()}


# -------------------------------------------------------------------- softmax


def _softmax(ls):
    m = max(ls)
    e = [math.exp(v - m) for v in ls]
    total = sum(e)
    return [v / total for v in e]


def probe_softmax(ns, logits, w=None):
    Value = ns.micro.Value
    ls = _values(ns, logits)
    try:
        out = ns.micro.softmax(ls)
    except OverflowError as error:
        return {"overflow": str(error)}
    result = {"data": _data(out, "softmax's result"), "values": all(isinstance(v, Value) for v in out)}
    if w is not None:
        ns.micro.vsum([wi * v for wi, v in zip(w, out)]).backward()
        result["grads"] = [v.grad for v in ls]
    return result


def _judge_softmax(out, logits, w, reveal):
    if "overflow" in out:
        return (f"exp overflowed ({out['overflow']}) on logits near {max(logits):g}: subtract the largest "
                f"logit (a plain number, max of .data) before exp" if reveal else
                f"exp overflowed ({out['overflow']}) on large logits: subtract the largest logit before exp")
    if not out["values"]:
        return "softmax should return a list of Values (the graph needs them for backward)"
    want = _softmax(logits)
    if len(out["data"]) != len(logits):
        return f"softmax of {len(logits)} logits returned {len(out['data'])} values"
    if any(not _is_number(p) for p in out["data"]):
        return "softmax gave NaN or inf: subtract the largest logit before exp"
    if not _all_close(out["data"], want, 1e-12):
        if abs(sum(out["data"]) - 1.0) > 1e-9:
            return f"the probabilities sum to {sum(out['data']):.6g}, not 1: divide every exp by their total"
        if reveal:
            return f"softmax({logits}) gave {out['data']}, expected {want}"
        return f"softmax is off by up to {_off_by(out['data'], want):.3g}"
    if w is not None:
        wp = sum(a * b for a, b in zip(w, want))
        grads = [p * (wi - wp) for p, wi in zip(want, w)]
        if not _all_close(out["grads"], grads, 1e-10):
            if _all_close(out["grads"], [p * wi for p, wi in zip(want, w)], NEAR):
                return ("the values are right but the gradients are not: the total is treated as a constant "
                        "(a float from .data); divide by the Value vsum(exps) so it is in the graph")
            if reveal:
                return f"the gradients through softmax are {out['grads']}, expected {grads}"
            return f"the gradients through softmax are off by up to {_off_by(out['grads'], grads):.3g}"
    return None


def judge_softmax_public(out, inputs, expected):
    return _judge_softmax(out, inputs["logits"], inputs.get("w"), True)


def judge_softmax_hidden(out, inputs, expected):
    return _judge_softmax(out, inputs["logits"], inputs.get("w"), False)


def _random_softmax(g):
    n = 2 + int(torch.randint(0, 7, (1,), generator=g))
    shift = _uniform(g, -800, 800)
    return {"logits": [shift + v for v in (torch.randn(n, generator=g, dtype=torch.float64) * 3).tolist()],
            "w": torch.randn(n, generator=g, dtype=torch.float64).tolist()}


# ------------------------------------------------------------------ attention


def _attention(q, keys, values, scale="sqrt", use="values"):
    d = len(q)
    factor = {"sqrt": 1 / math.sqrt(d), "none": 1.0, "d": 1 / d, "times_sqrt": math.sqrt(d)}[scale]
    weights = _softmax([sum(a * b for a, b in zip(q, k)) * factor for k in keys])
    rows = values if use == "values" else keys
    return [sum(w * row[i] for w, row in zip(weights, rows)) for i in range(d)], weights


def _attention_mistakes(q, keys, values):
    return [
        ("the scores are not scaled: divide dot(query, key) by sqrt(d_head)", _attention(q, keys, values, "none")),
        ("the scores are divided by d_head; divide by sqrt(d_head)", _attention(q, keys, values, "d")),
        ("the scores are multiplied by sqrt(d_head); divide by it", _attention(q, keys, values, "times_sqrt")),
        ("the output mixes the keys; it is the weighted sum of the values", _attention(q, keys, values, use="keys")),
    ]


def probe_attention(ns, query, keys, values, c=None, e=None):
    q = _values(ns, query)
    ks = [_values(ns, k) for k in keys]
    vs = [_values(ns, v) for v in values]
    result = ns.micro.attention_head(q, ks, vs)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        return {"form": _kind(result)}
    output, weights = result
    out = {"output": _data(output, "the head's output"), "weights": _data(weights, "the attention weights")}
    if c is not None:
        loss = ns.micro.vsum([ci * o for ci, o in zip(c, output)] + [ei * w for ei, w in zip(e, weights)])
        loss.backward()
        out["grads"] = {"query": [v.grad for v in q], "keys": [[v.grad for v in k] for k in ks],
                        "values": [[v.grad for v in v_] for v_ in vs]}
    return out


def _judge_attention_values(out, q, keys, values, reveal):
    if "form" in out:
        return "attention_head should return (output, weights), got something else"
    want_out, want_w = _attention(q, keys, values)
    if len(out["weights"]) != len(keys):
        return f"with {len(keys)} cached positions there should be {len(keys)} weights, got {len(out['weights'])}"
    if len(out["output"]) != len(q):
        return f"the head's output should have d_head = {len(q)} values, got {len(out['output'])}"
    if abs(sum(out["weights"]) - 1.0) > 1e-9:
        return f"the attention weights sum to {sum(out['weights']):.6g}, not 1: softmax the scores"
    if _all_close(out["weights"], want_w, 1e-10) and _all_close(out["output"], want_out, 1e-10):
        return None
    for text, (wrong_out, wrong_w) in _attention_mistakes(q, keys, values):
        if _all_close(out["weights"], wrong_w, NEAR) and _all_close(out["output"], wrong_out, NEAR):
            return text
    if not _all_close(out["weights"], want_w, 1e-10):
        if reveal:
            return f"the weights are {out['weights']}, expected softmax(dot(q, k_t) / sqrt(d_head)) = {want_w}"
        return f"the attention weights are off by up to {_off_by(out['weights'], want_w):.3g}"
    if reveal:
        return f"the weights are right but the output {out['output']} is not sum_t w_t * v_t = {want_out}"
    return f"the weights are right but the output is off by up to {_off_by(out['output'], want_out):.3g}"


def judge_attention_public(out, inputs, expected):
    return _judge_attention_values(out, inputs["query"], inputs["keys"], inputs["values"], True)


def judge_attention_single(out, inputs, expected):
    if "form" in out:
        return "attention_head should return (output, weights), got something else"
    if out["weights"] != [1.0] and not _all_close(out["weights"], [1.0], 1e-15):
        return f"with one cached position the only weight must be 1, got {out['weights']}"
    if not _all_close(out["output"], inputs["values"][0], 1e-15):
        return "with one cached position the output must be that position's value vector"
    return None


def _expect_attention(ref, inputs):
    V = ref.micro.Value
    q = [V(x) for x in inputs["query"]]
    ks = [[V(x) for x in k] for k in inputs["keys"]]
    vs = [[V(x) for x in v] for v in inputs["values"]]
    output, weights = ref.micro.attention_head(q, ks, vs)
    terms = [ci * o for ci, o in zip(inputs["c"], output)] + [ei * w for ei, w in zip(inputs["e"], weights)]
    ref.micro.vsum(terms).backward()
    return {"output": [v.data for v in output], "weights": [w.data for w in weights],
            "grads": {"query": [v.grad for v in q], "keys": [[v.grad for v in k] for k in ks],
                      "values": [[v.grad for v in v_] for v_ in vs]}}


def judge_attention_hidden(out, inputs, expected):
    if problem := _judge_attention_values(out, inputs["query"], inputs["keys"], inputs["values"], False):
        return problem
    for name in ("query", "keys", "values"):
        if not _all_close(out["grads"][name], expected["grads"][name], 1e-9):
            return (f"the values are right but the gradients reaching the {name} are off by up to "
                    f"{_off_by(out['grads'][name], expected['grads'][name]):.3g}: keep every step in the graph "
                    f"(Values, not .data floats)")
    return None


def _random_attention(g):
    T = 2 + int(torch.randint(0, 5, (1,), generator=g))  # one position would hide the scale
    d = 2 + int(torch.randint(0, 3, (1,), generator=g))
    r = lambda *shape: (torch.randn(*shape, generator=g, dtype=torch.float64) * 1.5).tolist()  # noqa: E731
    return {"query": r(d), "keys": r(T, d), "values": r(T, d), "c": r(d), "e": r(T)}


# ---------------------------------------------------------- the model: float twin


def _linear(x, w):
    return [sum(a * b for a, b in zip(row, x)) for row in w]


def _twin_block(tables, layer, x, cache, n_head, flaw=None):
    """One layer for one position in floats; the reference's formula, or a known flaw."""
    t = lambda name: tables[f"layer{layer}.{name}"]  # noqa: E731
    E = len(x)
    hd = E // n_head
    h = x if flaw == "no_attention_norm" else _rms(x)
    q, k, v = _linear(h, t("wq")), _linear(h, t("wk")), _linear(h, t("wv"))
    if flaw == "no_cache":
        keys, values = [k], [v]
    else:
        cache["keys"].append(k)
        cache["values"].append(v)
        keys, values = cache["keys"], cache["values"]
    heads, weights = [], []
    for head in range(n_head):
        lo, hi = head * hd, (head + 1) * hd
        out, w = _attention(q[lo:hi], [key[lo:hi] for key in keys], [val[lo:hi] for val in values])
        heads.extend(out)
        weights.append(w)
    attended = _linear(heads, t("wo"))
    u = attended if flaw == "no_attention_residual" else [a + b for a, b in zip(x, attended)]
    m_in = x if flaw == "mlp_reads_input" else u
    hidden = _linear(m_in if flaw == "no_mlp_norm" else _rms(m_in), t("fc1"))
    if flaw != "no_relu":
        hidden = [max(0.0, z) for z in hidden]
    y2 = _linear(hidden, t("fc2"))
    y = y2 if flaw == "no_mlp_residual" else [a + b for a, b in zip(u, y2)]
    if flaw == "output_normalised":
        y = _rms(y)
    return y, weights


_BLOCK_FLAWS = {
    "no_attention_residual": "the attention residual is missing: x = x + WO(concat of the heads)",
    "no_mlp_residual": "the MLP residual is missing: x = x + FC2(relu(FC1(RMSNorm(x))))",
    "no_attention_norm": "the attention reads x itself; it reads RMSNorm(x) (pre-norm)",
    "no_mlp_norm": "the MLP reads x itself; it reads RMSNorm(x) (pre-norm)",
    "mlp_reads_input": "the MLP branch reads the layer's input; it reads x after the attention residual",
    "no_relu": "there is no relu between FC1 and FC2",
    "output_normalised": "the layer's output is normalised again: pre-norm adds to the raw residual stream",
    "no_cache": "each position attends only to itself: append k and v to this layer's cache and attend over all of it",
}


def _twin_logits(tables, sizes, ids, flaw=None):
    caches = [{"keys": [], "values": []} for _ in range(sizes["n_layer"])]
    logits, attention = [], []
    for pos, token in enumerate(ids):
        x = list(tables["wte"][token])
        if flaw != "no_position":
            x = [a + b for a, b in zip(x, tables["wpe"][pos])]
        if flaw != "no_embedding_norm":
            x = _rms(x)
        attention = []
        layers = 1 if flaw == "first_layer_only" else sizes["n_layer"]
        for layer in range(layers):
            x, weights = _twin_block(tables, layer, x, caches[layer], sizes["n_head"])
            attention.append(weights)
        if flaw == "final_norm":
            x = _rms(x)
        logits.append(_linear(x, tables["lm_head"]))
    return logits, attention


_FORWARD_FLAWS = {
    "final_norm": "the features are normalised before the LM head: this model has no final norm",
    "no_embedding_norm": "the embedding sum is not normalised: RMSNorm(token row + position row) comes first",
    "no_position": "the position row is missing: x = WTE[token] + WPE[pos]",
    "first_layer_only": "only the first layer runs: apply self.block(layer, x) for every layer",
}

SMALL = {"vocab_size": 7, "n_embd": 8, "n_layer": 1, "block_size": 6, "n_head": 2, "mlp_ratio": 2}
NAMES = {"vocab_size": 27, "n_embd": 16, "n_layer": 1, "block_size": 16, "n_head": 4, "mlp_ratio": 4}
ANA = [26, 0, 13, 0, 26]  # 'ana' framed by BOS = 26 (chapter 01's tokenizer on the names list)


def _model(micro, sizes, seed, spread=None):
    """A MicroGPT; with spread, weights redrawn with a larger std so attention is far from uniform."""
    model = micro.MicroGPT(**sizes, seed=seed)
    if spread:
        rng = random.Random(seed + 1)
        for p in model.params:
            p.data = rng.gauss(0.0, spread)
    return model


def _tables(model):
    return {name: [[p.data for p in row] for row in table] for name, table in model.state.items()}


# ------------------------------------------------------------------ the layer


def _run_block(micro, sizes, seed, spread, xs, zero):
    model = _model(micro, sizes, seed, spread)
    for name in zero:
        for row in model.table(0, name):
            for p in row:
                p.data = 0.0
    model.start_sequence()
    ys, rows = [], []
    for pos, x in enumerate(xs):
        try:
            y = model.block(0, [micro.Value(v) for v in x])
        except NotImplementedError:
            raise
        except Exception as error:  # noqa: BLE001 - the judge says what the layer was doing when it failed
            if type(error).__name__ == "ForbiddenCall":
                raise
            cached = model.cache[0] if isinstance(model.cache, (list, tuple)) and model.cache else {}
            keys = cached.get("keys") if isinstance(cached, dict) else None
            return {"raised": type(error).__name__, "position": pos,
                    "cached_keys": len(keys) if isinstance(keys, list) else None}
        ys.append(_data(y, "block's result"))
        rows.append([[w if isinstance(w, float) else None for w in head] for head in model.last_attention[0]])
    cache = model.cache_length()
    model.finish_sequence()
    return {"y": ys, "rows": rows, "cache": cache, "tables": _tables(model)}


def probe_block(ns, sizes, seed, spread, xs, zero=()):
    return _run_block(ns.micro, sizes, seed, spread, xs, zero)


def _block_twin(tables, sizes, xs, flaw=None):
    cache = {"keys": [], "values": []}
    ys, rows = [], []
    for x in xs:
        y, w = _twin_block(tables, 0, x, cache, sizes["n_head"], flaw)
        ys.append(y)
        rows.append(w)
    return ys, rows


def _block_raised(out) -> "str | None":
    """A sentence for a layer that raised: where in the sequence, and what the cache held."""
    if "raised" not in out:
        return None
    kind, pos = exception_name({"type": out["raised"]}), out["position"]
    if out.get("cached_keys") == pos:
        return (f"at position {pos} the layer raised {kind} with no key of its own in the cache yet: it attends "
                f"before appending this position's k and v, so at position 0 there is nothing to attend to; append "
                f"k and v to the cache first, then attend (a position sees itself)")
    return f"the layer raised {kind} at position {pos} (the cache starts empty at position 0)"


def judge_block_zero_branch(out, inputs, expected):
    if problem := _block_raised(out):
        return problem
    xs = inputs["xs"]
    if _shape(out["y"]) != _shape(xs):
        return f"the layer should return one value per feature: {_shape(xs)[-1]} in, got shape {_shape(out['y'])}"
    if out["y"] == xs or _all_close(out["y"], xs, 1e-12):
        return None
    if _all_close(out["y"], [[0.0] * len(x) for x in xs], 1e-12):
        return "with WO and FC2 zero the layer returns 0: the residual connections (x + ...) are missing"
    if _all_close(out["y"], [_rms(x) for x in xs], 1e-9):
        return "with WO and FC2 zero the output is RMSNorm(x): the layer's output must not be normalised"
    if _all_close(out["y"], [[2 * v for v in x] for x in xs], 1e-12):
        return "with WO and FC2 zero the output is 2x: the residual is added twice"
    return "with WO and FC2 zero (both branches output 0) the layer must return its input exactly"


def _judge_block(out, inputs, tables, reveal):
    if problem := _block_raised(out):
        return problem
    xs, sizes = inputs["xs"], inputs["sizes"]
    if _shape(out["y"]) != _shape(xs):
        return f"the layer should return E = {sizes['n_embd']} values per position, got shape {_shape(out['y'])}"
    want, rows = _block_twin(tables, sizes, xs)
    for pos, (got_rows, want_rows) in enumerate(zip(out["rows"], rows)):
        lengths = [len(r) for r in got_rows]
        if lengths != [pos + 1] * sizes["n_head"]:
            if lengths == [0] * sizes["n_head"]:
                return ("self.last_attention[layer][head] is not filled in: keep each head's weights as floats "
                        "([w.data for w in weights])")
            return (f"at position {pos} every head should attend over {pos + 1} cached positions, "
                    f"the attention rows have lengths {lengths}: append k and v to this layer's cache first")
    if out["cache"] != len(xs):
        return f"after {len(xs)} positions the cache should hold {len(xs)} keys, it holds {out['cache']}"
    if any(w is None for w in _flat(out["rows"])):
        return ("self.last_attention[layer][head] should hold plain floats, the weights' .data "
                "([w.data for w in weights]), not Values")
    if _all_close(out["y"], want, TOL) and _all_close(out["rows"], rows, TOL):
        return None
    for flaw, text in _BLOCK_FLAWS.items():
        wrong, _ = _block_twin(tables, sizes, xs, flaw)
        if _all_close(out["y"], wrong, NEAR):
            return text
    if _all_close(out["y"], want, TOL):
        return "the outputs are right but self.last_attention does not hold each head's softmax weights"
    return (f"the layer's output is off by up to {_off_by(out['y'], want):.3g}"
            + (" (h = RMSNorm(x); q, k, v; attend per head; x += WO(heads); x += FC2(relu(FC1(RMSNorm(x)))))"
               if reveal else ""))


def judge_block_public(out, inputs, expected):
    return _judge_block(out, inputs, out.get("tables"), True)


def _expect_block(ref, inputs):
    return _run_block(ref.micro, inputs["sizes"], inputs["seed"], inputs["spread"], inputs["xs"], ())


def judge_block_hidden(out, inputs, expected):
    if problem := _block_raised(out):
        return problem
    if _shape(out["y"]) == _shape(expected["y"]) and _all_close(out["y"], expected["y"], TOL) \
            and _all_close(out["rows"], expected["rows"], TOL) and out["cache"] == expected["cache"]:
        return None
    return _judge_block(out, inputs, expected["tables"], False) or "the layer does not match the reference"


def _block_inputs(seed, n, spread=0.5, sizes=SMALL):
    rng = random.Random(seed + 7)
    return {"sizes": dict(sizes), "seed": seed, "spread": spread,
            "xs": [[rng.gauss(0.0, 1.0) for _ in range(sizes["n_embd"])] for _ in range(n)]}


def _random_block(g):
    seed = _random_seed(g)
    sizes = dict(SMALL, n_head=[1, 2, 4][seed % 3])
    return _block_inputs(seed, 2 + seed % 4, spread=0.3 + (seed % 5) / 10, sizes=sizes)


# ------------------------------------------------------------------- forward


def _run_forward(micro, sizes, seed, spread, ids, tables=True):
    model = _model(micro, sizes, seed, spread)
    model.start_sequence()
    logits = []
    for pos, token in enumerate(ids):
        logits.append(_data(model.forward(token, pos), "forward's result"))
    rows = [[[float(w) for w in head] for head in layer] for layer in model.last_attention]
    cache = model.cache_length()
    model.finish_sequence()
    out = {"logits": logits, "rows": rows, "cache": cache, "params": len(model.params)}
    if tables:
        out["tables"] = _tables(model)
    return out


def probe_forward(ns, sizes, seed, ids, spread=None, tables=True):
    return _run_forward(ns.micro, sizes, seed, spread, ids, tables)


def judge_forward_ana(out, inputs, expected):
    if out["params"] != 4192:
        return f"the names model (V=27, E=16, T=16, L=1, H=4) should have 4192 parameters, it has {out['params']}"
    lengths = {len(row) for row in out["logits"]}
    if lengths != {27}:
        n = sorted(lengths)[0]
        if n == 16:
            return ("forward returned 16 values: those are the E = 16 features; apply the LM head, "
                    "logit[v] = dot(LMHead[v], x), to get V = 27 logits")
        return f"forward should return V = 27 logits (one per vocabulary entry), got {n}"
    rows = out["rows"][0]
    if [len(r) for r in rows] != [4, 4, 4, 4]:
        return (f"at the last scored position of 'ana' (position 3, target BOS) every head should have 4 "
                f"attention weights, got {[len(r) for r in rows]}")
    if any(abs(sum(r) - 1.0) > 1e-9 for r in rows):
        return "the last position's attention rows should each sum to 1"
    if out["cache"] != 4:
        return f"after 4 positions the cache should hold 4 positions, it holds {out['cache']}"
    return None


def _judge_forward(out, inputs, tables, reveal):
    sizes, ids = inputs["sizes"], inputs["ids"]
    V = sizes["vocab_size"]
    if _shape(out["logits"]) != [len(ids), V]:
        shape = _shape(out["logits"])
        if shape == [len(ids), sizes["n_embd"]]:
            return (f"forward returned E = {sizes['n_embd']} values: apply the LM head, "
                    f"logit[v] = dot(LMHead[v], x), to get V = {V} logits")
        return f"forward should return V = {V} logits per call, got shape {shape}"
    want, _ = _twin_logits(tables, sizes, ids)
    if _all_close(out["logits"], want, TOL):
        return None
    for flaw, text in _FORWARD_FLAWS.items():
        if _all_close(out["logits"], _twin_logits(tables, sizes, ids, flaw)[0], NEAR):
            return text
    worst = max(range(len(ids)), key=lambda p: _off_by(out["logits"][p], want[p]))
    return (f"the logits are off by up to {_off_by(out['logits'], want):.3g} (worst at position {worst})"
            + ("; forward is RMSNorm(WTE[token] + WPE[pos]), every layer's block, then the LM head"
               if reveal else ""))


def judge_forward_public(out, inputs, expected):
    return _judge_forward(out, inputs, out["tables"], True)


def _expect_forward(ref, inputs):
    return _run_forward(ref.micro, inputs["sizes"], inputs["seed"], inputs.get("spread"), inputs["ids"])


def judge_forward_hidden(out, inputs, expected):
    if _all_close(out["logits"], expected["logits"], TOL) and _all_close(out["rows"], expected["rows"], TOL):
        return None
    return _judge_forward(out, inputs, expected["tables"], False) or \
        "the attention rows kept by the layers do not match the reference"


def _random_forward(g):
    seed = _random_seed(g)
    rng = random.Random(seed)
    sizes = dict(NAMES, n_layer=1 + seed % 2)
    n = rng.randint(2, 6)
    return {"sizes": sizes, "seed": seed, "spread": 0.3, "ids": [26] + [rng.randrange(27) for _ in range(n - 1)]}


def probe_pure_python(ns, sizes, seed):
    model = _model(ns.micro, sizes, seed)
    model.start_sequence()
    model.forward(0, 0)  # the stub raises here: 'not implemented', like every other check of the task
    model.finish_sequence()
    banned = ("torch", "numpy")
    found = []
    for name, value in vars(ns.micro).items():
        if isinstance(value, types.ModuleType):
            origin = value.__name__
        else:
            origin = getattr(value, "__module__", None) or ""
            origin = origin if isinstance(origin, str) else ""
        if origin.split(".")[0] in banned:
            found.append(f"{name} ({origin})")
    # Imports inside functions: the names a function's code (or a nested one) refers to.
    # The graded function is the student's here; the other graded parts are certified.
    seen = set()

    def visit(code, where):
        if id(code) in seen:
            return
        seen.add(id(code))
        for banned_name in banned:
            if banned_name in code.co_names:
                found.append(f"{banned_name} (in {where})")
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                visit(const, where)

    owners = [ns.micro] + [v for v in vars(ns.micro).values()
                           if isinstance(v, type) and getattr(v, "__module__", "") == ns.micro.__name__]
    for owner in owners:
        for attr, value in list(vars(owner).items()):
            function = getattr(value, "__func__", value)
            code = getattr(function, "__code__", None)
            if isinstance(code, types.CodeType) and getattr(function, "__module__", "") == ns.micro.__name__:
                visit(code, f"{getattr(function, '__qualname__', attr)}")
    return {"found": sorted(set(found))}


def judge_pure_python(out, inputs, expected):
    if out["found"]:
        return (f"micro.py uses {', '.join(out['found'])}: chapter 00 is plain Python (math and random only), "
                f"every number a Value")
    return None


# ---------------------------------------------------------------------- loss


def _nll(logits, target):
    m = max(logits)
    return math.log(sum(math.exp(v - m) for v in logits)) + m - logits[target]


def _run_loss(micro, sizes, seed, spread, ids, fd=()):
    model = _model(micro, sizes, seed, spread)
    try:
        loss = micro.document_loss(model, ids)
    except ValueError as error:
        return {"value_error": str(error)}
    if not isinstance(loss, micro.Value):
        return {"type": _kind(loss)}
    value = loss.data
    loss.backward()
    grads = [p.grad for p in model.params]
    model.finish_sequence()
    again = micro.document_loss(model, ids).data  # a second document: start_sequence() must start over
    model.finish_sequence()
    n = min(model.block_size, len(ids) - 1)
    model.start_sequence()
    logits = [[v.data for v in model.forward(ids[pos], pos)] for pos in range(n)]
    model.finish_sequence()
    numeric = []
    for index in fd:  # central differences of the loss along single parameters
        p, h = model.params[index], 1e-6
        keep = p.data
        p.data = keep + h
        up = micro.document_loss(model, ids).data
        p.data = keep - h
        down = micro.document_loss(model, ids).data
        p.data = keep
        model.finish_sequence()
        numeric.append((up - down) / (2 * h))
    return {"loss": value, "again": again, "logits": logits, "grads": grads, "numeric": numeric}


def probe_loss(ns, sizes, seed, ids, spread=None, fd=()):
    return _run_loss(ns.micro, sizes, seed, spread, ids, fd)


def _loss_candidates(logits, ids, reveal=True):
    n = len(logits)
    nll = [_nll(row, ids[p + 1]) for p, row in enumerate(logits)]
    mean = sum(nll) / n
    count, length = (f" {n}", f" = {len(ids)}") if reveal else ("", "")
    return mean, [
        (f"the loss is the SUM of the{count} position losses; document_loss is their mean "
         f"(divide by the number of scored positions)", sum(nll)),
        (f"the loss is divided by len(ids){length}; the scored positions are min(T, len(ids) - 1)"
         + (f" = {n}" if reveal else ""), sum(nll) / len(ids)),
        ("the loss is log p(target), not -log p(target): the negative log-likelihood has a minus sign", -mean),
        ("each position scores its own input id, not the next one: the target of position p is ids[p + 1]",
         sum(_nll(row, ids[p]) for p, row in enumerate(logits)) / n),
        ("the loss uses -logit[target] without the softmax: the NLL is -log softmax(logits)[target]",
         sum(-row[ids[p + 1]] for p, row in enumerate(logits)) / n),
    ]


def _judge_loss(out, inputs, reveal):
    ids, sizes = inputs["ids"], inputs["sizes"]
    n = min(sizes["block_size"], len(ids) - 1)
    if "value_error" in out:
        if len(ids) - 1 > sizes["block_size"]:
            if not reveal:
                return ("a document longer than the window raised ValueError: score only min(T, len(ids) - 1) "
                        "positions; the pairs past the window are not scored")
            return (f"a document of {len(ids)} ids raised ValueError ({out['value_error']}): score only "
                    f"min(T, len(ids) - 1) = {n} positions; the pairs past the window are not scored")
        return f"document_loss raised ValueError: {out['value_error']}"
    if "type" in out:
        return "document_loss returned something else; it should return a Value (the graph's root for backward)"
    mean, wrong = _loss_candidates(out["logits"], ids, reveal)
    if not _close(out["loss"], mean, TOL):
        for text, value in wrong:
            if _close(out["loss"], value, NEAR):
                return text
        if reveal:
            return f"the loss is {out['loss']!r}; the mean -log softmax(logits)[target] over {n} positions is {mean!r}"
        return f"the loss is off by {abs(out['loss'] - mean):.3g} from the mean NLL over the scored positions"
    if not _close(out["again"], mean, TOL):
        return "a second call on the same document gave another loss: start a new sequence (start_sequence()) first"
    if not any(g != 0.0 for g in out["grads"]):
        return "loss.backward() gives every parameter a zero gradient: build the loss from Values, not floats"
    return None


def judge_loss_public(out, inputs, expected):
    if problem := _judge_loss(out, inputs, True):
        return problem
    for index, numeric in zip(inputs.get("fd", ()), out["numeric"]):
        if abs(out["grads"][index] - numeric) > 1e-5 * max(1.0, abs(numeric)):
            return (f"the gradient of parameter {index} is {out['grads'][index]!r} but finite differences of the "
                    f"loss give {numeric!r}: keep every step of the loss in the graph")
    return None


def _expect_loss(ref, inputs):
    return _run_loss(ref.micro, inputs["sizes"], inputs["seed"], inputs.get("spread"), inputs["ids"])


def judge_loss_hidden(out, inputs, expected):
    if problem := _judge_loss(out, inputs, False):
        return problem
    if not _close(out["loss"], expected["loss"], TOL):
        return "the loss does not match the reference"
    if not _all_close(out["grads"], expected["grads"], 1e-8):
        return (f"the parameter gradients of the loss are off by up to {_off_by(out['grads'], expected['grads']):.3g}: "
                f"keep every step of the loss in the graph")
    return None


def _random_loss(g):
    seed = _random_seed(g)
    rng = random.Random(seed)
    n = rng.randint(2, 9)  # SMALL has block_size 6: some documents are longer than the window
    return {"sizes": dict(SMALL), "seed": seed, "spread": 0.4,
            "ids": [6] + [rng.randrange(6) for _ in range(n)] + [6]}


# ---------------------------------------------------------------------- Adam


def _adam(start, grads, lr, beta1, beta2, eps, total_steps, bias=True, decay="t", eps_inside=False):
    p, n = list(start), len(start)
    m, v, trajectory = [0.0] * n, [0.0] * n, []
    for t, gs in enumerate(grads):
        lr_t = {"t": lr * (1 - t / total_steps), "t+1": lr * (1 - (t + 1) / total_steps), None: lr}[decay]
        for i, g in enumerate(gs):
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            m_hat = m[i] / (1 - beta1 ** (t + 1)) if bias else m[i]
            v_hat = v[i] / (1 - beta2 ** (t + 1)) if bias else v[i]
            p[i] -= lr_t * m_hat / (math.sqrt(v_hat + eps) if eps_inside else math.sqrt(v_hat) + eps)
        trajectory.append(list(p))
    return trajectory


def _adam_mistakes(start, grads, settings):
    return [
        ("there is no bias correction: divide m by 1 - beta1^(t+1) and v by 1 - beta2^(t+1)",
         _adam(start, grads, **settings, bias=False)),
        ("the learning rate does not decay: step t uses lr * (1 - t / total_steps)",
         _adam(start, grads, **settings, decay=None)),
        ("the learning rate decays one step early: step t (counting from 0) uses lr * (1 - t / total_steps)",
         _adam(start, grads, **settings, decay="t+1")),
        ("eps is added inside the square root; Adam divides by sqrt(v_hat) + eps",
         _adam(start, grads, **settings, eps_inside=True)),
    ]


def probe_adam(ns, start, grads, settings):
    params = _values(ns, start)
    opt = ns.micro.Adam(params, **settings)
    trajectory, left = [], []
    for gs in grads:
        for p, g in zip(params, gs):
            p.grad = g
        try:
            opt.step()
        except ZeroDivisionError as error:
            return {"zero_division": str(error), "steps": len(trajectory)}
        trajectory.append([float(p.data) for p in params])
        left.append([p.grad for p in params])
    moments = list(opt.m) + list(opt.v)
    return {"trajectory": trajectory, "grads_after": left, "t": opt.t,
            "plain_moments": all(isinstance(x, float) for x in moments)}


def _judge_adam(out, inputs, reveal):
    start, grads, settings = inputs["start"], inputs["grads"], inputs["settings"]
    if "zero_division" in out:
        return (f"step {out['steps']} divided by zero ({out['zero_division']}): the bias correction of step t "
                f"(counting from 0) is 1 - beta^(t+1)")
    want = _adam(start, grads, **settings)
    if not _all_close(out["trajectory"], want, 1e-12):
        for text, wrong in _adam_mistakes(start, grads, settings):
            if _all_close(out["trajectory"], wrong, 1e-10):
                return text
        step = next(i for i, (a, b) in enumerate(zip(out["trajectory"], want)) if not _all_close(a, b, 1e-12))
        if reveal:
            return f"after step {step} the parameters are {out['trajectory'][step]}, expected {want[step]}"
        return f"the parameters are off by up to {_off_by(out['trajectory'], want):.3g}, first after step {step}"
    if any(g != 0.0 for row in out["grads_after"] for g in row):
        return "the grads are not reset to 0 after the update: set p.grad = 0 for every parameter"
    if out["t"] != len(grads):
        return f"after {len(grads)} steps opt.t should be {len(grads)}, it is {out['t']!r}: add 1 at the end of step()"
    if not out["plain_moments"]:
        return "the moments m and v should stay plain floats (optimizer state, not Values in the graph)"
    return None


def judge_adam_public(out, inputs, expected):
    return _judge_adam(out, inputs, True)


def judge_adam_hidden(out, inputs, expected):
    return _judge_adam(out, inputs, False)


def probe_adam_first_step(ns, gradients, lr):
    moved = []
    for g in gradients:
        p = ns.micro.Value(0.0)
        p.grad = g
        ns.micro.Adam([p], lr=lr).step()
        moved.append(p.data)
    return {"moved": moved}


def judge_adam_first_step(out, inputs, expected):
    lr = inputs["lr"]
    for g, moved in zip(inputs["gradients"], out["moved"]):
        if not (_is_number(moved) and abs(moved + lr) <= 1e-4 * lr):
            if _is_number(moved) and abs(moved + 1.5 * lr) <= 1e-3 * lr:
                return (f"the first step with gradient {g} moves the parameter by {moved:.6g}, not -lr = {-lr}: "
                        f"without bias correction m/sqrt(v) is 0.15/0.1 = 1.5 times too big")
            return (f"the first step with gradient {g} moves the parameter by {moved!r}; with bias correction the "
                    f"first Adam step is about -lr = {-lr}, whatever the gradient's size")
    return None


def _random_adam(g):
    seed = _random_seed(g)
    rng = random.Random(seed)
    n, steps = rng.randint(2, 5), rng.randint(2, 4)
    scale = [10 ** rng.uniform(-3, 1.5) for _ in range(n)]
    return {"start": [rng.gauss(0, 1) for _ in range(n)],
            "grads": [[rng.gauss(0, s) for s in scale] for _ in range(steps)],
            "settings": {"lr": rng.uniform(0.005, 0.1), "beta1": rng.uniform(0.8, 0.95),
                         "beta2": rng.uniform(0.95, 0.999), "eps": 1e-8, "total_steps": steps + rng.randint(1, 5)}}


# ------------------------------------------------------------------- sampling


class _Letters:
    """Stands in for chapter 01's tokenizer: the first `size` letters, then BOS."""

    def __init__(self, size):
        self.chars = "abcdefghijklmnopqrstuvwxyz"[:size]
        self.bos_id = size

    @property
    def vocab_size(self):
        return len(self.chars) + 1

    def decode(self, ids):
        # Letters are consecutive code points here: no table to look up (and no copy of
        # chapter 01's decode in a file students receive).
        return bytes(ord("a") + int(i) for i in ids if int(i) < self.bos_id).decode("ascii")


class _Scripted:
    """Stands in for MicroGPT: position p returns the logits script(p); records every call."""

    def __init__(self, Value, script, vocab_size, block_size):
        self.Value, self.script = Value, script
        self.vocab_size, self.block_size = vocab_size, block_size
        self.calls, self.open = [], False

    def start_sequence(self):
        self.calls, self.open = [], True

    def finish_sequence(self):
        self.open = False

    def forward(self, token_id, pos):
        self.calls.append([int(token_id), int(pos)])
        return [self.Value(x) for x in self.script(pos)]


def _peaked(script, vocab_size):
    """Position p strongly prefers script[p] (and the letter 0 past the script's end)."""
    def logits(pos):
        want = script[pos] if pos < len(script) else 0
        return [50.0 if v == want else 0.0 for v in range(vocab_size)]
    return logits


def probe_sample_script(ns, script, letters, block_size, temperature=1.0):
    tokenizer = _Letters(letters)
    model = _Scripted(ns.micro.Value, _peaked(script, tokenizer.vocab_size), tokenizer.vocab_size, block_size)
    text = ns.micro.sample(model, tokenizer, temperature, random.Random(0))
    return {"text": text, "calls": model.calls}


def judge_sample_bos(out, inputs, expected):
    bos = inputs["letters"]
    if not isinstance(out["text"], str):
        return f"sample should return the text (a str), got a {type(out['text']).__name__}"
    if out["calls"][:1] != [[bos, 0]]:
        return f"sampling starts by feeding BOS (id {bos}) at position 0; the first call was {out['calls'][:1]}"
    if out["text"].startswith("ab") and len(out["text"]) > 2:
        return (f"the model drew BOS after 'ab' but sampling went on ({len(out['text'])} characters): stop at BOS "
                f"(it ends the name and is not part of the text)")
    if out["text"] != "ab":
        return f"the scripted model says a, b, BOS: the sample should be 'ab'; {first_difference(out['text'], 'ab')}"
    if out["calls"] != [[bos, 0], [0, 1], [1, 2]]:
        return (f"the calls should be (BOS, 0), (a, 1), (b, 2): each drawn id is fed back at the next position; "
                f"got {out['calls']}")
    return None


def judge_sample_block_size(out, inputs, expected):
    T = inputs["block_size"]
    positions = [pos for _, pos in out["calls"]]
    if positions != list(range(T)):
        return (f"with block_size {T} and no BOS drawn, forward should be called at positions 0..{T - 1}, "
                f"got {positions[:T + 2]}")
    if out["text"] != "a" * T:
        return (f"with block_size {T} and no BOS drawn the sample is {T} letters 'a'; "
                f"{first_difference(out['text'], 'a' * T)}")
    return None


def probe_sample_seeded(ns, sizes, seed, letters):
    tokenizer = _Letters(letters)
    model = _model(ns.micro, sizes, seed, spread=0.3)
    same = [ns.micro.sample(model, tokenizer, 1.0, random.Random(7)) for _ in range(3)]
    rng = random.Random(7)
    shared = [ns.micro.sample(model, tokenizer, 1.0, rng) for _ in range(4)]
    return {"same": same, "shared": shared}


def judge_sample_seeded(out, inputs, expected):
    same, shared = out["same"], out["shared"]
    if not all(isinstance(s, str) for s in same + shared):
        return "sample should return the text (a str)"
    if len(set(same)) != 1:
        return ("three samples with random.Random(7) gave different names: draw with the rng passed in "
                "(rng.choices or rng.random), not the module-level random functions")
    if shared[0] != same[0]:
        return "the first sample of a fresh random.Random(7) differs from the other runs with the same seed"
    if len(set(shared)) == 1:
        return ("four samples from one rng are all the same name: the draw should be random "
                "(rng.choices with the weights)")
    return None


def probe_sample_temperature(ns, seed, temperature, draws):
    tokenizer = _Letters(2)  # a, b, BOS = 2
    a_logit = math.log(3.0)  # at temperature 1: p(a) = 3/4, p(b) = 1/4

    def script(pos):
        return [a_logit, 0.0, -60.0] if pos == 0 else [0.0, 0.0, 60.0]

    model = _Scripted(ns.micro.Value, script, tokenizer.vocab_size, 4)
    rng = random.Random(seed)
    counts = {}
    for _ in range(draws):
        text = ns.micro.sample(model, tokenizer, temperature, rng)
        counts[text] = counts.get(text, 0) + 1
    return {"counts": counts}


def judge_sample_temperature(out, inputs, expected):
    T, draws = inputs["temperature"], inputs["draws"]
    counts = out["counts"]
    strange = sorted(k for k in counts if k not in ("a", "b"))
    if strange:
        return f"the scripted model allows only 'a' or 'b' (then BOS); samples included {strange[:3]}"
    p = 3.0 ** (1 / T) / (3.0 ** (1 / T) + 1)  # softmax(logits / T): p(a) = 3^(1/T) / (3^(1/T) + 1)
    share = counts.get("a", 0) / draws
    sd = math.sqrt(p * (1 - p) / draws)
    if abs(share - p) <= 5 * sd:
        return None
    ignored, multiplied = 0.75, 3.0**T / (3.0**T + 1)
    if abs(share - ignored) <= 5 * math.sqrt(ignored * (1 - ignored) / draws):
        return (f"at temperature {T} 'a' came {share:.0%} of the time, as at temperature 1: "
                f"divide the logits by the temperature")
    if abs(share - multiplied) <= 5 * math.sqrt(multiplied * (1 - multiplied) / draws):
        return (f"at temperature {T} 'a' came {share:.0%} of the time: the logits are multiplied by the "
                f"temperature; divide them (softmax(logits / temperature))")
    return (f"at temperature {T} 'a' should come about {p:.0%} of the time (softmax(logits / T)), "
            f"it came {share:.0%}: draw the next id from those probabilities")


# ----------------------------------------------------------------------- checks

CHECKS = [
    # Value: the primitives
    check("ch00.micro_value_add.value_and_gradients", "micro_value_add", 2,
          "a + b, a + 2.5, 2.5 + a and a + a: right values, local gradients 1 (a + a gives 2)",
          probe_value_ops, judge_ops_public,
          inputs=lambda g: {"cases": _cases("add", (1.5, -2.25)) + _cases("add_const", (1.5,))
                            + _cases("radd", (-0.75,)) + _cases("add_self", (1.5,))}),
    check("ch00.micro_value_add.random_values", "micro_value_add", 1,
          "random a, b: value and gradients exact", probe_value_ops, judge_ops_hidden,
          inputs=_random_cases("add"), hidden=True),
    check("ch00.micro_value_mul.value_and_gradients", "micro_value_mul", 2,
          "a * b gives a the gradient b and b the gradient a; a * a gives 2a; constants work on both sides",
          probe_value_ops, judge_ops_public,
          inputs=lambda g: {"cases": _cases("mul", (1.5, -2.25)) + _cases("square", (1.25,))
                            + _cases("mul_const", (0.5,)) + _cases("rmul", (0.5,))}),
    check("ch00.micro_value_mul.random_values", "micro_value_mul", 1,
          "random a, b: value and gradients exact", probe_value_ops, judge_ops_hidden,
          inputs=_random_cases("mul"), hidden=True),
    check("ch00.micro_value_pow.power_rule", "micro_value_pow", 2,
          "x ** k for k = 3, 2.5, -1, -0.5, 0.5: value x^k, gradient k * x^(k-1)",
          probe_value_ops, judge_ops_public,
          inputs=lambda g: {"cases": [c for k in (3, 2.5, -1, -0.5, 0.5) for c in _cases("pow", (1.7,), k=k)]}),
    check("ch00.micro_value_pow.random_values", "micro_value_pow", 1,
          "random positive bases and several exponents: exact", probe_value_ops, judge_ops_hidden,
          inputs=_random_cases("pow"), hidden=True),
    check("ch00.micro_value_exp.value_and_gradient", "micro_value_exp", 2,
          "exp(x) at 0.7, -1.3, 2.0: value and gradient both exp(x)", probe_value_ops, judge_ops_public,
          inputs=lambda g: {"cases": _cases("exp", (0.7,), (-1.3,), (2.0,))}),
    check("ch00.micro_value_exp.random_values", "micro_value_exp", 1,
          "random x: exact", probe_value_ops, judge_ops_hidden, inputs=_random_cases("exp"), hidden=True),
    check("ch00.micro_value_log.value_and_gradient", "micro_value_log", 2,
          "log(x) at 2.5, 0.3, 1.0: value log x, gradient 1/x", probe_value_ops, judge_ops_public,
          inputs=lambda g: {"cases": _cases("log", (2.5,), (0.3,), (1.0,))}),
    check("ch00.micro_value_log.random_values", "micro_value_log", 1,
          "random positive x: exact", probe_value_ops, judge_ops_hidden, inputs=_random_cases("log"), hidden=True),
    check("ch00.micro_value_relu.value_and_gradient", "micro_value_relu", 2,
          "relu at 1.3 and -0.8: (1.3, gradient 1) and (0, gradient 0)", probe_value_ops, judge_ops_public,
          inputs=lambda g: {"cases": _cases("relu", (1.3,), (-0.8,), (2.5,), (-3.0,))}),
    check("ch00.micro_value_relu.at_zero", "micro_value_relu", 1,
          "relu(0) = 0 with gradient 0 (the convention of the docstring)", probe_value_ops, judge_ops_public,
          inputs=lambda g: {"cases": _cases("relu", (0.0,))}),
    check("ch00.micro_value_relu.random_values", "micro_value_relu", 1,
          "random inputs of both signs: exact", probe_value_ops, judge_ops_hidden,
          inputs=_random_cases("relu"), hidden=True),
    # backward
    check("ch00.micro_backward.reused_node", "micro_backward", 2,
          "y = x*x + x at x = 3 gives x.grad = 7 (contributions added); a second backward adds 2 more",
          probe_backward_reuse, judge_backward_reuse),
    check("ch00.micro_backward.topological_order", "micro_backward", 2,
          "a node reached along a short and a long path, and a node reached twice, get exact gradients",
          probe_backward_order, judge_backward_order, inputs=lambda g: {"x0": 0.7}),
    check("ch00.micro_backward.deep_graph", "micro_backward", 1,
          "a chain 6000 nodes deep (beyond the recursion limit) gives x.grad = 3001",
          probe_backward_deep, judge_backward_deep, inputs=lambda g: {"depth": 3000}),
    check("ch00.micro_backward.random_graph", "micro_backward", 2,
          "random graphs of every primitive with reused nodes: leaf gradients match the reference",
          probe_backward_random, judge_backward_random, inputs=lambda g: {"seed": _random_seed(g)},
          expect=_expect_backward_random, hidden=True),
    # RMSNorm
    check("ch00.micro_rmsnorm.figure", "micro_rmsnorm", 2,
          "(1, 3) normalises to (1, 3) / sqrt(5.00001): mean of squares, eps 1e-5 inside, no gain",
          probe_rmsnorm, judge_rmsnorm_figure, inputs=lambda g: {"x": [1.0, 3.0]}),
    check("ch00.micro_rmsnorm.zero_vector", "micro_rmsnorm", 1,
          "an all-zero vector stays 0 (eps keeps it finite)", probe_rmsnorm, judge_rmsnorm_public,
          inputs=lambda g: {"x": [0.0, 0.0, 0.0]}),
    check("ch00.micro_rmsnorm.gradient", "micro_rmsnorm", 2,
          "the gradient through rmsnorm equals the analytic one (the scale is part of the graph)",
          probe_rmsnorm, judge_rmsnorm_public,
          inputs=lambda g: {"x": [0.5, -1.2, 2.0, 0.1], "w": [0.3, -0.8, 1.1, 0.4]}),
    check("ch00.micro_rmsnorm.random_vectors", "micro_rmsnorm", 1,
          "random vectors: values and gradients exact", probe_rmsnorm, judge_rmsnorm_hidden,
          inputs=_random_rmsnorm, hidden=True),
    # softmax
    check("ch00.micro_softmax.stable", "micro_softmax", 2,
          "logits (1000, 1001, 999) give the exact probabilities, summing to 1, without overflow",
          probe_softmax, judge_softmax_public, inputs=lambda g: {"logits": [1000.0, 1001.0, 999.0]}),
    check("ch00.micro_softmax.gradient", "micro_softmax", 2,
          "values and gradients of a small softmax equal the analytic ones (the total is part of the graph)",
          probe_softmax, judge_softmax_public,
          inputs=lambda g: {"logits": [0.5, -1.2, 2.0, 0.1], "w": [0.3, -0.8, 1.1, 0.4]}),
    check("ch00.micro_softmax.random_logits", "micro_softmax", 1,
          "random logits, shifted by up to ±800: values and gradients exact", probe_softmax, judge_softmax_hidden,
          inputs=_random_softmax, hidden=True),
    # attention
    check("ch00.micro_attention.scaled_weights", "micro_attention", 2,
          "3 cached positions, d_head = 4: weights softmax(q·k / 2), output the weighted sum of the values",
          probe_attention, judge_attention_public,
          inputs=lambda g: {"query": [1.0, -0.5, 2.0, 0.25],
                            "keys": [[0.5, 1.0, -1.0, 2.0], [1.5, -0.5, 0.75, 0.0], [-1.0, 0.5, 1.25, 1.0]],
                            "values": [[1.0, 2.0, 3.0, 4.0], [-1.0, 0.0, 1.0, 0.5], [0.25, -2.0, 0.5, 1.5]]}),
    check("ch00.micro_attention.single_position", "micro_attention", 1,
          "one cached position: weight exactly 1 and output = that value vector", probe_attention,
          judge_attention_single,
          inputs=lambda g: {"query": [0.3, -2.0], "keys": [[1.0, 4.0]], "values": [[0.7, -1.1]]}),
    check("ch00.micro_attention.matches_reference", "micro_attention", 2,
          "random heads: output, weights and every gradient match the reference",
          probe_attention, judge_attention_hidden, inputs=_random_attention, expect=_expect_attention, hidden=True),
    # the layer
    check("ch00.micro_block.zero_branch_identity", "micro_block", 2,
          "with WO and FC2 zero the layer returns its input exactly (residuals, no norm on the output)",
          probe_block, judge_block_zero_branch,
          inputs=lambda g: {**_block_inputs(3, 3), "zero": ["wo", "fc2"]}),
    check("ch00.micro_block.formula", "micro_block", 3,
          "3 positions, E = 8, 2 heads: outputs, cache and attention rows equal the pre-norm layer's formula",
          probe_block, judge_block_public, inputs=lambda g: _block_inputs(5, 3)),
    check("ch00.micro_block.matches_reference", "micro_block", 2,
          "random weights, inputs and head counts: outputs and attention rows match the reference",
          probe_block, judge_block_hidden, inputs=_random_block, expect=_expect_block, hidden=True),
    # forward
    check("ch00.micro_forward.ana_walk_through", "micro_forward", 2,
          "the names model has 4192 parameters; 'ana' = 5 ids, 4 scored positions: 27 logits each, "
          "and position 3 (target BOS) has 4 attention weights summing to 1",
          probe_forward, judge_forward_ana,
          inputs=lambda g: {"sizes": dict(NAMES), "seed": 0, "ids": ANA[:4], "tables": False}),
    check("ch00.micro_forward.formula", "micro_forward", 3,
          "2 layers, 5 positions: logits = LMHead · layers(RMSNorm(WTE[token] + WPE[pos])), no final norm",
          probe_forward, judge_forward_public,
          inputs=lambda g: {"sizes": dict(SMALL, n_layer=2), "seed": 4, "spread": 0.5, "ids": [6, 2, 0, 5, 2]}),
    check("ch00.micro_forward.pure_python", "micro_forward", 1,
          "micro.py uses no torch or numpy: every number is a Value", probe_pure_python, judge_pure_python,
          inputs=lambda g: {"sizes": dict(SMALL), "seed": 0}),
    check("ch00.micro_forward.matches_reference", "micro_forward", 2,
          "the names-sized model, 1 or 2 layers, random ids: logits and attention rows match the reference",
          probe_forward, judge_forward_hidden, inputs=_random_forward, expect=_expect_forward, hidden=True),
    # loss
    check("ch00.micro_loss.ana_mean_nll", "micro_loss", 3,
          "'ana' on the names model: the mean of -log softmax(logits)[next id] over its 4 positions, "
          "a Value whose gradients match finite differences",
          probe_loss, judge_loss_public,
          inputs=lambda g: {"sizes": dict(NAMES), "seed": 0, "spread": 0.3, "ids": ANA, "fd": [0, 700, 4000]}),
    check("ch00.micro_loss.window", "micro_loss", 2,
          "a 9-id document with block_size 6 scores min(T, len(ids) - 1) = 6 positions",
          probe_loss, judge_loss_public,
          inputs=lambda g: {"sizes": dict(SMALL), "seed": 2, "spread": 0.4, "ids": [6, 1, 2, 3, 0, 4, 5, 1, 6]}),
    check("ch00.micro_loss.matches_reference", "micro_loss", 2,
          "random documents (some longer than the window): loss and every parameter gradient match the reference",
          probe_loss, judge_loss_hidden, inputs=_random_loss, expect=_expect_loss, hidden=True),
    # Adam
    check("ch00.micro_adam.hand_computation", "micro_adam", 3,
          "two parameters, two steps (lr 0.1, betas 0.85/0.99, total_steps 4) equal the hand computation "
          "with bias correction and lr decay; grads reset, t counts steps",
          probe_adam, judge_adam_public,
          inputs=lambda g: {"start": [0.5, -1.0], "grads": [[0.2, -3.0], [-0.1, 1.0]],
                            "settings": {"lr": 0.1, "beta1": 0.85, "beta2": 0.99, "eps": 1e-8, "total_steps": 4}}),
    check("ch00.micro_adam.first_step_is_lr", "micro_adam", 1,
          "thanks to bias correction the first step moves a parameter by about lr, for gradients 1e-3 and 50",
          probe_adam_first_step, judge_adam_first_step, inputs=lambda g: {"gradients": [1e-3, 50.0], "lr": 0.1}),
    check("ch00.micro_adam.random_steps", "micro_adam", 2,
          "random parameters, gradients and settings: every step equals the hand computation",
          probe_adam, judge_adam_hidden, inputs=_random_adam, hidden=True),
    # sampling
    check("ch00.micro_sample.stops_at_bos", "micro_sample", 2,
          "a model that says a, b, BOS gives 'ab': BOS at position 0, each id fed back, stop at BOS",
          probe_sample_script, judge_sample_bos,
          inputs=lambda g: {"script": [0, 1, 26, 2, 3], "letters": 26, "block_size": 16}),
    check("ch00.micro_sample.stops_at_block_size", "micro_sample", 1,
          "a model that never says BOS stops after block_size positions",
          probe_sample_script, judge_sample_block_size,
          inputs=lambda g: {"script": [], "letters": 26, "block_size": 5}),
    check("ch00.micro_sample.seeded", "micro_sample", 1,
          "the same seed gives the same name; one rng gives different names",
          probe_sample_seeded, judge_sample_seeded,
          inputs=lambda g: {"sizes": dict(SMALL), "seed": 1, "letters": 6}),
    check("ch00.micro_sample.temperature", "micro_sample", 2,
          "p(a) = 3/4 at temperature 1 becomes 9/10 at temperature 0.5 (softmax(logits / T)), over 600 draws",
          probe_sample_temperature, judge_sample_temperature,
          inputs=lambda g: {"seed": 5, "temperature": 0.5, "draws": 600}),
    check("ch00.micro_sample.temperature_reseeded", "micro_sample", 1,
          "the same with a random seed",
          probe_sample_temperature, judge_sample_temperature,
          inputs=lambda g: {"seed": _random_seed(g), "temperature": 0.5, "draws": 600}, hidden=True),
]
