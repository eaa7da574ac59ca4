"""nbgrader notebooks: valid, in sync, and their autograder cells score through the
sandboxed engine in a way nbgrader reads as partial credit. The set-up cell imports the
instructor's grader (HERO_TRANSFORMER_COURSE), never one planted beside the notebook, and
a table of what a student can run at home does not answer the checks a cell grades."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.utils import determine_grade

from grader.generate.lesson_tables import CHAPTER_FOLDERS
from grader.generate.notebooks import build, main as notebooks_main, path_of
from grader.checks import catalogue
from grader.run.reference import Reference
from tests.hostile import checks_of, hostile_sources

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
    from grader.lms.notebook_cell import score_task

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
    from grader.lms.notebook_cell import HeroTransformerSetupError, score_task

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


# ------------------------------------------- the lessons' experiments, executed


STUB_NOTE = "is still a stub in your hero_transformer/"


def _run_experiments(folder: str, package: Path, where: Path, setup: bool = True):
    """The notebook of `folder`, top to bottom, beside a copy of `package`; the graded
    cells are left out (they grade through the sandbox, tested above, and would take
    minutes for every chapter), the set-up cell is kept unless `setup` is false."""
    import shutil

    from nbclient import NotebookClient

    submission = where / folder
    shutil.copytree(package, submission / "hero_transformer", ignore=shutil.ignore_patterns("__pycache__"))
    notebook = nbformat.read(path_of(folder), as_version=4)
    notebook.cells = [c for c in notebook.cells if not c.metadata["nbgrader"]["grade"]
                      and (setup or c.id != f"ch{folder[2:4]}-setup")]
    NotebookClient(notebook, timeout=120, resources={"metadata": {"path": str(submission)}}).execute()
    return [c for c in notebook.cells if c.cell_type == "code"]


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def _errors(cells) -> list[str]:
    return [f"{c.id}: {o.ename}: {o.evalue}" for c in cells for o in c.outputs if o.output_type == "error"]


@pytest.mark.parametrize("folder", CHAPTER_FOLDERS)
def test_the_notebook_runs_on_the_reference_and_its_experiments_show_results(folder, tmp_path, monkeypatch):
    monkeypatch.setenv("HERO_TRANSFORMER_COURSE", str(ROOT))
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    cells = _run_experiments(folder, ROOT / "solutions" / "hero_transformer", tmp_path)
    assert not _errors(cells)
    tried = [c for c in cells if c.id.startswith(f"ch{folder[2:4]}-try-") and c.id != f"ch{folder[2:4]}-try-setup"]
    assert tried, f"{folder} has no experiment cells"
    for cell in tried:
        assert _text(cell).strip() and STUB_NOTE not in _text(cell), f"{cell.id}: {_text(cell)!r}"


@pytest.mark.parametrize("folder", CHAPTER_FOLDERS)
def test_on_the_stub_copy_the_experiments_only_say_what_is_missing(folder, tmp_path, monkeypatch):
    monkeypatch.setenv("HERO_TRANSFORMER_COURSE", str(ROOT))
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    cells = _run_experiments(folder, ROOT / "hero_transformer", tmp_path, setup=False)
    assert not _errors(cells)
    tried = [c for c in cells if c.id.startswith(f"ch{folder[2:4]}-try-") and c.id != f"ch{folder[2:4]}-try-setup"]
    for cell in tried:
        assert STUB_NOTE in _text(cell), f"{cell.id}: {_text(cell)!r}"


def test_experiment_cells_are_read_only_ungraded_and_never_hold_solution_code():
    from grader.generate.notebooks import EXPERIMENTS, TRY_SETUP

    solution = set()
    for path in (ROOT / "solutions" / "hero_transformer").glob("*.py"):
        inside = False
        for line in path.read_text(encoding="utf-8").splitlines():
            inside = (inside or "### BEGIN SOLUTION" in line) and "### END SOLUTION" not in line
            if inside and len(line.strip()) >= 24 and not line.strip().startswith("#"):
                solution.add(line.strip())
    for folder in CHAPTER_FOLDERS:
        notebook = build(folder)
        tried = [c for c in notebook.cells if c.id.startswith(f"ch{folder[2:4]}-try-")]
        assert len(tried) == len(EXPERIMENTS[folder]) + 1
        for cell in tried:
            meta = cell.metadata["nbgrader"]
            assert cell.cell_type == "code" and meta["locked"] and not meta["grade"] and not meta["solution"]
            assert not [line for line in cell.source.splitlines() if line.strip() in solution], cell.id
    assert 'os.environ.get("NBGRADER_EXECUTION") == "autograde"' in TRY_SETUP


def test_autograding_skips_the_experiments(tmp_path, monkeypatch):
    monkeypatch.setenv("HERO_TRANSFORMER_COURSE", str(ROOT))
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    cells = _run_experiments("ch01_tokens", ROOT / "solutions" / "hero_transformer", tmp_path, setup=False)
    tried = [c for c in cells if c.id.startswith("ch01-try-") and c.id != "ch01-try-setup"]
    assert tried and all(_text(c).strip() == "(experiment skipped while autograding)" for c in tried)


# ------------------------------------------------- which grader the set-up cell imports


def _setup_cell() -> str:
    notebook = json.loads((ROOT / "assignments" / "ch02_embedding" / "ch02_embedding.ipynb").read_text())
    return next("".join(c["source"]) for c in notebook["cells"]
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "ch02-setup")


def _run_setup(tmp_path, env_course: str | None):
    course = tmp_path / "course"
    course.mkdir()
    (course / "grader").symlink_to(ROOT / "grader")
    folder = course / "autograded" / "alice" / "ch02_embedding"
    fake = folder / "grader"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "run").mkdir()
    (fake / "run" / "__init__.py").write_text("")
    (fake / "run" / "engine.py").write_text("")
    (fake / "run" / "notebook_cell.py").write_text("def score_task(task_name, package=None):\n    return 12.0\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    if env_course is not None:
        env["HERO_TRANSFORMER_COURSE"] = env_course
    code = _setup_cell() + "\nimport grader.lms.notebook_cell\nprint('FROM', grader.lms.notebook_cell.__file__)\n"
    return course, subprocess.run([sys.executable, "-c", code], cwd=folder, capture_output=True, text=True,
                                  timeout=120, env=env)


def test_the_setup_cell_imports_the_instructors_grader(tmp_path):
    course, done = _run_setup(tmp_path, str(tmp_path / "course"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"FROM {course}/grader/lms/notebook_cell.py" in done.stdout
    assert "advisory" not in done.stdout


def test_without_the_variable_the_setup_cell_warns_and_skips_the_submission(tmp_path):
    course, done = _run_setup(tmp_path, None)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"FROM {course}/grader/lms/notebook_cell.py" in done.stdout
    assert "advisory" in done.stdout


def test_a_relative_course_path_is_refused(tmp_path):
    _, done = _run_setup(tmp_path, ".")
    assert done.returncode != 0 and "HERO_TRANSFORMER_COURSE" in done.stderr


def _notebook_setup() -> str:
    notebook = json.loads((ROOT / "assignments" / "ch05_block" / "ch05_block.ipynb").read_text())
    for cell in notebook["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "ch05-setup":
            return "".join(cell["source"])
    raise AssertionError("no set-up cell in the chapter 05 notebook")


# A cell the student adds after the set-up cell runs in the kernel the task cells run in
# and can redefine score_task there; the course's nbgrader configuration therefore grades
# the task cells again outside the kernel (tests/test_nbgrader_course.py drives that
# through nbgrader itself). This test covers what the kernel's own set-up cell imports.
def test_a_grader_planted_beside_the_notebook_is_not_the_one_imported(tmp_path):
    import subprocess
    import sys

    course = tmp_path / "course"  # the instructor's course folder: the real grader
    course.mkdir()
    (course / "grader").symlink_to(ROOT / "grader")
    folder = course / "autograded" / "alice" / "ch05_block"  # nbgrader runs the notebook here
    folder.mkdir(parents=True)
    student = folder / "hero_transformer"
    student.mkdir()
    for source in (ROOT / "hero_transformer").glob("*.py"):  # the untouched student copy: nothing done
        (student / source.name).write_text(source.read_text())
    cells = [_notebook_setup()]
    fake = folder / "grader"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "run").mkdir()
    (fake / "run" / "__init__.py").write_text("")
    (fake / "run" / "engine.py").write_text("")
    (fake / "run" / "notebook_cell.py").write_text("def score_task(task_name, package=None):\n    return 12.0\n")
    cells.append('print("SCORE", score_task("block"))')
    done = subprocess.run([sys.executable, "-c", "\n\n".join(cells)], cwd=folder, capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    score = re.search(r"SCORE (\S+)", done.stdout)
    assert score is None or float(score[1]) == 0.0, done.stdout[-500:]


def test_hidden_inputs_are_not_predictable_in_the_notebook_flow(tmp_path):
    import torch

    import grader.lms.notebook_cell as notebook

    table = {}
    for check in checks_of("gelu"):  # what a student can run at home
        inputs = check.make_inputs(torch.Generator().manual_seed(0 + sum(map(ord, check.name))))
        for value in inputs.values():
            for x in (value, -value):
                table[tuple(x.flatten().tolist())] = torch.nn.functional.gelu(x).flatten().tolist()
    body = f"""
        answers = {table!r}
        return torch.tensor(answers[tuple(x.flatten().tolist())], dtype=x.dtype).reshape(x.shape)
    """
    package = tmp_path / "hero_transformer"
    package.mkdir()
    reference = Reference()
    for name, text in hostile_sources(reference, {"gelu": body}).items():
        (package / name).write_text(text)
    try:
        points = notebook.score_task("gelu", package=package)
    finally:
        if notebook._sandbox is not None:
            notebook._sandbox.close()
            notebook._sandbox = None
    assert points < 5
