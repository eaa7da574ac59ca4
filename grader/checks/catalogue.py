"""Every chapter's tasks and checks, collected from grader/checks/chNN_*/.

A chapter is a package: its __init__ holds the chapter's TITLE and TASK_MODULES, the
modules of its tasks in the lesson's order. Each of those modules declares TASKS and,
with the @check decorator, the checks of those tasks beside their probes and judges.
A check's chapter and task come from where it is declared."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from grader.checks._api import DECLARED, Check, Task

CHAPTER_PACKAGE = re.compile(r"ch(?P<number>\d\d)_\w+")


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
    for part in package.TASK_MODULES:
        module = importlib.import_module(f"{package.__name__}.{part}")
        tasks += module.TASKS
        checks += _checks_of(module, number)
    return Chapter(number, package.TITLE, package_name, tuple(tasks), tuple(checks))


def _checks_of(module, number: str) -> list[Check]:
    """The module's declared checks as Checks: by task in TASKS order, and within a task the
    public checks before the hidden ones (the order reports list them), each in the order
    declared."""
    names = [t.name for t in module.TASKS]
    declared = getattr(module, DECLARED, [])
    for entry in declared:
        if entry.task is None and len(names) != 1:
            raise ValueError(f"{module.__name__}: check '{entry.name}' must say which of {names} it grades (task=...)")
        if entry.task is not None and entry.task not in names:
            raise ValueError(f"{module.__name__}: check '{entry.name}' grades '{entry.task}', not a task of {names}")
    return [entry.build(f"ch{number}", task) for task in names for hidden in (False, True) for entry in declared
            if (entry.task or names[0]) == task and bool(entry.more.get("hidden")) == hidden]


def chapter_source(chapter: Chapter) -> str:
    """The text of all the chapter's check modules, for the tools that read them."""
    folder = Path(__file__).parent / chapter.module
    return "\n".join(path.read_text(encoding="utf-8") for path in sorted(folder.glob("*.py")))


@lru_cache(maxsize=None)
def chapters() -> tuple[Chapter, ...]:
    return tuple(load_chapter(name) for name in chapter_packages())


@lru_cache(maxsize=None)
def tasks() -> dict[str, Task]:
    return {task.name: task for chapter in chapters() for task in chapter.tasks}


@lru_cache(maxsize=None)
def chapter_of_task() -> dict[str, Chapter]:
    return {task.name: chapter for chapter in chapters() for task in chapter.tasks}


def all_checks() -> list[Check]:
    return [c for chapter in chapters() for c in chapter.checks]


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
