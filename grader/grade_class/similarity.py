"""Which uploads' graded functions look alike, for a person to review (never a verdict).

Each graded function is reduced to the shape of its syntax tree: node kinds, operators,
attribute names and constant types, with every identifier the author chose (variables,
arguments) and every comment or docstring gone, so renaming and reformatting change
nothing. Overlapping runs of that sequence are hashed; runs the reference or the stub
copy also hold are dropped, so writing the expected solution, or leaving the stub,
makes no two uploads alike.
"""

from __future__ import annotations

import ast
import hashlib
from functools import lru_cache
from itertools import combinations

from grader import KIT_ROOT
from grader.checks import catalogue
from grader.parsing import parse
from grader.regions import package_sources

ROOT = KIT_ROOT
RUN = 6  # tokens per hashed run: long enough to be specific, short enough to survive small edits
MIN_RUNS = 8  # functions with fewer distinctive runs say too little to compare


def _function(tree: ast.AST, qualname: str):
    scope = tree.body
    for part in qualname.split("."):
        found = next((node for node in scope if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                   ast.ClassDef)) and node.name == part), None)
        if found is None:
            return None
        scope = found.body
    return found


def _tokens(function) -> list[str]:
    tokens = []
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # the docstring
    for statement in body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Name):
                tokens.append("name")
            elif isinstance(node, ast.Attribute):
                tokens.append(f".{node.attr}")
            elif isinstance(node, ast.Constant):
                tokens.append(f"const:{type(node.value).__name__}")
            elif isinstance(node, (ast.expr_context, ast.arg, ast.arguments)):
                continue
            else:
                tokens.append(type(node).__name__)
    return tokens


def fingerprints(sources: dict[str, str]) -> dict[str, list[str]]:
    """Task -> the hashes of its function's runs; tasks whose function cannot be found
    or parsed are left out."""
    trees, found = {}, {}
    for task in catalogue.tasks().values():
        rel = f"{task.module}.py"
        if rel not in trees:
            try:
                trees[rel] = parse(sources.get(rel, ""))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                trees[rel] = None
        try:
            function = _function(trees[rel], task.qualname) if trees[rel] is not None else None
            tokens = _tokens(function) if function is not None else []
        except RecursionError:
            tokens = []
        runs = {hashlib.sha1("|".join(tokens[i:i + RUN]).encode()).hexdigest()[:12]
                for i in range(max(0, len(tokens) - RUN + 1))}
        if runs:
            found[task.name] = sorted(runs)
    return found


@lru_cache(maxsize=1)
def _common() -> dict[str, frozenset[str]]:
    """Runs every upload may share: the reference's and the stub's."""
    common: dict[str, set[str]] = {}
    for root in (ROOT / "solutions" / "hero_transformer", ROOT / "hero_transformer"):
        if (root / "__init__.py").exists():
            for task, runs in fingerprints(package_sources(root)).items():
                common.setdefault(task, set()).update(runs)
    return {task: frozenset(runs) for task, runs in common.items()}


def look_alikes(prints: dict[str, dict[str, list[str]]], threshold: float = 0.6,
                limit: int = 15) -> list[tuple[str, str, float, list[str]]]:
    """(upload a, upload b, similarity 0..1, the tasks they share) for the most alike
    pairs above threshold, most alike first."""
    common = _common()
    own = {who: {task: set(runs) - common.get(task, frozenset()) for task, runs in tasks.items()}
           for who, tasks in prints.items()}
    own = {who: {t: r for t, r in tasks.items() if len(r) >= MIN_RUNS} for who, tasks in own.items()}
    pairs = []
    for a, b in combinations(sorted(own), 2):
        shared_tasks = sorted(set(own[a]) & set(own[b]))
        both = sum(len(own[a][t] & own[b][t]) for t in shared_tasks)
        either = sum(len(own[a][t] | own[b][t]) for t in shared_tasks)
        if either and both / either >= threshold:
            alike = [t for t in shared_tasks if len(own[a][t] & own[b][t]) * 2 >= len(own[a][t] | own[b][t])]
            pairs.append((a, b, both / either, alike))
    pairs.sort(key=lambda p: (-p[2], p[0], p[1]))
    return pairs[:limit]
