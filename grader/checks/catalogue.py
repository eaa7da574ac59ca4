"""Every chapter's tasks and checks, collected from grader/checks/chNN_*/.

A chapter is a package whose __init__ holds its TITLE, and a task is a folder in it named
by the task's id (its solution region's id):

    grader/checks/ch05_block/layer_norm/
        __init__.py   TASKS, and the public checks beside their probes and judges
        hidden.py     the hidden checks (TA-only), and what the public checks know
                      (@facts_for); the student release leaves it out
        mutants.py    the mutants and variants that prove the checks (grader/mutants.py)

The chapter's tasks are its folders, in the order of their regions in the reference
(tasks.json, written by `make student`); a chapter's hidden/ folder holds what several of
its tasks' hidden checks share. A check's chapter and task come from where it is declared."""

from __future__ import annotations

import importlib
import importlib.util
import json
import pkgutil
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from grader.checks._api import CHAPTER_PACKAGE, DECLARED, Check, Task

HIDDEN = "hidden"  # a task's module of hidden checks, and a chapter's folder of what they share
MUTANTS = "mutants"  # a task's module of mutants and variants
TASK_ORDER = "tasks.json"  # a chapter's task ids in the order of their regions (generated)


def kit_only(relative: Path) -> str | None:
    """What a file of a chapter's check package (a path relative to it) is, where the
    students' bundle leaves it out: "hidden" (a task's hidden.py, anything under the
    chapter's hidden/ folder) or "mutants" (a task's mutants.py); None for what the bundle
    carries, which is also all a grading worker may read of it (grader/run/worker_view.py)."""
    if relative.parts[0] == HIDDEN or relative.name == f"{HIDDEN}.py":
        return "hidden"
    return "mutants" if relative.name == f"{MUTANTS}.py" else None


@dataclass(frozen=True)
class Chapter:
    number: str
    title: str
    module: str  # the package's name, chNN_topic
    tasks: tuple[Task, ...]
    checks: tuple[Check, ...]


def chapter_packages() -> list[str]:
    import grader.checks as package

    return sorted(info.name for info in pkgutil.iter_modules(package.__path__)
                  if info.ispkg and CHAPTER_PACKAGE.fullmatch(info.name))


def load_chapter(package_name: str) -> Chapter:
    number = CHAPTER_PACKAGE.fullmatch(package_name)["number"]
    package = importlib.import_module(f"grader.checks.{package_name}")
    tasks, checks = [], []
    for folder in task_folders(package_name):
        module = importlib.import_module(f"{package.__name__}.{folder}")
        tasks += module.TASKS
        checks += _checks_of(module, hidden_module(package.__name__, folder), number)
    return Chapter(number, package.TITLE, package_name, tuple(tasks), tuple(checks))


def task_folders(package_name: str) -> list[str]:
    """The chapter's task folders: in the order tasks.json gives, then any it does not
    name yet (a task just made, before `make student` runs), by name."""
    folder = Path(__file__).parent / package_name
    present = sorted(path.parent.name for path in folder.glob("*/__init__.py") if path.parent.name != HIDDEN)
    order = written_task_order(package_name)
    return [t for t in order if t in present] + [t for t in present if t not in order]


def written_task_order(package_name: str) -> list[str]:
    try:
        return list(json.loads((Path(__file__).parent / package_name / TASK_ORDER).read_text(encoding="utf-8"))["tasks"])
    except (OSError, ValueError, KeyError, TypeError):
        return []


def hidden_modules(package_name: str) -> list:
    """The hidden modules of a chapter's tasks (none in the student release)."""
    package = f"grader.checks.{package_name}"
    found = (hidden_module(package, folder) for folder in task_folders(package_name))
    return [module for module in found if module is not None]


def hidden_module(package: str, folder: str):
    """The module of the hidden checks of a task folder, or None: where it has none, and
    in the student release, which ships no hidden module."""
    name = f"{package}.{folder}.{HIDDEN}"
    return importlib.import_module(name) if importlib.util.find_spec(name) else None


def _checks_of(module, hidden, number: str) -> list[Check]:
    """The declared checks of a task module and of its hidden module as Checks: by task in
    TASKS order, and within a task the public checks before the hidden ones (the order
    reports list them), each in the order declared."""
    names = [t.name for t in module.TASKS]
    public = getattr(module, DECLARED, [])
    secret = getattr(hidden, DECLARED, []) if hidden is not None else []
    for where, entries, is_hidden in ((module, public, False), (hidden, secret, True)):
        for entry in entries:
            if bool(entry.more.get("hidden")) != is_hidden:
                folder = module.__name__.replace(".", "/")
                raise ValueError(f"{where.__name__}: check '{entry.short_name}' is {'not ' * is_hidden}hidden; a "
                                 f"hidden check goes in {folder}/{HIDDEN}.py, a public one in {folder}/__init__.py")
            entry.task_among(names)  # raises where the entry names no task of the folder
    built = [entry.build(number, task) for task in names for entries in (public, secret) for entry in entries
             if entry.task_among(names) == task]
    by_name = {c.name: c for c in built}
    for c in built:
        for gate in c.gated_by:
            found = by_name.get(f"ch{number}.{c.task}.{gate}")
            if found is None or found.gated_by or found.hidden:
                raise ValueError(f"{module.__name__}: check '{c.name}' is gated by '{gate}', which is not an "
                                 f"ungated public check of its task")
    return built


