"""Static scan for the library call a task teaches the student to write.

The student's function is found by qualname in their source; every name it uses is
resolved through the module's imports (`import torch.nn.functional as F`,
`from torch.nn.functional import gelu as g`), so `F.gelu(x)` and `g(x)` are caught
while a student's own helper called `gelu` is not. The sandbox also sets tripwires
on the same functions to catch calls the scan cannot see (getattr tricks).
"""

from __future__ import annotations

import ast
from functools import lru_cache


def _imports(tree: ast.Module) -> dict[str, str]:
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


def _dotted(node) -> str | None:
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
    return name.replace("torch.nn.modules.normalization.", "torch.nn.").replace("torch.nn.modules.activation.", "torch.nn.")


@lru_cache(maxsize=32)
def _parse(source: str):
    # Every task of a module scans the same file: parse it once.
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    return tree, _imports(tree)


def scan(source: str, qualname: str, forbidden: tuple[str, ...], forbidden_methods: tuple[str, ...] = ()) -> list[str]:
    """The forbidden uses in the function `qualname` of `source`, as 'line N: name'."""
    if not forbidden and not forbidden_methods:
        return []
    parsed = _parse(source)
    if parsed is None:
        return []
    tree, aliases = parsed
    function = _find(tree, qualname)
    if function is None:
        return []
    hits = []
    for node in ast.walk(function):
        if isinstance(node, (ast.Attribute, ast.Name)):
            dotted = _dotted(node)
            if dotted is None:
                continue
            head, _, rest = dotted.partition(".")
            resolved = _normal(aliases.get(head, head) + (f".{rest}" if rest else ""))
            if any(resolved == f or resolved.startswith(f + ".") for f in forbidden):
                hits.append(f"line {node.lineno}: {dotted}")
        if isinstance(node, ast.Attribute) and node.attr in forbidden_methods:
            hits.append(f"line {node.lineno}: .{node.attr}")
    return sorted(set(hits), key=lambda h: int(h.split()[1].rstrip(":")))
