"""The first step of `make student`: the reference's solution regions and the chapters'
tasks name each other, or it stops with one sentence per mismatch saying what to add where.

    python -m grader.generate.consistency

A region nothing grades would reach students as a stub no check looks at; a task with
no region, or a region of another name, would blame the kit's own error on them.
"""

from __future__ import annotations

import ast
import sys

from grader import KIT_ROOT
from grader.checks import catalogue
from grader.run.regions import RegionError, all_regions

SOLUTIONS = KIT_ROOT / "solutions" / "hero_transformer"
CHECKS = KIT_ROOT / "grader" / "checks"


def _unlisted_task_modules() -> list[str]:
    """Check modules of a chapter that declare TASKS but are not in its TASK_MODULES."""
    found = []
    for chapter in catalogue.chapters():
        folder = CHECKS / chapter.module
        listed = set(__import__(f"grader.checks.{chapter.module}", fromlist=["TASK_MODULES"]).TASK_MODULES)
        for path in sorted(folder.glob("*.py")):
            if path.stem in listed or path.stem.startswith("_"):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            if any(isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "TASKS" for t in node.targets)
                   for node in tree.body):
                found.append(f"grader/checks/{chapter.module}/{path.name} declares TASKS but is not in the "
                             f"chapter's TASK_MODULES (grader/checks/{chapter.module}/__init__.py): add "
                             f"{path.stem!r} there, in the lesson's order, or nothing grades its tasks")
    return found


def problems() -> list[str]:
    """Every mismatch between the solution regions and the chapters' tasks, as sentences."""
    try:
        regions = all_regions(SOLUTIONS)
    except RegionError as error:
        return [f"solutions/ has a malformed solution marker: {error}"]
    tasks = catalogue.tasks()
    found = _unlisted_task_modules()
    for name, region in regions.items():
        if name not in tasks:
            found.append(f"solutions/hero_transformer/{region.path} has a region {name!r} ({region.qualname}) that no "
                         f"chapter grades: declare Task({name!r}, ...) in a check module of its chapter, listed in "
                         f"the chapter's TASK_MODULES (`make new-task CH=NN TASK={name}` writes one)")
    for name, task in tasks.items():
        region = regions.get(name)
        if region is None:
            found.append(f"task {name!r} ({task.module}.py, {task.qualname}) has no solution region: write "
                         f"`### BEGIN SOLUTION {name}` ... `### END SOLUTION` in "
                         f"solutions/hero_transformer/{task.module}.py, or use the region's id as the task's name")
            continue
        if (f"{task.module}.py", task.qualname) != (region.path, region.qualname):
            found.append(f"task {name!r} says {task.module}.py {task.qualname}, but its region is in "
                         f"{region.path} {region.qualname}: make the Task say where the region is")
    for chapter in catalogue.chapters():
        for task in chapter.tasks:
            checks = [c for c in chapter.checks if c.task == task.name]
            if not any(not c.hidden for c in checks):
                found.append(f"task {task.name!r} has no public check: students' `make check` would not see it")
    return found


def main() -> int:
    found = problems()
    for sentence in found:
        print(f"make student stopped: {sentence}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
