"""The reference package (solutions/hero_transformer), held by the grader's process
only: its source text, the certified parts a worker receives (the regions of the tasks
the graded task builds on), compiled once, and the reference imported for computing
expected values."""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace

from grader import KIT_ROOT
from grader.run.inside import wire
from grader.run.inside.parts import CALL_ACROSS, NOT_HELD, REGION_FUNCTION
from grader.run.inside.sealed import guard_line
from grader.parsing import parse
from grader.regions import BEGIN, find_regions, package_sources, strip

REFERENCE_PACKAGE = KIT_ROOT / "solutions" / "hero_transformer"


class Reference:
    """The reference package, imported in the grader's process only."""

    def __init__(self, root: Path = REFERENCE_PACKAGE):
        self.root = root
        self.sources = package_sources(root)
        self._modules = None
        self._tasks_in = {rel: frozenset(region.task for region in find_regions(source, rel))
                          for rel, source in self.sources.items()}
        # Compiled once each: a module with every region kept, which most tasks' workers get,
        # and per task the certified parts as its workers get them.
        self._kept_code: dict[str, str] = {}
        self._certified: dict = {}
        self._modules_compiled: dict[tuple, str] = {}
        self._parts: dict[tuple, str] = {}  # (module, apart, back) -> its code for a parts' process

    @staticmethod
    def present() -> bool:
        """Whether solutions/ is here, asked without reading it (a grading asks before it
        boots the sandbox, which should start as early as it can)."""
        return (REFERENCE_PACKAGE / "__init__.py").exists()

    @classmethod
    @lru_cache(maxsize=1)
    def available(cls) -> "Reference | None":
        """The one reference a grading process uses (a class of uploads shares it), or
        None where solutions/ is absent, as in a student's copy of the course."""
        return cls() if cls.present() else None

    def without(self, task: str) -> dict[str, str]:
        """The certified parts' text for grading `task`: every region but its own."""
        return {rel: self._text(rel, frozenset({task})) for rel in self.sources}

    def _text(self, rel: str, tasks: frozenset[str]) -> str:
        return strip(self.sources[rel], set(tasks & self._tasks_in[rel]))

    def compiled_for(self, held, guards: "dict[str, tuple[str, ...]] | None" = None,
                     apart: frozenset = frozenset()) -> dict[str, str]:
        """The certified parts a worker receives: the regions of the tasks in `held`,
        every other region stripped (the worker installs none of them: the student's own
        code stands there). `guards` ({task: the tasks that may run it}): held regions
        that begin with a guard refusing any other task's probe (a worker shared by a
        group, holding a part only some of its tasks build on), grader/run/inside/sealed.py.
        `apart`: held parts that run in the parts' process (runs_apart): the worker gets
        their guard and a call across (grader/run/inside/parts.py), never their code."""
        guards = {task: tuple(sorted(users)) for task, users in (guards or {}).items() if task in held}
        apart = frozenset(apart) & frozenset(held)
        key = (frozenset(held), tuple(sorted(guards.items())), apart)
        if key not in self._certified:
            # Compiled per module, for what of it is held and guarded: most workers' keys
            # differ in a module or two.
            self._certified[key] = {rel: self._compiled_module(rel, frozenset(held) & self._tasks_in[rel],
                                                               tuple(sorted((t, u) for t, u in guards.items()
                                                                            if t in self._tasks_in[rel])),
                                                               apart & self._tasks_in[rel])
                                    for rel in self.sources}
        return self._certified[key]

    def parts_apart(self, apart, back=frozenset()) -> dict[str, str]:
        """What the parts' process receives: the regions of the `apart` tasks, each also as
        a function of its own; the functions of the `back` tasks as calls back to the
        worker; every other region stripped; no guard (no student code runs there)."""
        apart, back = frozenset(apart), frozenset(back)
        # Compiled per module, for what of it runs apart or is called back: most parts'
        # processes differ in a module or two.
        return {rel: self._parts_module(rel, apart & self._tasks_in[rel], back & self._tasks_in[rel])
                for rel in self.sources}

    def _parts_module(self, rel: str, apart: frozenset, back: frozenset) -> str:
        key = (rel, apart, back)
        if key not in self._parts:
            self._parts[key] = wire.pack_code(_regions_as_functions(self.sources[rel], rel, apart, back),
                                              f"certified/{rel}")
        return self._parts[key]

    def _compiled_module(self, rel: str, held: frozenset, guards: tuple, apart: frozenset = frozenset()) -> str:
        key = (rel, held, guards, apart)
        if key not in self._modules_compiled:
            text = _called_across(self.sources[rel], rel, apart, _crossing_modes()) if apart else self.sources[rel]
            text = strip(_guarded(text, dict(guards)), set(self._tasks_in[rel] - held))
            self._modules_compiled[key] = wire.pack_code(text, f"certified/{rel}")
        return self._modules_compiled[key]

    @property
    def modules(self) -> SimpleNamespace:
        if self._modules is None:
            import importlib.util

            name = "_reference_hero_transformer"
            spec = importlib.util.spec_from_file_location(name, self.root / "__init__.py",
                                                          submodule_search_locations=[str(self.root)])
            package = importlib.util.module_from_spec(spec)
            sys.modules[name] = package
            spec.loader.exec_module(package)
            loaded = {}
            for rel in self.sources:
                if rel != "__init__.py" and "/" not in rel:
                    loaded[rel[:-3]] = importlib.import_module(f"{name}.{rel[:-3]}")
            self._modules = SimpleNamespace(**loaded)
        return self._modules


