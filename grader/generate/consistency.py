"""The first step of `make student`: the reference's solution regions and the chapters'
task folders name each other, or it stops with one sentence per mismatch saying what to
add where; then each chapter's tasks.json is written (its tasks in the order of their
regions, the order reports and lessons list them).

    python -m grader.generate.consistency

A region nothing grades would reach students as a stub no check looks at; a task with
no region, or a region of another name, would blame the kit's own error on them.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

from grader import KIT_ROOT
from grader.checks import catalogue
from grader.checks.facts import inputs_are_fixed
from grader.files import write_atomic
from grader.regions import Region, RegionError, all_regions

SOLUTIONS = KIT_ROOT / "solutions" / "hero_transformer"
CHECKS = KIT_ROOT / "grader" / "checks"
NEW_TASK = "`make new-task CH={chapter} TASK={task}` writes one"


def _declared_task_names(init: Path) -> list[str] | None:
    """The names in a task folder's `TASKS = [Task("name", ...), ...]`, read from its text
    (a folder that does not import must still be named in a sentence); None without TASKS."""
    tree = ast.parse(init.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "TASKS" for t in node.targets):
            return [call.args[0].value for call in getattr(node.value, "elts", ())
                    if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Constant)]
    return None


def _folder_problems(regions: dict[str, Region]) -> list[str]:
    """Each chapter's folders against the regions: every folder is a task named by its region."""
    found = []
    for chapter_folder in sorted(CHECKS.glob("ch[0-9][0-9]_*")):
        number = chapter_folder.name[2:4]
        for folder in sorted(p for p in chapter_folder.iterdir() if p.is_dir() and p.name != catalogue.HIDDEN
                             and p.name != "__pycache__"):
            where = f"grader/checks/{chapter_folder.name}/{folder.name}/"
            init = folder / "__init__.py"
            if not init.exists():
                if any(folder.glob("*.py")):
                    found.append(f"{where} has no __init__.py: a task's public checks and its TASKS go there "
                                 f"({NEW_TASK.format(chapter=number, task=folder.name)})")
                continue
            names = _declared_task_names(init)
            if names != [folder.name]:
                said = "declares no TASKS" if names is None else f"declares the tasks {names}"
                found.append(f"{where}__init__.py {said}: a task's folder declares that one task, named as the "
                             f"folder is, TASKS = [Task({folder.name!r}, ...)]; a task of another name gets a "
                             f"folder of its own")
                continue
            if folder.name not in regions:
                found.append(f"{where} grades a task {folder.name!r} that has no solution region: write `### BEGIN "
                             f"SOLUTION {folder.name}` ... `### END SOLUTION` in solutions/hero_transformer/, or "
                             f"name the folder and its task by the region's id")
    return found


def problems() -> list[str]:
    """Every mismatch between the solution regions and the chapters' task folders, as sentences."""
    try:
        regions = all_regions(SOLUTIONS)
    except RegionError as error:
        return [f"solutions/ has a malformed solution marker: {error}"]
    found = _folder_problems(regions)
    if found:
        return found  # the catalogue below would not load
    folders = {p.parent.name for p in CHECKS.glob("ch[0-9][0-9]_*/*/__init__.py")}
    for name, region in regions.items():
        if name not in folders:
            found.append(f"solutions/hero_transformer/{region.path} has a region {name!r} ({region.qualname}) that no "
                         f"chapter grades: its checks go in a folder grader/checks/chNN_<topic>/{name}/ "
                         f"({NEW_TASK.format(chapter='NN', task=name)})")
    for name, task in catalogue.tasks().items():
        region = regions.get(name)
        if region is not None and (f"{task.module}.py", task.qualname) != (region.path, region.qualname):
            found.append(f"task {name!r} says {task.module}.py {task.qualname}, but its region is in "
                         f"{region.path} {region.qualname}: make the Task say where the region is")
    for chapter in catalogue.chapters():
        for task in chapter.tasks:
            checks = [c for c in chapter.checks if c.task == task.name]
            if not any(not c.hidden for c in checks):
                found.append(f"task {task.name!r} has no public check: students' `make check` would not see it; "
                             f"declare one in grader/checks/{chapter.module}/{task.name}/__init__.py")
            if not any(c.hidden for c in checks) and all(inputs_are_fixed(c) for c in checks):
                found.append(f"task {task.name!r} has no hidden check, and every input of its public checks is "
                             f"the same on every run: a student could hard-code the answers; declare a hidden "
                             f"check (hidden=True) in grader/checks/{chapter.module}/{task.name}/"
                             f"{catalogue.HIDDEN}.py")
    return found


def task_orders(regions: dict[str, Region] | None = None) -> dict[str, list[str]]:
    """{chapter package: its task ids in the order of their regions in the reference}."""
    regions = all_regions(SOLUTIONS) if regions is None else regions
    orders = {}
    for chapter_folder in sorted(CHECKS.glob("ch[0-9][0-9]_*")):
        tasks = [p.parent.name for p in chapter_folder.glob("*/__init__.py") if p.parent.name in regions]
        orders[chapter_folder.name] = sorted(tasks, key=lambda t: (regions[t].path, regions[t].begin))
    return orders


def write_task_orders() -> list[Path]:
    """Each chapter's tasks.json, where it differs from the regions' order; the files written."""
    written = []
    for package, tasks in task_orders().items():
        path = CHECKS / package / catalogue.TASK_ORDER
        text = json.dumps({"tasks": tasks}, indent=1) + "\n"
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            write_atomic(path, text)
            written.append(path)
    return written


def main() -> int:
    found = problems()
    for sentence in found:
        print(f"make student stopped: {sentence}")
    if found:
        return 1
    for path in write_task_orders():
        print(f"wrote {path.relative_to(KIT_ROOT).as_posix()}: the chapter's tasks in the order of their regions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
