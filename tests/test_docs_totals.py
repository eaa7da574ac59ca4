"""The points and check counts README.md, docs/teaching.md and the Autolab back end's
docstring state are the catalogue's (`make student` writes them: grader/generate/doc_totals.py),
and each chapter's row of assignments/README.md names its tasks; a stale one is reported
with its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.checks import catalogue
from grader.generate import doc_totals

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("doc", doc_totals.DOCS)
def test_the_totals_a_doc_states_are_the_catalogues(doc):
    raw = (ROOT / doc).read_text(encoding="utf-8")
    if doc.endswith(".md"):
        assert doc_totals.ALL.search(raw), f"{doc} no longer states the points of all chapters; this test reads them"
    _, changes = doc_totals.corrected(raw)
    assert not changes, "; ".join(f"{doc} line {line} says {stated}, the catalogue {right}" for line, stated, right
                                  in changes) + ": run `make student` (python -m grader.generate.doc_totals)"


def test_a_total_is_rewritten_in_place_with_the_words_around_it_kept():
    points, chapter05 = doc_totals._points(), doc_totals._points({"05"})
    text = ("grades chapter 05 only (1 points); leave `CH` empty for all ten\nchapters (2 points); "
            "`ch05` is 3, {\"ch05\": 4}; 999 checks; 2 checks of one task")
    fixed, changes = doc_totals.corrected(text)
    assert fixed == (f"grades chapter 05 only ({chapter05} points); leave `CH` empty for all ten\nchapters "
                     f"({points} points); `ch05` is {chapter05}, {{\"ch05\": {chapter05}}}; "
                     f"{len(catalogue.all_checks())} checks; 2 checks of one task")
    assert [line for line, _, _ in changes] == [1, 2, 2, 2, 2]


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
