"""What chapter 00's task modules share. micro.py is plain Python: the probes hand back
floats and lists of floats (a Value's .data and .grad), never Value objects, and the
judges compare them with what a right (or a known wrong) implementation gives, which
on the public checks' inputs is data the kit computed (grader/checks/facts.py, with
the float oracles of hidden/oracles.py). Below: the tasks' common Task fields, float
comparisons, the probe and judge the six Value operations share, the probe RMSNorm and
softmax share, and the small MicroGPT the model-level checks build with a fixed seed.
"""

from __future__ import annotations

import math
import random

from grader.checks._api import Task, constant, small_offset
from grader.checks.confusions import confusion, formula_confusion


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


def task_of(name, qualname, title, walks_graph=False, numbers_only=False):
    return Task(name, "micro", qualname, title, forbidden=NO_TORCH, walks_graph=walks_graph,
                numbers_only=numbers_only)


# ----------------------------------------------------------------------- helpers


def is_number(x) -> bool:
    """A finite float, or an int within the floats' range (math.isfinite raises past it)."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return False
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


def close_enough(a: float, b: float, tol: float = TOL) -> bool:
    return is_number(a) and abs(a - b) <= tol * max(1.0, abs(b))


def flat_of(value):
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from flat_of(item)
    else:
        yield value


def shape_of(value):
    return [len(value), *(shape_of(value[0]) if value and isinstance(value[0], (list, tuple)) else [])] \
        if isinstance(value, (list, tuple)) else []


def all_close(actual, expected, tol: float = TOL) -> bool:
    """Nested lists of numbers, equal in structure and to tol (relative above 1)."""
    if isinstance(expected, (list, tuple)):
        return (isinstance(actual, (list, tuple)) and len(actual) == len(expected)
                and all(all_close(a, e, tol) for a, e in zip(actual, expected)))
    return close_enough(actual, expected, tol)


def off_by(actual, expected) -> float:
    """The largest absolute difference of two nested lists of the same structure."""
    return max((abs(a - e) for a, e in zip(flat_of(actual), flat_of(expected))), default=0.0)


def values_of(ns, numbers):
    return [ns.micro.Value(x) for x in numbers]


def data_of(values, what="the result"):
    """Floats from a list of Values; a TypeError names what was returned instead."""
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{what} should be a list of Values, got {type(values).__name__}")
    out = []
    for v in values:
        if not hasattr(v, "data"):
            raise TypeError(f"{what} should be a list of Values, found a {type(v).__name__}")
        out.append(float(v.data))
    return out


def kind_of(value) -> str:
    return type(value).__name__


# ------------------------------------------------------ the Value's operations
# One probe serves a + b, a * b, a ** k, exp, log and relu: it builds Values, applies the
# op and returns the value and the graph it built, as data. The judge runs the kit's own
# chain rule over that graph (never the student's backward, which is a task of its own),
# compares the value and the input gradients with the hand-computed truth and names the
# classic mistake a wrong gradient reproduces; on the public checks' inputs both are data
# the kit computed.


# The one-input methods are called by name (getattr), and so spelt in these tables: the
# kit's reading of which parts a task's checks run (grader.run.dependencies) then sees
# exp's probe run exp alone, not log and relu beside it.
_METHODS = ("exp", "log", "relu")
_EXPRESSIONS = {
    "add": "a + b", "add_const": "a + 2.5", "radd": "2.5 + a", "add_self": "a + a",
    "mul": "a * b", "mul_const": "a * -3.0", "rmul": "-3.0 * a", "square": "a * a",
    "pow": "a ** k", **{method: f"a.{method}()" for method in _METHODS},
}


def _apply_op(op, xs, k):
    a = xs[0]
    if op in _METHODS:
        return getattr(a, op)()
    return {
        "add": lambda: a + xs[1], "add_const": lambda: a + 2.5, "radd": lambda: 2.5 + a, "add_self": lambda: a + a,
        "mul": lambda: a * xs[1], "mul_const": lambda: a * -3.0, "rmul": lambda: -3.0 * a, "square": lambda: a * a,
        "pow": lambda: a**k,
    }[op]()


GRAPH_NODES = 10_000  # far more than any one operation's result is built of


def graph_of(root, inputs) -> dict:
    """The graph below an operation's result as plain data, for the judge's own chain rule
    (grads_of): each node's children, by number, and its local gradients, nodes numbered
    as met from the root outwards, and the number of each input. The numbers say nothing
    of the order a backward pass needs (a node may be met before a node that uses it), and
    nothing of the graph but its shape is left here: the worker holds no backward pass a
    submission could call instead of writing its own."""
    number, nodes, queue = {id(root): 0}, [], [root]
    while len(nodes) < len(queue):
        node = queue[len(nodes)]
        children = []
        for child in node._children:
            if id(child) not in number:
                if len(queue) == GRAPH_NODES:
                    return {"nodes_over": GRAPH_NODES}
                number[id(child)] = len(queue)
                queue.append(child)
            children.append(number[id(child)])
        nodes.append([children, [float(local) for local in node._local_grads]])
    return {"nodes": nodes, "inputs": [number.get(id(x)) for x in inputs]}


def grads_of(graph: dict) -> list:
    """The inputs' gradients of the root of a graph graph_of wrote, by the chain rule, in
    the grader's own process: so an operation's local derivatives are judged without the
    student's `backward` (a task of its own), and a wrong derivative is blamed on the
    operation, never on a right backward."""
    nodes = graph["nodes"]
    order, done, stack = [], set(), [(0, False)]
    while stack:  # children before parents, without recursion
        at, below_done = stack.pop()
        if below_done:
            order.append(at)
        elif at not in done:
            done.add(at)
            stack.append((at, True))
            stack += [(child, False) for child in nodes[at][0]]
    grads = [0.0] * len(nodes)
    grads[0] = 1.0
    for at in reversed(order):
        for child, local in zip(*nodes[at]):
            grads[child] += local * grads[at]
    return [0.0 if at is None else grads[at] for at in graph["inputs"]]


def probe_value_ops(ns, cases):
    """Builds each case's Values, applies its operation, and returns the value and the graph
    it built (graph_of), whose chain rule the judge runs (grads_of)."""
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
        out.append({"data": y.data, "graph": graph_of(y, xs)})
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
    """Compares each case with the hand-computed truth and names the classic mistake a wrong
    gradient reproduces. facts: per case, the value and gradients ("value", "grads") and the
    classic mistakes' gradients ("mistakes", [(what to tell the student, gradients)]), data
    the kit computed on a public check's inputs."""
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
        if "nodes_over" in got["graph"]:
            return (f"{expr}{where} built a graph of more than {GRAPH_NODES:,} Values: one operation makes one "
                    f"new Value, whose children are its operands")
        got = {**got, "grads": grads_of(got["graph"])}
        value, grads = said["value"], said["grads"]
        if op == "relu" and x[0] < 0 and close_enough(got["data"], x[0]):
            return f"relu of a negative input{where} gave the input back: relu(x) = max(0, x)"
        if not close_enough(got["data"], value, 1e-12):
            if reveal and (slip := _value_confusion(op, x, k, got["data"])):
                return f"{expr}{where}: {slip}"
            if reveal:
                return f"{expr}{where} gave {got['data']!r}, expected {value!r}{small_offset(got['data'], value)}"
            return f"the value of {expr} is off by {abs(got['data'] - value):.3g} for some inputs"
        if not all_close(got["grads"], grads, 1e-12):
            for text, wrong in said["mistakes"]:
                if all_close(got["grads"], wrong, NEAR):
                    return f"{expr}{where}: {constant(text)}"  # one of the kit's sentences, whichever input
            if reveal:
                return (f"after ({expr}).backward(){where}, the input gradient(s) are {got['grads']!r}; "
                        f"expected {grads!r}")
            return (f"after ({expr}).backward() the input gradient is off by "
                    f"{off_by(got['grads'], grads):.3g} for some inputs")
    return None