def _guarded(text: str, guards: dict[str, tuple[str, ...]]) -> str:
    """A module's text with each guarded region's BEGIN marker replaced by its guard (the
    region's END marker, left alone, is dropped by strip like any kept region's)."""
    out = []
    for line in text.splitlines(keepends=True):
        begin = BEGIN.match(line)
        out.append(guard_line(begin["indent"], begin["task"], guards[begin["task"]])
                   if begin and begin["task"] in guards else line)
    return "".join(out)


def _defined(tree: ast.AST, prefix: str = "", into: "dict | None" = None) -> dict:
    """Every function and class a module defines, at any depth, by qualified name."""
    into = {} if into is None else into
    for child in getattr(tree, "body", ()):
        if isinstance(child, (ast.FunctionDef, ast.ClassDef)):
            into[prefix + child.name] = child
            _defined(child, f"{prefix}{child.name}.", into)
    return into


def _regions_apart(text: str, rel: str, apart: frozenset) -> list:
    """Each region of the `apart` tasks in `text`: (region, the names it is given, whether
    it ends its function). The names are the function's arguments and what the function's
    code before the region set that the region reads; what the region sets, the code after
    it may not read (it stays in the parts' process)."""
    functions = _defined(parse(text))

    def names(nodes, context):
        return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, context)}

    found = []
    for region in find_regions(text, rel):
        if region.task not in apart:
            continue
        function = functions[region.qualname]
        arguments = function.args
        given = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
        given += [a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None]
        before = [node for node in function.body if node.end_lineno < region.begin]
        inside = [node for node in function.body if region.begin < node.lineno < region.end]
        after = [node for node in function.body if node.lineno > region.end]
        given += sorted((names(before, ast.Store) & names(inside, ast.Load)) - set(given))
        left = names(inside, ast.Store) & names(after, ast.Load)
        if left:
            raise ValueError(f"{rel}:{region.qualname}: the code after region {region.task} reads "
                             f"{sorted(left)}, which the region sets: it cannot run apart (Task.crosses)")
        found.append((region, given, not after))
    return found


def _crossing_modes() -> dict:
    """How each part's values cross, where not as usual: "graph" for a part that reads and
    sets the whole graph below the Values it is given (Task.walks_graph), "numbers" for one
    whose answer depends on their numbers only (Task.numbers_only)."""
    from grader.checks import catalogue

    return {name: "graph" if task.walks_graph else "numbers" for name, task in catalogue.tasks().items()
            if task.walks_graph or task.numbers_only}


def _called_across(text: str, rel: str, apart: frozenset, modes: "dict | None" = None) -> str:
    """A module's text with the body of each `apart` region replaced by one call across:
    the part's name and what it is given, by name (the function's signature, public as in
    the student's copy, and the names its code before the region set), and how its values
    cross where not as usual (`modes`, _crossing_modes)."""
    lines = text.splitlines(keepends=True)
    for region, given, ends in sorted(_regions_apart(text, rel, apart), key=lambda found: -found[0].begin):
        indent = BEGIN.match(lines[region.begin - 1])["indent"]
        mode = (modes or {}).get(region.task)
        whole = f", {mode!r}" if mode else ""
        call = f'{CALL_ACROSS}("{region.task}", {{{", ".join(f"{n!r}: {n}" for n in given)}}}{whole})'
        lines[region.begin:region.end - 1] = [f"{indent}{'return ' if ends else ''}{call}\n"]
    return "".join(lines)


