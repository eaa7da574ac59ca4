"""nbgrader notebooks: valid, in sync, and their autograder cells score through the
sandboxed engine in a way nbgrader reads as partial credit."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbgrader.utils import determine_grade

from grader import catalogue
from grader.notebooks import build, main as notebooks_main, path_of
from grader.assignments import CHAPTER_FOLDERS

ROOT = Path(__file__).resolve().parent.parent


def test_notebooks_are_in_sync_with_lessons_and_checks():
    assert notebooks_main(["--check"]) == 0


@pytest.mark.parametrize("folder", CHAPTER_FOLDERS)
def test_each_task_has_one_autograded_cell_worth_its_points(folder):
    notebook = build(folder)
    nbformat.validate(notebook)
    chapter = next(c for c in catalogue.chapters() if c.number == folder[2:4])
    graded = [c for c in notebook.cells if c.metadata["nbgrader"]["grade"]]
    assert [c.source for c in graded] == [f'score_task("{t.name}")' for t in chapter.tasks]
    for cell, task in zip(graded, chapter.tasks):
        assert cell.metadata["nbgrader"]["points"] == sum(c.points for c in chapter.checks if c.task == task.name)
    assert all(c.metadata["nbgrader"]["locked"] for c in notebook.cells)


def test_score_task_gives_full_points_to_the_reference_and_none_to_the_stubs():
    from grader.notebook import score_task

    full = sum(c.points for c in catalogue.all_checks() if c.task == "gelu")
    assert score_task("gelu", ROOT / "solutions" / "hero_transformer") == full
    assert score_task("gelu", ROOT / "hero_transformer") == 0.0


def test_an_executed_notebook_is_graded_by_nbgrader(tmp_path, monkeypatch):
    import shutil

    from nbclient import NotebookClient

    monkeypatch.setenv("HERO_TRANSFORMER_COURSE", str(ROOT))  # as the instructor autogrades
    folder = tmp_path / "alice" / "ch02_embedding"  # a student's copy of the released folder
    shutil.copytree(ROOT / "hero_transformer", folder / "hero_transformer")
    notebook = nbformat.read(path_of("ch02_embedding"), as_version=4)
    NotebookClient(notebook, timeout=120, resources={"metadata": {"path": str(folder)}}).execute()
    graded = [c for c in notebook.cells if c.metadata["nbgrader"]["grade"]]
    # The committed student copy still raises NotImplementedError everywhere: 0 of the points.
    assert [determine_grade(c) for c in graded] == [(0.0, c.metadata["nbgrader"]["points"]) for c in graded]


def test_score_task_grades_only_the_package_in_the_notebooks_own_folder(tmp_path, monkeypatch):
    from grader.notebook import HeroTransformerSetupError, score_task

    course = tmp_path / "course"  # a package above the notebook's folder is not the submission
    (course / "hero_transformer").mkdir(parents=True)
    for source in (ROOT / "solutions" / "hero_transformer").glob("*.py"):
        (course / "hero_transformer" / source.name).write_text(source.read_text())
    folder = course / "submitted" / "bob" / "ch05_block"
    folder.mkdir(parents=True)
    (folder / "torch.py").write_text("")  # stray files are not a package either
    monkeypatch.chdir(folder)
    with pytest.raises(HeroTransformerSetupError, match="no hero_transformer/ folder in this submission"):
        score_task("gelu")
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    (folder / "hero_transformer").symlink_to(course / "hero_transformer")
    with pytest.raises(HeroTransformerSetupError, match="symbolic links"):
        score_task("gelu")