def value_cases(op, *xs, k=None):
    return [{"op": op, "x": list(x), **({"k": k} if k is not None else {})} for x in xs]


# ------------------------------------------------- functions of a list of Values


def grid_confusion(formula, data, facts) -> "str | None":
    """The parts a wrong output was built with, among the other choices for the formula's
    parts whose outputs the facts hold ("grid", [(parts, values)]), in the words of
    grader.checks.confusions."""
    for parts, wrong in facts.get("grid") or ():
        if all_close(data, wrong, NEAR) and (said := formula_confusion(formula, parts)):
            return said
    return None


def probe_vector_function(ns, name, numbers, w, error, key):
    """Call micro.<name> on Values of `numbers`: its data, whether it returned Values, and
    with weights w the inputs' gradients of sum(w·out). `error` raised is the answer {key: ...}."""
    inputs = values_of(ns, numbers)
    try:
        out = getattr(ns.micro, name)(inputs)
    except error as raised:
        return {key: str(raised)}
    result = {"data": data_of(out, f"{name}'s result"), "values": all(isinstance(v, ns.micro.Value) for v in out)}
    if w is not None:
        ns.micro.vsum([wi * v for wi, v in zip(w, out)]).backward()
        result["grads"] = [v.grad for v in inputs]
    return result


