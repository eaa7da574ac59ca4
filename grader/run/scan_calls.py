"""Static scan for the library call a task teaches the student to write.

The student's function is found by qualname in their source; every name it uses is
resolved through the module's imports (`import torch.nn.functional as F`,
`from torch.nn.functional import gelu as g`), so `F.gelu(x)` and `g(x)` are caught
while a student's own helper called `gelu` is not — but that helper is scanned too:
the scan follows every module-level function, assignment and class of the same file
that the graded function names (and the methods of its own class it reaches through
`self.`), transitively, skipping only the other graded functions (the grader replaces
those with the reference anyway).

Besides each task's own list, every scan forbids torch's back doors to the same
kernels (`torch.ops.aten.gelu`, `torch.native_layer_norm`, `torch._C._nn.gelu`,
`torch._VF`, autograd's `Variable._execution_engine`, any private `torch._x`): no
course task needs them. The sandbox also sets tripwires on the task's functions to
catch calls the scan cannot see (getattr tricks).
"""

from __future__ import annotations

import ast
from functools import lru_cache

from grader.parsing import parse

# Forbidden in every task: aliases of the library kernels behind the public functions.
EVERYWHERE = ("torch.ops", "torch._C", "torch._VF", "torch._refs", "torch._decomp", "torch._prims",
              "torch._prims_common", "torch._ops", "torch._dynamo", "torch._inductor", "torch._functorch",
              "torch.autograd.Variable._execution_engine", "torch.autograd.variable.Variable._execution_engine",
              "torch._C._nn", "torch._C._VariableFunctions")
EVERYWHERE_PREFIXES = ("torch.native_", "torch.Tensor.native_")  # torch.native_layer_norm, native_dropout, ...


def _module_wide(resolved: str) -> bool:
    if any(resolved == f or resolved.startswith(f + ".") for f in EVERYWHERE):
        return True
    if resolved.startswith(EVERYWHERE_PREFIXES):
        return True
    # Any private part of torch (torch._softmax, torch.nn.functional._in_projection,
    # torch.autograd.Variable._execution_engine): internals, never the course's answer.
    parts = resolved.split(".")
    return parts[0] == "torch" and any(p.startswith("_") and not (p.startswith("__") and p.endswith("__"))
                                       for p in parts[1:])


def import_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> the dotted name it was imported as (`F` -> `torch.nn.functional`)."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    aliases[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _find(tree: ast.AST, qualname: str):
    node = tree
    for part in qualname.split("."):
        node = next((child for child in ast.iter_child_nodes(node)
                     if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and child.name == part), None)
        if node is None:
            return None
    return node


def dotted_name(node) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _normal(name: str) -> str:
    # torch.nn.functional.gelu and torch.nn.functional.gelu via `from torch import nn`.
    # F.torch is torch itself: F.torch.ops.aten.gelu is torch.ops.aten.gelu.
    for alias in ("torch.nn.functional.torch.", "torch.functional.torch."):
        if name.startswith(alias):
            name = "torch." + name[len(alias):]
    return name.replace("torch.nn.modules.normalization.", "torch.nn.").replace("torch.nn.modules.activation.", "torch.nn.")


@lru_cache(maxsize=32)
def _parse(source: str):
    # Every task of a module scans the same file: parse it once.
    try:
        tree = parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return tree, import_aliases(tree)


def _graded_elsewhere(qualname: str) -> frozenset[str]:
    """The other graded functions of the module that `qualname` belongs to."""
    try:
        from grader.checks import catalogue

        tasks = list(catalogue.tasks().values())
    except Exception:  # noqa: BLE001 - the scan must work without the catalogue (tests, tools)
        return frozenset()
    module = next((t.module for t in tasks if t.qualname == qualname), None)
    return frozenset(t.qualname for t in tasks if t.module == module and t.qualname != qualname)


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _top_level(tree: ast.Module) -> dict[str, list[ast.AST]]:
    """Module-level names and the statements that define them (def, class, assignment)."""
    found: dict[str, list[ast.AST]] = {}
    for node in tree.body:
        if isinstance(node, _DEFINITIONS):
            found.setdefault(node.name, []).append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        found.setdefault(name.id, []).append(node)
    return found