def _regions_as_functions(source: str, rel: str, apart: frozenset, back: frozenset = frozenset()) -> str:
    """What the parts' process runs of a module: its text with every region but the
    `apart` ones stripped, the function of each `back` task a call back to the worker
    (_called_back), and each `apart` region also as a function of its own
    (REGION_FUNCTION + task) of the names it is given. A stripped region raises: NotHeld
    for a `back` task that could not be called back (a part that reached it is the kit's
    mistake, never the student's); a TypeError for a task that never runs apart (chapter
    00's: only values the code gave a part reach it, and that is the code's mistake)."""
    calling_back = _called_back(source, rel, back - apart)
    stripped = strip(calling_back, {region.task for region in find_regions(calling_back, rel)} - apart)

    def raised(match) -> str:
        task = match[1]
        if task in back:
            return f'raise {NOT_HELD}("{task}")'
        return (f'raise TypeError("the course\'s parts that run apart cannot run {task}: they were given an object '
                f'whose {task} runs only where the code runs")')

    out = [re.sub(r'raise NotImplementedError\("(\w+)"\)', raised, stripped), "\n\n",
           f"class {NOT_HELD}(LookupError):\n    pass\n"]
    lines = source.splitlines()
    for region, given, _ in _regions_apart(source, rel, apart):
        body = textwrap.dedent("\n".join(lines[region.begin:region.end - 1])).strip("\n") or "pass"
        out.append(f"\n\ndef {REGION_FUNCTION}{region.task}({', '.join(given)}):\n"
                   + textwrap.indent(body, "    ") + "\n")
    return "".join(out)


def _called_back(text: str, rel: str, back: frozenset) -> str:
    """A module's text with the whole body of each `back` task's function one call back to
    the worker: the task's name and its arguments, in the signature's order (the worker
    calls its own code of the task with them, a method on the object given as self). A
    function with *args or **kwargs is left raising NotHeld."""
    functions = _defined(parse(text))
    lines = text.splitlines(keepends=True)
    regions = [r for r in find_regions(text, rel) if r.task in back] if back else []
    for region in sorted(regions, key=lambda r: -r.begin):
        function = functions.get(region.qualname)
        arguments = function.args if function is not None else None
        if arguments is None or arguments.vararg is not None or arguments.kwarg is not None:
            continue
        given = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
        first = function.body[0]
        indent = " " * first.col_offset
        call = f'{CALL_ACROSS}("{region.task}", {{{", ".join(f"{n!r}: {n}" for n in given)}}})'
        lines[min(first.lineno, region.begin) - 1:max(function.end_lineno, region.end)] = [f"{indent}return {call}\n"]
    return "".join(lines)


_computed_facts: dict[str, object] = {}


def facts_computed_here(key: str):
    """The facts for public inputs with this digest, where no data file holds them (an LMS
    package that copied only the kit's code): computed by the hidden module that registers
    them, on the reference, where the kit's hidden modules and catalogue are loaded in this
    process; else None."""
    import torch

    from grader.checks import facts

    if key in _computed_facts:
        return _computed_facts[key]
    catalogue = sys.modules.get("grader.checks.catalogue")  # the kit's, where one was loaded
    if catalogue is None:
        return None
    registered = {}
    for name, module in list(sys.modules.items()):
        if name.startswith("grader.checks.") and ".hidden" in name and module is not None:
            registered.update(vars(module).get(facts.REGISTERED) or {})
    reference = Reference.available() if registered else None
    if reference is None:
        return None
    checks = {c.name: c for c in catalogue.all_checks()}
    for name, function in registered.items():
        check = checks.get(name)
        if check is None:
            continue
        inputs = check.fresh_inputs() if check.fixed_inputs else check.make_inputs(torch.Generator().manual_seed(0))
        if facts.digest(inputs) == key:
            _computed_facts[key] = facts.encode(function(reference.modules, inputs))
            return _computed_facts[key]
    return None
