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


# The public graphs are built with the Value constructor alone (each node's data, children
# and local derivatives written out here), never with the student's + and *: backward is
# judged on its own, and a wrong primitive is named on the primitive (its checks read the
# graph with the kit's own chain rule), not on backward. No helper here computes a + b or
# a * b: the worker holds the probes, and a probe's helper is within the submission's reach.


def _order_graph(Value, x0):
    """w = a * b with a = b * b + 1 and b = 3x: b is reached along a short and a long
    path, so b may push its grad to x only after the longer path has reached b."""
    x, three, one = Value(x0), Value(3.0), Value(1.0)
    b = Value(3.0 * x0, (x, three), (3.0, x0))
    c = Value(b.data * b.data, (b, b), (b.data, b.data))
    a = Value(c.data + 1.0, (c, one), (1.0, 1.0))
    return x, Value(a.data * b.data, (a, b), (b.data, a.data))


def probe_backward_reuse(ns):
    Value = ns.micro.Value
    x = Value(3.0)
    square = Value(9.0, (x, x), (3.0, 3.0))
    y = Value(12.0, (square, x), (1.0, 1.0))  # y = x*x + x: dy/dx = 2x + 1 = 7
    y.backward()
    first = {"x": x.grad, "root": y.grad}
    two = Value(2.0)
    Value(6.0, (x, two), (2.0, 3.0)).backward()  # x * 2: leaf grads accumulate across graphs, 7 + 2
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
    u, two = Value(x0), Value(2.0)
    z = Value(2.0 * x0, (u, two), (2.0, x0))
    Value(z.data * z.data, (z, z), (z.data, z.data)).backward()  # z reached twice: dw/du = 2z * 2 = 8u
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
    for step in range(depth):  # y = y + x * 1.0
        x_once = Value(1.0, (x, Value(1.0)), (1.0, 1.0))
        y = Value(step + 2.0, (y, x_once), (1.0, 1.0))
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