def chapter_source(chapter: Chapter) -> str:
    """The text of all the chapter's check modules (its hidden ones too, where present, and
    never its mutants), for the tools that read them."""
    folder = Path(__file__).parent / chapter.module
    return "\n".join(path.read_text(encoding="utf-8") for path in sorted(folder.rglob("*.py"))
                     if path.name != f"{MUTANTS}.py" and "__pycache__" not in path.parts)


@lru_cache(maxsize=None)
def chapters() -> tuple[Chapter, ...]:
    return tuple(load_chapter(name) for name in chapter_packages())


@lru_cache(maxsize=None)
def tasks() -> dict[str, Task]:
    return {task.name: task for chapter in chapters() for task in chapter.tasks}


@lru_cache(maxsize=None)
def chapter_of_task() -> dict[str, Chapter]:
    return {task.name: chapter for chapter in chapters() for task in chapter.tasks}


@lru_cache(maxsize=None)
def mistake_texts() -> dict[str, dict[str, str]]:
    """{task: {mistake: its sentence}}: each task folder's MISTAKES, the keys a verdict
    names (grader/run/verdicts.py). A folder's MISTAKES kept by what they name ({"dx":
    {...}}) give each of their own keys."""
    found: dict[str, dict[str, str]] = {}
    for chapter in chapters():
        for folder in task_folders(chapter.module):
            module = importlib.import_module(f"grader.checks.{chapter.module}.{folder}")
            texts: dict[str, str] = {}
            for key, text in (getattr(module, "MISTAKES", None) or {}).items():
                if isinstance(text, str):
                    texts[key] = text
                elif isinstance(text, dict):
                    texts.update({k: t for k, t in text.items() if isinstance(t, str)})
            for task in module.TASKS:
                found[task.name] = texts
    return found


def all_checks() -> list[Check]:
    return [c for chapter in chapters() for c in chapter.checks]


def known_class_name(name) -> "str | None":
    """A class name a probe reported (type(obj).__name__), when the grader knows it on its
    own: a class of the course's contract (the tasks' classes), one of torch.nn's
    modules or a Python builtin. Any other name is text the submission chose: None."""
    import builtins

    from torch import nn

    if not isinstance(name, str):
        return None
    course = {task.qualname.split(".")[0] for task in tasks().values() if "." in task.qualname}
    torch_modules = {n for n, cls in vars(nn).items() if isinstance(cls, type) and issubclass(cls, nn.Module)}
    python = {n for n, cls in vars(builtins).items() if isinstance(cls, type)} | {"NoneType"}
    return name if name in course | torch_modules | python else None


def parse_chapters(text: str | None) -> list[str] | None:
    """Chapter numbers from text such as "05,07", "5 7" or "ch05"; None for all chapters.
    ValueError names a chapter that has no checks."""
    if not text:
        return None
    known = {c.number for c in chapters()}
    chosen = []
    for part in text.replace(" ", ",").split(","):
        if not part:
            continue
        number = part.lower().removeprefix("ch").zfill(2)
        if number not in known:
            raise ValueError(f"there is no chapter {part!r}; chapters with checks: {', '.join(sorted(known))}")
        chosen.append(number)
    return chosen


# The student release ships no hidden check, only how many each chapter has and their
# points, so a student's report can say what grading adds (the release writes this file).
HIDDEN_COUNTS = Path(__file__).with_name("hidden_counts.json")


def hidden_counts() -> dict[str, dict]:
    """{chapter: {"checks": how many hidden checks, "points": their points}}: from the
    checks themselves where they are here (the course's kit), else from hidden_counts.json
    (the student release); {} where neither knows."""
    hidden = [c for c in all_checks() if c.hidden]
    if hidden:
        counts: dict[str, dict] = {}
        for check in hidden:
            entry = counts.setdefault(check.chapter, {"checks": 0, "points": 0.0})
            entry["checks"] += 1
            entry["points"] += check.points
        return dict(sorted(counts.items()))
    try:
        data = json.loads(HIDDEN_COUNTS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): {"checks": int(v["checks"]), "points": float(v["points"])} for k, v in data.items()
            if isinstance(v, dict) and "checks" in v and "points" in v}
