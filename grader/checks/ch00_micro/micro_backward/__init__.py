"""Value.backward: the chain rule over the whole graph.

The graphs here reuse nodes (contributions must be added), reach a node along a short
and a long path (reverse topological order, each node once), run deeper than Python's
recursion limit (an explicit stack), and, hidden, are random mixes of every primitive
compared with the reference.
"""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.ch00_micro.common import close_enough, task_of

TASKS = [task_of("micro_backward", "Value.backward", "backward: the chain rule over the graph", walks_graph=True)]


# The public graphs are built with the Value constructor alone (its children and their
# local derivatives given), never with the student's + and *: backward is judged on its
# own, and a wrong primitive is named on the primitive (its checks read the graph with
# the kit's own chain rule), not on backward.


def _add(Value, a, b):
    b = b if isinstance(b, Value) else Value(b)
    return Value(a.data + b.data, (a, b), (1.0, 1.0))


def _mul(Value, a, b):
    b = b if isinstance(b, Value) else Value(b)
    return Value(a.data * b.data, (a, b), (b.data, a.data))


def _order_graph(Value, x0):
    """w = a * b with a = b * b + 1 and b = 3x: b is reached along a short and a long
    path, so b may push its grad to x only after the longer path has reached b."""
    x = Value(x0)
    b = _mul(Value, x, 3.0)
    c = _mul(Value, b, b)
    a = _add(Value, c, 1.0)
    return x, _mul(Value, a, b)


def probe_backward_reuse(ns):
    Value = ns.micro.Value
    x = Value(3.0)
    y = _add(Value, _mul(Value, x, x), x)  # y = x*x + x: dy/dx = 2x + 1 = 7
    y.backward()
    first = {"x": x.grad, "root": y.grad}
    _mul(Value, x, 2.0).backward()  # leaf grads accumulate across graphs: 7 + 2
    return {**first, "x_after_second": x.grad}


@check("reused_node", 2, "y = x*x + x at x = 3 gives x.grad = 7 (contributions added); a second backward adds 2 more",
       probe=probe_backward_reuse)
def reused_node(out, inputs, expected):
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
    z = _mul(Value, u, 2.0)
    _mul(Value, z, z).backward()  # z reached twice: dw/du = 2z * 2 = 8u
    return {"w": w.data, "x_grad": x.grad, "shared": u.grad}


@check("topological_order", 2,
       "a node reached along a short and a long path, and a node reached twice, get exact gradients",
       probe=probe_backward_order, inputs=lambda g: {"x0": 0.7})
def topological_order(out, inputs, expected):
    x0 = inputs["x0"]
    b = 3 * x0
    right = 3 * (3 * b * b + 1)  # w = b**3 + b
    if close_enough(out["shared"], 2 * 8 * x0, 1e-12):
        return ("in w = z*z with z = 2u, u gets its gradient twice: z is listed twice in the order and pushes "
                "twice; put each node in the topological order only once (a visited set)")
    if not close_enough(out["shared"], 8 * x0, 1e-12):
        return f"z = 2u, w = z*z should give u.grad = 8u = {8 * x0!r}, got {out['shared']!r}"
    if not close_enough(out["x_grad"], right, 1e-12):
        return ("in w = a*b with a = b*b + 1, b = 3x, x's gradient misses part of the longer path through a: "
                "a node may push its grad to its children only after every node that uses it has pushed to it; "
                "visit the nodes in reverse topological order")
    return None


def probe_backward_deep(ns, depth):
    Value = ns.micro.Value
    x = Value(1.0)
    y = x
    for _ in range(depth):
        y = _add(Value, y, _mul(Value, x, 1.0))
    try:
        y.backward()
    except RecursionError:
        return {"recursion": True}
    return {"x": x.grad}


@check("deep_graph", 1, "a chain 6000 nodes deep (beyond the recursion limit) gives x.grad = 3001",
       probe=probe_backward_deep, inputs=lambda g: {"depth": 3000})
def deep_graph(out, inputs, expected):
    depth = inputs["depth"]
    if out.get("recursion"):
        return (f"backward hit Python's recursion limit on a chain {2 * depth} nodes deep: walk the graph with "
                f"an explicit stack (a list you push and pop), not recursion")
    if out["x"] != depth + 1.0:
        return f"a chain y = y + x*1.0 repeated {depth} times should give x.grad = {depth + 1}, got {out['x']!r}"
    return None
