"""What of the checks stays in the sandbox: the probes, and what they use.

The zygote imports every check module, because probes live beside their judges. A
judge's helpers are oracles (a LayerNorm written out, a float64 twin of a model, AdamW
by hand), and a submission that reached one through `sys.modules` would pass its task
without doing it. So before any submission is loaded, every function and class of
`grader.checks` that no probe can reach is replaced by one that refuses, and the
declared checks (which hold the judges) are forgotten.
"""

from __future__ import annotations

import dis
import sys
import types

CHECKS = "grader.checks"
DECLARED = "__declared_checks__"


class GraderOnly(RuntimeError):
    """A submission called a part of the grader that only judges use."""


def _check_modules() -> dict[str, types.ModuleType]:
    return {name: module for name, module in list(sys.modules.items())
            if module is not None and (name == CHECKS or name.startswith(CHECKS + "."))}


def _ours(value) -> bool:
    return getattr(value, "__module__", None) in _check_modules() if callable(value) else False


def _codes(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _referenced(function) -> list:
    """What a function of the checks can reach by name: the globals its code reads (and
    their attributes, where a global is a check module), its defaults and its closure."""
    found = list(function.__defaults__ or ()) + list((function.__kwdefaults__ or {}).values())
    found += [cell.cell_contents for cell in (function.__closure__ or ()) if _filled(cell)]
    names = {ins.argval for code in _codes(function.__code__) for ins in dis.get_instructions(code)
             if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_ATTR", "LOAD_METHOD", "IMPORT_FROM")}
    scope = function.__globals__
    found += [scope[name] for name in names if name in scope]
    imported = [value for value in scope.values()
                if isinstance(value, types.ModuleType) and value.__name__ in _check_modules()]
    found += [vars(module)[name] for module in imported for name in names if name in vars(module)]
    return found


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def reachable_from_probes() -> set[int]:
    """ids of the functions and classes of the checks that some probe can call."""
    todo = [d.probe for module in _check_modules().values() for d in vars(module).get(DECLARED, [])]
    seen: set[int] = set()
    while todo:
        value = todo.pop()
        if id(value) in seen or not _ours(value):
            continue
        seen.add(id(value))
        if isinstance(value, type):
            todo.extend(vars(value).values())
            todo.extend(base for base in value.__mro__[1:] if _ours(base))
        function = getattr(value, "__func__", value)
        if isinstance(function, types.FunctionType):
            todo.extend(_referenced(function))
    return seen


def _refuse(name: str):
    def refused(*args, **kwargs):
        raise GraderOnly(f"{name} is the grader's own code: a submission may not call it")
    refused.__qualname__ = refused.__name__ = name.rsplit(".", 1)[-1]
    return refused


def keep_only_what_probes_use() -> list[str]:
    """Replace what no probe reaches; returns the names replaced."""
    keep = reachable_from_probes()
    replaced = []
    for module_name, module in _check_modules().items():
        for attr, value in list(vars(module).items()):
            if _ours(value) and getattr(value, "__module__", None) == module_name and id(value) not in keep:
                setattr(module, attr, _refuse(f"{module_name}.{attr}"))
                replaced.append(f"{module_name}.{attr}")
        if DECLARED in vars(module):
            setattr(module, DECLARED, [])
    catalogue = sys.modules.get(f"{CHECKS}.catalogue")
    for cached in ("chapters", "tasks", "chapter_of_task"):
        clear = getattr(getattr(catalogue, cached, None), "cache_clear", None)
        if clear is not None:
            clear()
    return replaced
