"""Which tasks a chapter's checks run besides their own, read from the reference: what
the report names as the certified parts that stood in, what tells the engine which
tasks may share a worker (two tasks whose checks never run the other's code), and which
certified parts a task's worker holds (worker_holdings: those its public and hidden
checks run, and no other)."""

from __future__ import annotations

import ast
import graphlib
import inspect
import json
import linecache
import re
from functools import lru_cache

from grader.checks import catalogue
from grader.run.reference import Reference
from grader.regions import find_regions


@lru_cache(maxsize=1)
def _reference_parts(reference: Reference) -> tuple[dict[str, str], dict[str, set[str]]]:
    """Each task's reference body and each module's module-level imports, read once
    (every chapter's parts_used asks the same of the same sources)."""
    bodies, imports = {}, {}
    for rel, source in reference.sources.items():
        for region in find_regions(source, rel):
            bodies[region.task] = region.body(source)
        # Only a module-level import ties a module to another; one inside a function
        # (a program's main) runs outside the checks.
        imports[rel[:-3]] = set(re.findall(r"^from \.(\w+) import", source, flags=re.M))
    return bodies, imports


# The methods Python's operators call without naming them, and the operators that do.
_OPERATORS = {"__add__": ("+", "sum("), "__radd__": ("+", "sum("), "__iadd__": ("+=",), "__sub__": ("-",),
              "__rsub__": ("-",), "__isub__": ("-=",), "__neg__": ("-",), "__pos__": ("+",), "__mul__": ("*",),
              "__rmul__": ("*",), "__imul__": ("*=",), "__pow__": ("**",), "__rpow__": ("**",),
              "__truediv__": ("/",), "__rtruediv__": ("/",), "__floordiv__": ("//",), "__matmul__": ("@",),
              "__rmatmul__": ("@",), "__lt__": ("<", "max(", "min(", "sorted("), "__gt__": (">", "max(", "min("),
              "__le__": ("<=",), "__ge__": (">=",), "__eq__": ("==", " in "), "__hash__": ("set(", "{", "dict("),
              "__len__": ("len(",), "__iter__": ("for ", "list(", "tuple(", "*"), "__getitem__": ("[",),
              "__contains__": (" in ",), "__bool__": ("if ", "not ", " and ", " or ", "while ")}


@lru_cache(maxsize=None)
def _mention(qualname: str, operators: bool = False) -> tuple[str, re.Pattern]:
    """What in a text means the task's function is built or called: the pattern, and a
    piece of text every match contains (a cheap test first; '' when there is none).
    `operators`: a method an operator calls is also meant by the operator, and a
    function taken by name without a call (to be called later) is meant too."""
    owner, _, method = qualname.rpartition(".")
    if owner and method in ("__init__", "forward"):
        return owner, re.compile(rf"\b{re.escape(owner)}\b")  # a class is built and called by its name
    # An attribute, but not one of the package's modules (ns.backward is no Value.backward).
    attribute = rf"(?<!\bns)\.{re.escape(method)}\b"
    if owner and operators and method in _OPERATORS:
        return "", re.compile("|".join((attribute, *map(re.escape, _OPERATORS[method]))))
    if operators:  # also taken without a call, to be called later: try_call(tok.decode, ids)
        return method, re.compile(attribute if owner else rf"\b{re.escape(method)}\(|{attribute}")
    if owner:
        return f".{method}(", re.compile(rf"\.{re.escape(method)}\(")
    return f"{method}(", re.compile(rf"\b{re.escape(method)}\(")


@lru_cache(maxsize=None)
def parts_used(chapter: str) -> frozenset[str] | None:
    """The tasks a chapter's checks run besides its own: what the chapter's probes build
    or call in the package's modules they use, and in turn what those parts' reference
    code builds or calls. None where no reference is at hand to read."""
    reference = Reference.available()
    found = next((c for c in catalogue.chapters() if c.number == chapter), None)
    if reference is None or found is None:
        return None
    bodies, imports = _reference_parts(reference)
    checks_source = catalogue.chapter_source(found)
    own = {t.name for t in found.tasks}
    text = checks_source + "\n".join(bodies.get(t, "") for t in own)
    return _closure(text, own, set(re.findall(r"\bns\.(\w+)\b", checks_source)), bodies, imports)


