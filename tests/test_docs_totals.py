"""The points and check counts README.md, docs/teaching.md and the Autolab back end's
docstring state are the catalogue's: every total they give for all chapters or for one
chapter is read out of the text and compared with grader.checks.catalogue (a check added
or re-weighted changes them), and a wrong one is reported with its line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grader.checks import catalogue

ROOT = Path(__file__).resolve().parent.parent
DOCS = ("README.md", "docs/teaching.md", "grader/lms/autolab.py")
ALL = re.compile(r"all (?:ten )?chapters\W{0,4}(\d[\d,]*) points")
ONE = re.compile(r"chapter (\d\d) only\W{0,4}(\d+) points|`ch(\d\d)` is (\d+)|\"ch(\d\d)\": (\d+)")
CHECKS = re.compile(r"(\d[\d,]*) (hidden |public )?checks(?! of)")


def _points(chapters=None) -> float:
    return sum(c.points for c in catalogue.all_checks() if chapters is None or c.chapter in chapters)


@pytest.mark.parametrize("doc", DOCS)
def test_the_totals_a_doc_states_are_the_catalogues(doc):
    raw = (ROOT / doc).read_text(encoding="utf-8")
    text = re.sub(r"\s+", " ", raw)
    totals = [int(n.replace(",", "")) for n in ALL.findall(text)]
    if doc.endswith(".md"):
        assert totals, f"{doc} no longer states the points of all chapters; this test reads them"
    assert set(totals) <= {_points()}, f"{doc} says {totals} points for all chapters; the catalogue has {_points():g}"
    for match in ONE.finditer(text):
        chapter, points = next((match[i], match[i + 1]) for i in (1, 3, 5) if match[i])
        line = next((n for n, row in enumerate(raw.splitlines(), 1) if points in row and chapter in row), "?")
        assert int(points) == _points({chapter}), (f"{doc} line {line}: chapter {chapter} is "
                                                   f"{_points({chapter}):g} points, not {points}")
    checks = catalogue.all_checks()
    counts = {"": len(checks), "hidden ": sum(c.hidden for c in checks), "public ": sum(not c.hidden for c in checks)}
    for number, kind in CHECKS.findall(text):
        value = int(number.replace(",", ""))
        if value > 20:  # a whole-course count, not "2 checks" of one task
            assert value == counts[kind], f"{doc} says {value} {kind}checks; the catalogue has {counts[kind]}"


def test_each_chapter_row_of_the_assignments_table_names_its_tasks():
    """assignments/README.md's "what you implement" names every task's function or class in
    its chapter's row: a task added to a chapter must be added there (the line is given)."""
    raw = (ROOT / "assignments" / "README.md").read_text(encoding="utf-8")
    lines = raw.splitlines()
    for chapter in catalogue.chapters():
        line = next((n for n, row in enumerate(lines, 1) if row.startswith(f"| [{chapter.module}]")), None)
        assert line is not None, f"assignments/README.md has no row for {chapter.module}"
        cell = lines[line - 1].rsplit(" | ", 1)[-1]
        for task in chapter.tasks:
            owner, _, method = task.qualname.rpartition(".")
            named = {f"`{task.qualname}`", f"`{owner}`" if owner else "", f"`{method}`" if not owner else ""} - {""}
            assert any(name in cell for name in named), (
                f"assignments/README.md line {line}: the row of {chapter.module} names none of "
                f"{', '.join(sorted(named))} (task {task.name}); add it to \"what you implement\"")