def _reachable(tree: ast.Module, qualname: str, function: ast.AST, graded: frozenset[str]):
    """The graded function and the student's own code it reaches: (node, label) pairs."""
    top = _top_level(tree)
    owner = qualname.rsplit(".", 1)[0] if "." in qualname else None
    owner_class = _find(tree, owner) if owner else None

    def methods(cls: ast.ClassDef, prefix: str):
        for child in cls.body:
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{prefix}.{child.name}", child
            elif isinstance(child, ast.ClassDef):
                yield from methods(child, f"{prefix}.{child.name}")

    seen: set[int] = {id(function)}
    todo: list[tuple[ast.AST, str]] = [(function, qualname)]
    if isinstance(owner_class, ast.ClassDef):
        # Its own class's other methods set up what it uses (__init__ builds self.act, ...).
        for name, method in methods(owner_class, owner):
            if name not in graded and id(method) not in seen:
                seen.add(id(method))
                todo.append((method, name))
    while todo:
        node, label = todo.pop()
        yield node, label
        for inner in ast.walk(node):
            follow: list[tuple[ast.AST, str]] = []
            if isinstance(inner, ast.Name) and inner.id in top:
                for definition in top[inner.id]:
                    if isinstance(definition, ast.ClassDef):
                        follow += [(m, n) for n, m in methods(definition, definition.name)]
                        follow += [(s, definition.name) for s in definition.body
                                   if not isinstance(s, _DEFINITIONS)]
                        follow += [(b, definition.name) for b in definition.bases + definition.decorator_list]
                    else:
                        follow.append((definition, inner.id))
            elif (isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name)
                  and inner.value.id in ("self", "cls") and isinstance(owner_class, ast.ClassDef)):
                follow += [(m, n) for n, m in methods(owner_class, owner) if n == f"{owner}.{inner.attr}"]
            for target, name in follow:
                if name in graded or name == qualname or id(target) in seen:
                    continue
                seen.add(id(target))
                todo.append((target, name))


@lru_cache(maxsize=256)  # the arguments are strings and tuples; a class grades many alike
def scan(source: str, qualname: str, forbidden: tuple[str, ...], forbidden_methods: tuple[str, ...] = ()) -> list[str]:
    """The forbidden uses in the function `qualname` of `source` and in the student's own
    helpers it reaches, as 'line N: name'. Besides `forbidden`, torch's private and
    low-level aliases (EVERYWHERE) are forbidden in every task."""
    parsed = _parse(source)
    if parsed is None:
        return []
    tree, aliases = parsed
    function = _find(tree, qualname)
    if function is None:
        return []
    hits: dict[tuple[int, str], set[str]] = {}  # (line, where) -> names
    for root, label in _reachable(tree, qualname, function, _graded_elsewhere(qualname)):
        where = "" if root is function else f" (in {label}, which {qualname} uses)"
        for node in ast.walk(root):
            if isinstance(node, (ast.Attribute, ast.Name)):
                dotted = dotted_name(node)
                if dotted is None:
                    continue
                head, _, rest = dotted.partition(".")
                resolved = _normal(aliases.get(head, head) + (f".{rest}" if rest else ""))
                if any(resolved == f or resolved.startswith(f + ".") for f in forbidden) or _module_wide(resolved):
                    hits.setdefault((node.lineno, where), set()).add(dotted)
            if isinstance(node, ast.Attribute) and node.attr in forbidden_methods:
                hits.setdefault((node.lineno, where), set()).add(f".{node.attr}")
    found = []
    for (line, where), names in sorted(hits.items()):
        # torch.ops.aten.gelu, not also its prefixes torch.ops.aten and torch.ops.
        for name in sorted(names, key=lambda n: (-len(n), n)):
            if not any(other != name and other.startswith(name + ".") for other in names):
                found.append(f"line {line}: {name}{where}")
    return found