def _closure(text: str, own: set[str], modules: set[str], bodies: dict[str, str],
             imports: dict[str, set[str]], helpers: "dict[str, str] | None" = None,
             operators: bool = False) -> frozenset[str]:
    """The tasks a text builds or calls in `modules` (and the modules they import), and in
    turn what those tasks' reference bodies build or call; `own` left out. `helpers`
    ({"module.function": source}): the package's own functions that are no task, followed
    through when called (a backward that runs the forward through a helper).
    `operators`: a task an operator runs counts as called (`a + b` on two Values)."""
    modules = set(modules) & set(imports)
    while more := set().union(*(imports[m] for m in modules)) - modules:
        modules |= more
    candidates = [(name, *_mention(task.qualname, operators)) for name, task in catalogue.tasks().items()
                  if name not in own and task.module in modules]
    for name, source in (helpers or {}).items():
        if name.split(".")[0] in modules:
            bodies = {**bodies, name: source}
            candidates.append((name, *_mention(name.split(".", 1)[1], operators)))
    # No pattern spans a line, so each piece is searched once, as it is added (the same
    # closure as searching the whole text again after every addition).
    pieces, used = [text], set()
    while pieces:
        piece = pieces.pop()
        for name, literal, pattern in candidates:
            if name not in used and literal in piece and pattern.search(piece) is not None:
                used.add(name)
                pieces.append(bodies.get(name, ""))
    return frozenset(used - set(helpers or ()))


# The student release holds no reference to read: it ships the graph, written by the
# release from the course's kit (grader.generate.release).
TASK_GRAPH = catalogue.HIDDEN_COUNTS.with_name("task_graph.json")


def task_graph() -> dict[str, tuple[str, ...]]:
    """{task: the tasks its public checks run besides its own code}, in catalogue order:
    read from the reference where it is at hand, else from the release's task_graph.json;
    {} where neither is."""
    reference = Reference.available()
    if reference is None:
        try:
            stored = json.loads(TASK_GRAPH.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {task: tuple(parts) for task, parts in stored.items() if isinstance(parts, list)}
    return _computed_graph(reference)


def build_order(graph: dict[str, tuple[str, ...]]) -> list[str]:
    """The graph's tasks, every task after the parts it builds on; tasks that build on
    each other (attention and its heads, a Value's operations and its backward) in the
    lessons' order."""
    lessons = {task: i for i, task in enumerate(catalogue.tasks())}
    nodes = sorted(set(graph) | {p for parts in graph.values() for p in parts},
                   key=lambda t: lessons.get(t, len(lessons)))
    reach = {t: set(graph.get(t, ())) for t in nodes}
    changed = True
    while changed:  # the transitive closure; the graph is a few dozen tasks
        changed = False
        for t in nodes:
            more = set().union(*(reach[p] for p in reach[t])) - reach[t]
            if more:
                reach[t] |= more
                changed = True
    component = {t: min((u for u in nodes if u == t or (u in reach[t] and t in reach[u])), key=nodes.index)
                 for t in nodes}
    sorter = graphlib.TopologicalSorter({c: {component[p] for p in reach[c] if component[p] != c}
                                         for c in set(component.values())})
    sorter.prepare()
    done: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=nodes.index)
        for c in ready:
            done += [t for t in nodes if component[t] == c]
        sorter.done(*ready)
    return done


def _computed_graph(reference: Reference) -> dict[str, tuple[str, ...]]:
    return {name: _public_parts(reference, name) for name in catalogue.tasks()}


