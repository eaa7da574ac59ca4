"""The lessons in assignments/: present, in sync with the grader's catalogue, complete,
and free of reference code."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import shutil

import pytest

from grader.generate import lesson_tables as assignments
from grader.checks import catalogue
from grader.checks._api import Check, Task
from grader.regions import find_regions

REPO_ROOT = Path(__file__).resolve().parent.parent
REFERENCE_PACKAGE = REPO_ROOT / "solutions" / "hero_transformer"

LESSONS = {name: assignments.ASSIGNMENTS / name / "README.md" for name in assignments.CHAPTER_FOLDERS}


def _lesson(number: str) -> str:
    folder = assignments.chapter_folders()[number]
    return (folder / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(LESSONS))
def test_every_chapter_folder_has_a_lesson(name):
    readme = LESSONS[name]
    assert readme.is_file(), f"{readme} is missing"
    text = readme.read_text(encoding="utf-8")
    begin, end = assignments.markers(assignments.CHECKS_BLOCK)
    assert text.count(begin) == 1 and text.count(end) == 1, f"{name}: one generated checks block"
    number = name[2:4]
    assert f"make check CH={number}" in text, f"{name} should say how to run its checks"
    # How long it is, is the author's call: make student warns outside LESSON_LINES.
    assert len(assignments.outside_block(text).splitlines()) >= 10, f"{name}: the lesson is hardly written"


def test_make_student_warns_of_a_lesson_longer_than_reads_well(tmp_path):
    root = tmp_path / "assignments"
    shutil.copytree(assignments.ASSIGNMENTS, root)
    lesson = root / "ch05_block" / "README.md"
    lesson.write_text(lesson.read_text(encoding="utf-8") + "\nmore words\n" * 200, encoding="utf-8")
    warned = [w for w in assignments.plan(root).warnings if "ch05_block/README.md" in w]
    assert warned and "hand-written lines" in warned[0], assignments.plan(root).warnings


def test_the_lessons_are_in_sync_with_the_catalogue():
    assert assignments.stale() == [], "run `python -m grader.generate.lesson_tables` to refresh the lessons"


def test_the_check_command_passes():
    done = subprocess.run([sys.executable, "-m", "grader.generate.lesson_tables", "--check"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_catalogue_chapter_has_a_lesson():
    folders = assignments.chapter_folders()
    for chapter in catalogue.chapters():
        assert chapter.number in folders, f"chapter {chapter.number} has checks but no lesson folder"


def test_every_task_is_taught_in_its_lesson():
    """The hand-written part names each task id and the function the student fills in,
    not only the generated table."""
    for chapter in catalogue.chapters():
        prose = assignments.outside_block(_lesson(chapter.number))
        for task in chapter.tasks:
            assert f"`{task.name}`" in prose or f"({task.name}" in prose, (
                f"chapter {chapter.number}: the lesson never mentions task {task.name}")
            assert task.qualname in prose, (
                f"chapter {chapter.number}: the lesson never names {task.qualname} (task {task.name})")


def test_every_solution_region_is_taught_somewhere():
    """Tasks whose checks are still being written are in the lessons already: every
    solution region's task id and function appear in some lesson's hand-written part."""
    prose = "\n".join(assignments.outside_block(path.read_text(encoding="utf-8")) for path in LESSONS.values())
    for path in sorted(REFERENCE_PACKAGE.glob("*.py")):
        for region in find_regions(path.read_text(encoding="utf-8"), path.name):
            assert f"`{region.task}`" in prose, f"{path.name}: no lesson mentions task {region.task}"
            assert region.qualname in prose, f"{path.name}: no lesson names {region.qualname} ({region.task})"


def test_public_checks_are_listed_and_hidden_ones_only_counted():
    for chapter in catalogue.chapters():
        table = assignments.block_text(_lesson(chapter.number))
        for check in chapter.checks:
            listed = f"`{check.name}`" in table
            assert listed != check.hidden, (
                f"{check.name} is {'hidden' if check.hidden else 'public'} but "
                f"{'appears' if listed else 'does not appear'} in the lesson")
        hidden = [c for c in chapter.checks if c.hidden]
        if hidden:
            assert f"+ {len(hidden)} hidden check" in table


def test_the_index_lists_every_chapter_and_the_workflow():
    text = (assignments.ASSIGNMENTS / "README.md").read_text(encoding="utf-8")
    for name in assignments.CHAPTER_FOLDERS:
        assert f"({name}/README.md)" in text
    for step in ("make check CH=", "make submit", "hero_transformer/"):
        assert step in text


def test_no_reference_code_in_the_lessons():
    """A lesson explains; it never contains a line of a solution region."""
    solution_lines = set()
    for path in REFERENCE_PACKAGE.glob("*.py"):
        lines = path.read_text(encoding="utf-8").splitlines()
        for region in find_regions("\n".join(lines), path.name):
            for line in lines[region.begin: region.end - 1]:
                code = line.strip()
                if len(code) >= 24 and not code.startswith("#"):
                    solution_lines.add(code)
    for readme in [*LESSONS.values(), assignments.ASSIGNMENTS / "README.md"]:
        # The generated table quotes the grader's summaries, which state published facts.
        text = assignments.outside_block(readme.read_text(encoding="utf-8"))
        assert "BEGIN SOLUTION" not in text
        leaked = sorted(code for code in solution_lines if code in text)
        assert not leaked, f"{readme.parent.name}: reference code in the lesson: {leaked[:3]}"


# ------------------------------------------------------------ the generator itself


def _fake_chapter(number: str = "42"):
    tasks = (Task("widget", "model", "Widget.forward", "the widget"),)
    never = lambda *a, **k: None  # noqa: E731
    checks = (
        Check(f"ch{number}.widget.shape", "widget", 2, "output [2, 3] | not [3, 2] * ever", never, never),
        Check(f"ch{number}.widget.secret", "widget", 1.5, "a secret comparison", never, never, hidden=True),
        Check(f"ch{number}.widget.secret2", "widget", 1, "another one", never, never, hidden=True),
    )
    return catalogue.Chapter(number, "widgets", f"ch{number}_widgets", tasks, checks)


def _tree(tmp_path, numbers=("41", "42")):
    root = tmp_path / "assignments"
    begin, end = assignments.markers(assignments.CHECKS_BLOCK)
    for number in numbers:
        folder = root / f"ch{number}_topic"
        folder.mkdir(parents=True)
        (folder / "README.md").write_text(f"# lesson {number}\n\n{begin}\nold\n{end}\n\nafter\n", encoding="utf-8")
    s_begin, s_end = assignments.markers(assignments.SUMMARY_BLOCK)
    (root / "README.md").write_text(f"# index\n{s_begin}\n{s_end}\n", encoding="utf-8")
    return root


def test_generator_renders_tasks_public_checks_and_counts_hidden(tmp_path):
    root = _tree(tmp_path)
    cat = assignments.Catalogue({"42": _fake_chapter()})
    result = assignments.plan(root, cat)
    assert not result.errors
    text = result.updates[root / "ch42_topic" / "README.md"]
    assert text.startswith("# lesson 42\n\n") and text.endswith("\n\nafter\n")
    assert "| `widget` | `model.Widget.forward` (hero_transformer/model.py) | the widget |" in text
    assert "| `ch42.widget.shape` | 2 | output [2, 3] \\| not [3, 2] \\* ever |" in text
    assert "secret" not in text
    assert "+ 2 hidden checks worth 2.5 points" in text
    # A chapter without a check module gets a placeholder, not a crash.
    waiting = result.updates[root / "ch41_topic" / "README.md"]
    assert "being written" in waiting and "make check CH=41" in waiting
    assert "being written" in result.updates[root / "README.md"]


def test_generator_is_idempotent_and_check_mode_reports_stale(tmp_path):
    root = _tree(tmp_path)
    cat = assignments.Catalogue({"42": _fake_chapter()})
    assert len(assignments.stale(root, cat)) == 3
    for path, text in assignments.plan(root, cat).updates.items():
        path.write_text(text, encoding="utf-8")
    assert assignments.stale(root, cat) == []


def test_a_broken_check_module_leaves_its_lesson_alone(tmp_path):
    root = _tree(tmp_path)
    cat = assignments.Catalogue({"42": _fake_chapter()}, broken={"41": "SyntaxError: half written"})
    result = assignments.plan(root, cat)
    assert root / "ch41_topic" / "README.md" not in result.updates
    assert any("41" in warning for warning in result.warnings)


def test_a_lesson_without_markers_is_an_error_not_a_crash(tmp_path):
    root = _tree(tmp_path)
    (root / "ch41_topic" / "README.md").write_text("# no markers\n", encoding="utf-8")
    result = assignments.plan(root, assignments.Catalogue({}))
    assert any("ch41_topic" in error for error in result.errors)
    with pytest.raises(assignments.BlockError):
        assignments.stale(root, assignments.Catalogue({}))
    assert re.search(r"exactly one", result.errors[0])
