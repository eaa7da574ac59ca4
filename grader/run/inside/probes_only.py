"""What of the checks stays in the sandbox: the probes, and what they use.

The zygote imports every check module (the hidden checks' modules under a chapter's
hidden/ too), because probes live beside their judges. A judge's helpers are oracles (a
LayerNorm written out, a float64 twin of a model, AdamW by hand), and a submission that
reached one through `sys.modules` would pass its task without doing it. So before any
submission is loaded, every function and class of `grader.checks` that no probe can
reach is replaced by one that refuses, in the module that defines it and in every check
module that imported it (a hidden module imports its public module's helpers), and the
declared checks (which hold the judges) are forgotten.
"""

from __future__ import annotations

import sys
import types

from grader.run.inside.sealed import nested_codes

CHECKS = "grader.checks"
DECLARED = "__declared_checks__"


def import_check_modules() -> None:
    """Imports every check module, public and hidden, as probes live beside their judges;
    never a task's mutants (the kit's proof of its checks, which the sandbox does not hold)."""
    import importlib
    import pkgutil

    import grader.checks

    for info in pkgutil.walk_packages(grader.checks.__path__, "grader.checks."):
        if info.name.rsplit(".", 1)[-1] != "mutants":
            importlib.import_module(info.name)


class GraderOnly(RuntimeError):
    """A submission called a part of the grader that only judges use."""


def _check_modules() -> dict[str, types.ModuleType]:
    return {name: module for name, module in list(sys.modules.items())
            if module is not None and (name == CHECKS or name.startswith(CHECKS + "."))}


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def reachable_from_probes(modules: dict[str, types.ModuleType]) -> set[int]:
    """ids of the functions and classes of the check modules that some probe can call:
    what a function's code names (as a global, or as an attribute of a check module it
    imported), its defaults and its closure, and a class's whole body and bases."""
    def ours(value) -> bool:
        return callable(value) and getattr(value, "__module__", None) in modules

    todo = [d.probe for module in modules.values() for d in vars(module).get(DECLARED, [])]
    seen: set[int] = set()
    while todo:
        value = todo.pop()
        if id(value) in seen or not ours(value):
            continue
        seen.add(id(value))
        if isinstance(value, type):
            todo.extend(vars(value).values())
            todo.extend(base for base in value.__mro__[1:] if ours(base))
        function = getattr(value, "__func__", value)
        if not isinstance(function, types.FunctionType):
            continue
        todo.extend(function.__defaults__ or ())
        todo.extend((function.__kwdefaults__ or {}).values())
        todo.extend(cell.cell_contents for cell in function.__closure__ or () if _filled(cell))
        names = {name for code in nested_codes(function.__code__) for name in code.co_names}
        scope = function.__globals__
        for space in [scope] + [vars(v) for v in scope.values()
                                if isinstance(v, types.ModuleType) and v.__name__ in modules]:
            todo.extend(space[name] for name in names if name in space)
    return seen


def _refuse(name: str):
    def refused(*args, **kwargs):
        raise GraderOnly(f"{name} is the grader's own code: a submission may not call it")
    refused.__qualname__ = refused.__name__ = name.rsplit(".", 1)[-1]
    return refused


def keep_only_what_probes_use() -> list[str]:
    """Replace what no probe reaches; returns the names replaced."""
    modules = _check_modules()
    keep = reachable_from_probes(modules)
    replaced = []
    for module_name, module in modules.items():
        for attr, value in list(vars(module).items()):
            if callable(value) and getattr(value, "__module__", None) in modules and id(value) not in keep:
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