# ---------------------------------------------------------------- the model


SMALL = {"vocab_size": 7, "n_embd": 8, "n_layer": 1, "block_size": 6, "n_head": 2, "mlp_ratio": 2}
NAMES = {"vocab_size": 27, "n_embd": 16, "n_layer": 1, "block_size": 16, "n_head": 4, "mlp_ratio": 4}
ANA = [26, 0, 13, 0, 26]  # 'ana' framed by BOS = 26 (chapter 01's tokenizer on the names list)


def model_of(micro, sizes, seed, spread=None):
    """A MicroGPT; with spread, weights redrawn with a larger std so attention is far from uniform."""
    model = micro.MicroGPT(**sizes, seed=seed)
    if spread:
        rng = random.Random(seed + 1)
        for p in model.params:
            p.data = rng.gauss(0.0, spread)
    return model


def micro_tables(model):
    return {name: [[p.data for p in row] for row in table] for name, table in model.state.items()}


def tables_fingerprint(tables) -> "dict | None":
    """Per weight table: its rows, its entries, and three sums of the entries (plain, of
    squares, and weighted by their place in the table). A table drawn otherwise, in
    another order or shape, changes them far beyond a tolerance; drawn by the same
    code on another platform, where random.gauss (built on libm's log, cos and sin)
    may land an ulp away, they move only in their last bits. None for tables that are
    not lists of rows of numbers (or of numbers too large to sum as floats)."""
    try:
        fingerprint = {}
        for name, rows in tables.items():
            flat = [x for row in rows for x in row]
            if not all(is_number(x) for x in flat):
                return None
            n = len(flat)
            fingerprint[str(name)] = [len(rows), n, math.fsum(flat), math.fsum(x * x for x in flat),
                                      math.fsum((k + 1) / n * x for k, x in enumerate(flat))]
        return fingerprint
    except (AttributeError, TypeError, OverflowError):  # an int whose square no float holds
        return None


def same_tables(fingerprint, expected) -> bool:
    """Two fingerprints of tables_fingerprint: the same tables, counts exactly and sums to TOL."""
    if not isinstance(fingerprint, dict) or fingerprint.keys() != expected.keys():
        return False
    return all(got[:2] == want[:2] and all_close(got[2:], want[2:], TOL)
               for got, want in ((fingerprint[name], expected[name]) for name in expected))


# The public facts are what MicroGPT(**sizes, seed=seed) computes; a model whose own
# __init__ drew other weights cannot be judged by them. Which weights were drawn is
# compared to a tolerance: the same seed gives weights an ulp apart on another libm.
WEIGHTS_CHANGED = ("the model's weights are not the ones MicroGPT draws from its seed: keep MicroGPT.__init__ as "
                   "given (its tables, in their order); this check compares with what that model computes")


def weights_changed(out, facts) -> bool:
    return "tables" in out and not same_tables(tables_fingerprint(out["tables"]), facts["tables"])
