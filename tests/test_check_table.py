"""The course's check table is a contract with every student and every gradebook: names,
points, chapters, tasks and what each check promises. Moving code about must not change
it, so the whole table is pinned here. A deliberate change to a check updates
tests/data/check_table.json in the same commit (`python tests/test_check_table.py`)."""

import json
import sys
from pathlib import Path

from grader.checks import catalogue

PINNED = Path(__file__).parent / "data" / "check_table.json"


def current_table() -> dict:
    table = {"chapters": [], "tasks": [], "checks": []}
    for chapter in catalogue.chapters():
        table["chapters"].append({"number": chapter.number, "title": chapter.title,
                                  "tasks": [t.name for t in chapter.tasks], "checks": [c.name for c in chapter.checks]})
        for t in chapter.tasks:
            table["tasks"].append({"name": t.name, "module": t.module, "qualname": t.qualname, "title": t.title,
                                   "forbidden": list(t.forbidden), "forbidden_methods": list(t.forbidden_methods),
                                   "forbidden_ops": list(t.forbidden_ops), "no_autograd": t.no_autograd})
        for c in chapter.checks:
            table["checks"].append({"name": c.name, "chapter": c.chapter, "task": c.task, "points": c.points,
                                    "summary": c.summary, "hidden": c.hidden, "timeout": c.timeout,
                                    "separately": list(c.separately), "parts": list(c.parts),
                                    "has_expect": c.expect is not None})
    return table


def test_check_table_is_the_pinned_one():
    pinned, now = json.loads(PINNED.read_text()), current_table()
    assert now["chapters"] == pinned["chapters"]
    assert now["tasks"] == pinned["tasks"]
    for before, after in zip(pinned["checks"], now["checks"], strict=True):
        assert after == before, before["name"]


def test_every_check_lives_in_its_chapter_and_task_package():
    """Chapter and task come from where a check is declared: a check of ch05.block sits in a
    module of grader/checks/ch05_*/ whose TASKS include 'block'."""
    for chapter in catalogue.chapters():
        for c in chapter.checks:
            module = sys.modules[c.judge.__module__]
            assert module.__name__.startswith(f"grader.checks.ch{chapter.number}_"), c.name
            assert c.task in {t.name for t in module.TASKS}, c.name


if __name__ == "__main__":
    PINNED.write_text(json.dumps(current_table(), indent=1))
