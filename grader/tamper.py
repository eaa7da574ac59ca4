"""Code that reaches into the grader or the interpreter's machinery has no place in a
course submission, and it is how a submission would try to forge what the sandboxed
probes report (patching a probe module, rewriting the reply, reading other processes).
This scan looks at every file of the upload; any hit scores the whole submission
'forbidden', with the line to remove.

It is one layer of two: the worker also checks, before every answer, that the probe
code it runs is the code it imported before any student code ran.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache

from grader.forbidden import dotted_name, import_aliases

FORBIDDEN_MODULES = {"grader", "zygote", "ctypes", "inspect", "_ctypes", "cffi"}
FORBIDDEN_NAMES = {"__import__", "eval", "exec", "compile", "globals", "breakpoint"}
FORBIDDEN_DOTTED = {"sys.modules", "sys._getframe", "sys.settrace", "sys.setprofile", "sys._current_frames",
                    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "importlib.import_module",
                    "importlib.reload", "threading.settrace", "os.kill", "os.killpg", "signal.pthread_kill",
                    "resource.setrlimit", "resource.prlimit", "os.fork", "os.forkpty", "subprocess",
                    "multiprocessing"}
FORBIDDEN_ATTRIBUTES = {"f_back", "f_globals", "f_locals", "f_builtins", "tb_frame", "gi_frame", "cr_frame",
                        "ag_frame", "__code__", "__globals__", "__closure__", "__subclasses__", "__builtins__"}
# Strings that name the grader's modules or another process's memory; prose that merely
# mentions "the grader" does not match.
FORBIDDEN_TEXT = re.compile(r"\bgrader[./]|zygote|/proc/|\bprobe_\w")


def scan_file(source: str) -> list[tuple[int, str]]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []  # the worker reports the file as unloadable itself
    aliases, hits = import_aliases(tree), []
    # Docstrings and other bare string statements are prose, never code.
    prose = {id(node.value) for node in ast.walk(tree)
             if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            hits += [(line, f"import {a.name}") for a in node.names if a.name.split(".")[0] in FORBIDDEN_MODULES
                     or any(a.name == d or a.name.startswith(d + ".") for d in FORBIDDEN_DOTTED)]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            full = [f"{node.module}.{a.name}" for a in node.names]
            if node.module.split(".")[0] in FORBIDDEN_MODULES or any(
                    f == d or f.startswith(d + ".") or node.module == d for f in full for d in FORBIDDEN_DOTTED):
                hits.append((line, f"from {node.module} import ..."))
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES and node.id not in aliases:
            hits.append((line, node.id))
        elif isinstance(node, ast.Attribute):
            if node.attr in FORBIDDEN_ATTRIBUTES:
                hits.append((line, f".{node.attr}"))
            dotted = dotted_name(node)
            if dotted:
                head, _, rest = dotted.partition(".")
                resolved = aliases.get(head, head) + (f".{rest}" if rest else "")
                if any(resolved == d or resolved.startswith(d + ".") for d in FORBIDDEN_DOTTED):
                    hits.append((line, dotted))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            if FORBIDDEN_TEXT.search(node.value.lower()):
                hits.append((line, repr(node.value)[:60]))
    return sorted(set(hits))


@lru_cache(maxsize=64)
def _scan_items(items: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    found = []
    for path, source in items:
        found += [f"{path} line {line}: {what}" for line, what in scan_file(source)]
    return tuple(found)


def scan_submission(sources: dict[str, str]) -> list[str]:
    """Every place the upload reaches into the grader or the interpreter, as 'file line N: what'."""
    return list(_scan_items(tuple(sorted(sources.items()))))
