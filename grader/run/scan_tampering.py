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

from grader.parsing import parse
from grader.run.scan_calls import dotted_name, import_aliases

# The import machinery is where the worker's packages live (its finders hold their
# sources), so none of it belongs in a submission either.
FORBIDDEN_MODULES = {"grader", "zygote", "ctypes", "inspect", "_ctypes", "cffi", "_frozen_importlib",
                     "_frozen_importlib_external", "_imp", "imp", "pkgutil", "zipimport", "linecache", "marshal", "dis"}
FORBIDDEN_NAMES = {"__import__", "eval", "exec", "compile", "globals", "breakpoint", "__loader__", "__spec__"}
FORBIDDEN_DOTTED = {"sys.modules", "sys._getframe", "sys.settrace", "sys.setprofile", "sys._current_frames",
                    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "importlib.import_module",
                    "importlib.reload", "threading.settrace", "os.kill", "os.killpg", "signal.pthread_kill",
                    "resource.setrlimit", "resource.prlimit", "os.fork", "os.forkpty", "subprocess",
                    "multiprocessing", "sys.meta_path", "sys.path_hooks", "sys.path_importer_cache", "importlib"}
# A process of its own would compute outside every rule of the task (a fresh interpreter
# has a clean torch), and a terminal is a way to talk to one: the sandbox refuses both
# (grader/run/inside/syscall_filter.py), and the scan names them before anything runs.
PROCESS_MODULES = {"subprocess", "multiprocessing", "pty", "posix", "_posixsubprocess", "concurrent.futures.process",
                   "asyncio.subprocess"}
PROCESS_CALLS = {f"os.{name}" for name in (
    "fork", "forkpty", "openpty", "login_tty", "posix_spawn", "posix_spawnp", "system", "popen", "execv", "execve",
    "execl", "execle", "execlp", "execlpe", "execvp", "execvpe", "spawnv", "spawnve", "spawnl", "spawnle", "spawnvp",
    "spawnvpe", "spawnlp", "spawnlpe", "startfile")} | {"asyncio.create_subprocess_exec",
                                                         "asyncio.create_subprocess_shell",
                                                         "concurrent.futures.ProcessPoolExecutor"}
FORBIDDEN_DOTTED |= PROCESS_MODULES | PROCESS_CALLS
FORBIDDEN_MODULES |= {"pty", "posix", "_posixsubprocess"}
STARTS_A_PROCESS = "starts a process: your code must compute in the process the grader gave it"
# The course's own data.py looks a package up with importlib.util.find_spec; that much
# of importlib stays allowed (what it finds is read through .origin, never .loader).
ALLOWED_DOTTED = {"importlib.util", "importlib.util.find_spec"}
FORBIDDEN_ATTRIBUTES = {"f_back", "f_globals", "f_locals", "f_builtins", "f_code", "tb_frame", "gi_frame",
                        "cr_frame", "ag_frame", "__code__", "__globals__", "__closure__", "__subclasses__",
                        "__builtins__", "__loader__", "__spec__", "loader", "co_consts", "co_code", "co_names",
                        "get_source", "get_code"}
# Strings that name the grader's modules, another process's memory or the import
# machinery (for getattr(module, "__loader__") and the like); prose that merely
# mentions "the grader" does not match.
FORBIDDEN_TEXT = re.compile(r"\bgrader[./]|zygote|/proc/|\bprobe_\w|__loader__|__spec__|meta_path|path_hooks|"
                            r"path_importer_cache|co_consts|__code__|__globals__")


def _forbidden_dotted(name: str) -> bool:
    return name not in ALLOWED_DOTTED and any(name == d or name.startswith(d + ".") for d in FORBIDDEN_DOTTED)


def _named(name: str, what: str) -> str:
    """What the scan reports of a hit: a call that would start a process says so."""
    starts = any(name == d or name.startswith(d + ".") for d in PROCESS_MODULES | PROCESS_CALLS)
    return f"{what} ({STARTS_A_PROCESS})" if starts else what


# What an import hit says when nothing else in its file names what the import binds: a
# line carried over from the file it was copied from. The module stays forbidden (a name
# can be reached without being spelt), but the student is told the one thing to do.
UNUSED = " (never used in this file)"


def _bound_names(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.asname or a.name.split(".")[0] for a in node.names]
    return [a.asname or a.name for a in node.names if a.name != "*"]


def _unused(node: ast.Import | ast.ImportFrom, used: set[str]) -> bool:
    names = _bound_names(node)
    return bool(names) and not any(name in used for name in names)


def scan_file(source: str) -> list[tuple[int, str]]:
    try:
        tree = parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []  # the worker reports the file as unloadable itself
    aliases, hits = import_aliases(tree), []
    nodes = list(ast.walk(tree))  # walked once: a walk costs more than the three passes over it
    used = {node.id for node in nodes if isinstance(node, ast.Name)}
    # Docstrings and other bare string statements are prose, never code.
    prose = {id(node.value) for node in nodes if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    for node in nodes:
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            hits += [(line, f"import {a.name}{UNUSED}" if _unused(node, used) and not _named(a.name, "")
                      else _named(a.name, f"import {a.name}"))
                     for a in node.names if a.name.split(".")[0] in FORBIDDEN_MODULES or _forbidden_dotted(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            full = [f"{node.module}.{a.name}" for a in node.names]
            if node.module.split(".")[0] in FORBIDDEN_MODULES or any(_forbidden_dotted(f) for f in full):
                starts = next((f for f in [node.module, *full] if _named(f, "") != ""), node.module)
                said = f"from {node.module} import ..."
                hits.append((line, f"{said}{UNUSED}" if _unused(node, used) and not _named(starts, "")
                             else _named(starts, said)))
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES and node.id not in aliases:
            hits.append((line, node.id))
        elif isinstance(node, ast.Attribute):
            if node.attr in FORBIDDEN_ATTRIBUTES:
                hits.append((line, f".{node.attr}"))
            dotted = dotted_name(node)
            if dotted:
                head, _, rest = dotted.partition(".")
                resolved = aliases.get(head, head) + (f".{rest}" if rest else "")
                if _forbidden_dotted(resolved):
                    hits.append((line, _named(resolved, dotted)))
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


def tampering_reason(hits: list[str]) -> str:
    """The sentence every check of a submission the scan stopped carries: the first place,
    and what to do about it."""
    first = hits[0]
    more = f" (and {len(hits) - 1} more place{'s' if len(hits) > 2 else ''})" if len(hits) > 1 else ""
    if first.endswith(UNUSED):
        return (f"{first.removesuffix(UNUSED)}{more}: the grader forbids this module in a submission, and "
                f"nothing in the file uses it, so deleting that line is all you need to do (until then "
                f"every task is scored 'forbidden')")
    return (f"the submission reaches into the grader or the interpreter's machinery ({first}){more}; "
            f"no task may do that — remove it")