@lru_cache(maxsize=None)
def _public_parts(reference: Reference, task_name: str) -> tuple[str, ...]:
    """What a task's public checks run besides its own code (each task read only when
    asked: a run of one chapter reads that chapter's tasks alone), and the parts Python's
    operators run for them (a * b on two Values runs Value.__mul__, which no text names:
    traced on the reference, since reading every + as a call would tie the kit's own float
    arithmetic to Value.__add__)."""
    found = set(_parts_run(reference, task_name, hidden=False)) | _operator_parts(reference, task_name)
    return tuple(sorted(found, key=list(catalogue.tasks()).index))


def _operator_parts(reference: Reference, task_name: str) -> set[str]:
    operators = {name for name, task in catalogue.tasks().items()
                 if task.qualname.rpartition(".")[2] in _OPERATORS and task.module == catalogue.tasks()[task_name].module}
    if not operators - {task_name}:
        return set()
    chapter = catalogue.chapter_of_task()[task_name]
    ran = set().union(*(traced_parts(reference, c) for c in chapter.checks if c.task == task_name and not c.hidden))
    return (ran & operators) - {task_name}


@lru_cache(maxsize=1)
def _code_of_tasks(reference: Reference) -> dict:
    """Each task's reference function's code object: {code: task name}."""
    found = {}
    for name, task in catalogue.tasks().items():
        target = getattr(reference.modules, task.module)
        for attribute in task.qualname.split("."):
            target = getattr(target, attribute)
        target = inspect.unwrap(target.__init__ if isinstance(target, type) else target)
        found[target.__code__] = name
    return found


def traced_parts(reference: Reference, check) -> set[str]:
    """The tasks whose reference functions a check's probe runs, its own task's included:
    the probe run on the reference in this process, call by call (the reference is the
    course's own code), with the inputs of seed 0 or its fixed ones."""
    import sys

    import torch

    code_tasks = _code_of_tasks(reference)
    inputs = check.fresh_inputs() if check.fixed_inputs else check.make_inputs(torch.Generator().manual_seed(0))
    sent = {key: value for key, value in inputs.items() if not key.startswith("_")}
    if check.separately:
        rest = {key: value for key, value in sent.items() if key not in check.separately}
        calls = [{**rest, check.separately[0]: sent[name]} for name in check.separately]
    else:
        calls = [sent]
    seen: set[str] = set()

    def record(frame, event, _arg):
        if event == "call" and frame.f_code in code_tasks:
            seen.add(code_tasks[frame.f_code])

    previous = sys.getprofile()
    for call in calls:
        earlier: dict = {}
        for part in check.parts or (None,):
            sys.setprofile(record)
            try:
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(0)
                    answer = (check.probe(reference.modules, **call) if part is None else
                              check.probe(reference.modules, **call, part=part, earlier=dict(earlier)))
            finally:
                sys.setprofile(previous)
            earlier[part] = answer
    return seen


def _parts_run(reference: Reference, task_name: str, hidden: bool) -> tuple[str, ...]:
    """The tasks the checks of `task_name` run besides its own (hidden=True: its hidden
    checks too, a part Python's operators call, the package's methods that are no task,
    and everything its public checks run), in catalogue order."""
    bodies, imports = _reference_parts(reference)
    chapter, task = catalogue.chapter_of_task()[task_name], catalogue.tasks()[task_name]
    probes = [c.probe for c in chapter.checks if c.task == task_name and (hidden or not c.hidden)]
    text = "\n".join([_check_code(probes), bodies.get(task_name, "")])
    helpers = {**_helpers(reference), **_methods(reference)} if hidden else _helpers(reference)
    used = _closure(text, {task_name}, set(re.findall(r"\bns\.(\w+)\b", text)) | {task.module},
                    bodies, imports, helpers, operators=hidden)
    if hidden:
        used |= set(_public_parts(reference, task_name))
    return tuple(sorted(used, key=list(catalogue.tasks()).index))


