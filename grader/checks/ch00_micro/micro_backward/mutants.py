"""Task micro_backward: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch00_micro.micro_backward import deep_graph, reused_node, topological_order
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("backward_overwrites", "micro_backward", patch("""
        - child.grad += local * node.grad
        + child.grad = local * node.grad
    """), reused_node, "added", "child.grad = instead of +="),
    mutant("backward_breadth_first", "micro_backward", """
        self.grad = 1.0
        queue, seen = [self], {self}
        while queue:
            node = queue.pop(0)
            for child, local in zip(node._children, node._local_grads):
                child.grad += local * node.grad
                if child not in seen:
                    seen.add(child)
                    queue.append(child)
    """, topological_order, "every node that uses it", "breadth-first instead of topological order"),
    mutant("backward_no_visited_set", "micro_backward", patch("""
        - if node in visited:
        -     continue
        - visited.add(node)
    """), topological_order, "only once", "a shared node pushes its grad twice"),
    mutant("backward_root_grad_not_set", "micro_backward", patch("""
        - self.grad = 1.0
    """), reused_node, "root", "the root's grad is never set to 1"),
    mutant("backward_recursive", "micro_backward", """
        order, visited = [], set()
        def build(node):
            if node not in visited:
                visited.add(node)
                for child in node._children:
                    build(child)
                order.append(node)
        build(self)
        self.grad = 1.0
        for node in reversed(order):
            for child, local in zip(node._children, node._local_grads):
                child.grad += local * node.grad
    """, deep_graph, "recursion", "recursion breaks on deep graphs"),
]

VARIANTS = [
    variant("backward_recursive_topological_sort", "micro_backward", """
        import sys
        order, visited = [], set()
        def build(node):
            if node not in visited:
                visited.add(node)
                for child in node._children:
                    build(child)
                order.append(node)
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 100_000))
        try:
            build(self)
        finally:
            sys.setrecursionlimit(limit)
        self.grad = 1.0
        for node in reversed(order):
            for child, local in zip(node._children, node._local_grads):
                child.grad += local * node.grad
    """, "micrograd's recursive topological sort (with the recursion limit raised)"),
    variant("backward_kahn_counting_parents", "micro_backward", """
        users, seen, stack = {}, {self}, [self]
        while stack:
            node = stack.pop()
            for child in node._children:
                users[child] = users.get(child, 0) + 1
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
        self.grad = 1.0
        ready = [self]
        while ready:
            node = ready.pop()
            for child, local in zip(node._children, node._local_grads):
                child.grad += local * node.grad
                users[child] -= 1
                if users[child] == 0:
                    ready.append(child)
    """, "Kahn's algorithm: a node is ready once all its users have pushed"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    '`=` instead of `+=` in backward': ('backward_overwrites',),
}
