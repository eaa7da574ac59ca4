"""The hidden checks of the task micro_backward."""

from __future__ import annotations

import random

from grader.checks._api import check
from grader.checks.ch00_micro.common import all_close, off_by
from grader.checks.ch00_micro.hidden.common import random_seed


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


@check("random_graph", 2, "random graphs of every primitive with reused nodes: leaf gradients match the reference",
       probe=probe_backward_random, inputs=lambda g: {"seed": random_seed(g)}, expect=_expect_backward_random,
       hidden=True)
def random_graph(out, inputs, expected):
    if all_close(out["grads"], expected, 1e-10):
        return None
    return (f"the leaf gradients of a random graph (with reused nodes) are off by up to "
            f"{off_by(out['grads'], expected):.3g}: every contribution must be added, in reverse topological order")
