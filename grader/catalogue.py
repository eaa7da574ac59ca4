"""Every chapter's tasks and checks, collected from grader/checks/chNN_*.py."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from functools import lru_cache

from grader.checks._api import Check, Task


@dataclass(frozen=True)
class Chapter:
    number: str
    title: str
    module: str
    tasks: tuple[Task, ...]
    checks: tuple[Check, ...]


@lru_cache(maxsize=None)
def chapters() -> tuple[Chapter, ...]:
    import grader.checks as package

    found = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if not info.name.startswith("ch"):
            continue
        module = importlib.import_module(f"grader.checks.{info.name}")
        found.append(Chapter(module.CHAPTER, module.TITLE, info.name, tuple(module.TASKS), tuple(module.CHECKS)))
    return tuple(found)


def tasks() -> dict[str, Task]:
    return {task.name: task for chapter in chapters() for task in chapter.tasks}


def chapter_of_task() -> dict[str, Chapter]:
    return {task.name: chapter for chapter in chapters() for task in chapter.tasks}


def all_checks() -> list[Check]:
    return [c for chapter in chapters() for c in chapter.checks]