def worker_holdings(tasks=None) -> dict[str, tuple[str, ...]]:
    """{task: the certified parts its worker holds}: every task its public and hidden
    checks run besides its own code, read from the reference, counting a part that
    Python's operators call and following the package's methods that are no task; {}
    without a reference (then no worker holds any). Every other task, in that worker, is
    the student's own code. `tasks`: only these (by name; default every task). Course
    grading only: the student release ships task_graph()."""
    reference = Reference.available()
    if reference is None:
        return {}
    return {name: _held_parts(reference, name) for name in (catalogue.tasks() if tasks is None else tasks)}


@lru_cache(maxsize=None)
def _held_parts(reference: Reference, task_name: str) -> tuple[str, ...]:
    return _parts_run(reference, task_name, hidden=True)


@lru_cache(maxsize=1)
def _helpers(reference: Reference) -> dict[str, str]:
    """The reference's module-level functions that hold no task: {"module.name": source}."""
    found = {}
    for rel, source in reference.sources.items():
        lines = source.splitlines()
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef):
                text = "\n".join(lines[node.lineno - 1:node.end_lineno])
                if "### BEGIN SOLUTION" not in text:
                    found[f"{rel[:-3]}.{node.name}"] = text
    return found


@lru_cache(maxsize=1)
def _methods(reference: Reference) -> dict[str, str]:
    """The reference's methods that hold no task: {"module.Class.name": source}
    (Value.__sub__, which runs __add__ and __neg__)."""
    found = {}
    for rel, source in reference.sources.items():
        lines = source.splitlines()
        for node in ast.parse(source).body:
            if not isinstance(node, ast.ClassDef):
                continue
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    text = "\n".join(lines[item.lineno - 1:item.end_lineno])
                    if "### BEGIN SOLUTION" not in text:
                        found[f"{rel[:-3]}.{node.name}.{item.name}"] = text
    return found


def _check_code(functions) -> str:
    """The source of the probes and of every function of the checks they call, by name,
    in turn: what a task's checks run, and no other task's probes beside them."""
    seen, pending, texts = set(), list(functions), []
    while pending:
        function = pending.pop()
        if function in seen or not inspect.isfunction(function):
            continue
        seen.add(function)
        text = _source_of(function)
        if text is None:
            continue
        texts.append(text)
        names = function.__globals__
        pending += [names[n] for n in set(re.findall(r"\b\w+\b", text)) if n in names
                    and getattr(names[n], "__module__", "").startswith("grader.checks.")]
    return "\n".join(texts)


def _source_of(function) -> str | None:
    """A function's source: from its first line to the last its code covers, and on over
    the lines indented deeper than its first (inspect.getsource, which tokenizes the
    file for each function, took most of a chapter's planning)."""
    code = function.__code__
    lines = linecache.getlines(code.co_filename)
    first = code.co_firstlineno
    if code.co_name == "<lambda>" or not 0 < first <= len(lines):
        try:
            return inspect.getsource(function)
        except (OSError, TypeError):
            return None
    last = max((end for _, end, _, _ in code.co_positions() if end is not None), default=first)

    def indent(line: str) -> int:
        return len(line) - len(line.lstrip())

    while last < len(lines) and (not lines[last].strip() or indent(lines[last]) > indent(lines[first - 1])):
        last += 1
    return "".join(lines[first - 1:last])


def independent(first: str, second: str) -> bool:
    """Whether two tasks may be graded in one worker: different chapters, and neither
    chapter's checks run the other task (so the worker, which holds the reference minus
    both, gives each task's probes exactly the certified parts they would have alone).
    False where no reference is at hand to tell."""
    of = catalogue.chapter_of_task()
    one, other = of[first].number, of[second].number
    if one == other:
        return False
    used_one, used_other = parts_used(one), parts_used(other)
    if used_one is None or used_other is None:
        return False
    return second not in used_one and first not in used_other


def task_groups(tasks: list[str]) -> list[list[str]]:
    """The tasks in as few groups as independence allows, each group's tasks pairwise
    independent; greedy, in the order given (the catalogue's), so the grouping is the
    same every run."""
    groups: list[list[str]] = []
    for task in tasks:
        for group in groups:
            if all(independent(task, other) for other in group):
                group.append(task)
                break
        else:
            groups.append([task])
    return groups
