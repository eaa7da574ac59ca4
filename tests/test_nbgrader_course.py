"""A course made by `python -m grader nbgrader-course`, driven through nbgrader's own
apps as a TA drives it: generate_assignment, students' folders in submitted/,
autograde, export. Every submission gets its right score or a visible failure."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.lms.nbgrader_course import KERNEL_NAME, build, cell_timeout
from grader.mutants import apply, catalogue as accuracy_catalogue
from grader.run.schedule import possible_points
from grader.run.sandbox import bwrap_works

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "hero_transformer"
STARTER = ROOT / "hero_transformer"
BIN = Path(sys.executable).parent
ASSIGNMENT = "ch05_block"
FULL = possible_points(["05"])

# A planted ipykernel_launcher.py: were it the module `-m ipykernel_launcher` ran, every
# grade cell would be handed a score_task that returns full marks without grading.
PLANTED_LAUNCHER = """\
print("PLANTED LAUNCHER RUNS")
from ipykernel.kernelapp import IPKernelApp
app = IPKernelApp.instance()
app.initialize()
app.shell.events.register(
    "pre_run_cell", lambda *a: app.shell.user_ns.__setitem__("score_task", lambda *a, **k: 99.0))
app.start()
"""


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("HERO_TRANSFORMER_COURSE", "NBGRADER_EXECUTION",
                                                             "JUPYTER_PATH")}
    # Without the kit's environment on PATH: the course's configuration finds what nbgrader runs.
    env["PATH"] = "/usr/bin:/bin"
    return subprocess.run([str(BIN / "nbgrader"), *args], cwd=course, env=env, capture_output=True, text=True,
                          timeout=900)


def make_course(tmp: Path) -> Path:
    course = tmp / "course"
    # Where bubblewrap is unusable the course must say so, or autograde refuses (tested below).
    build(course, ["05"], allow_weak_sandbox=not bwrap_works())
    done = nbgrader(course, "generate_assignment", ASSIGNMENT)
    assert done.returncode == 0, done.stderr[-3000:]
    return course


def hand_in(course: Path, student: str, package: dict[str, str] | None, inside: str = "hero_transformer",
            extra: dict[str, str] | None = None) -> Path:
    """The student's copy of the released folder, as nbgrader collects it: the notebook,
    and their package (or none) at `inside`."""
    folder = course / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True)
    shutil.copy(course / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", folder)
    if package is not None:
        (folder / inside).mkdir(parents=True)
        for name, text in package.items():
            (folder / inside / name).write_text(text)
    for name, text in (extra or {}).items():
        (folder / name).write_text(text)
    return folder


def add_cell(folder: Path, code: str) -> None:
    """A code cell of the student's own, right after the set-up cell of their notebook."""
    path = folder / f"{ASSIGNMENT}.ipynb"
    notebook = json.loads(path.read_text())
    at = next(i for i, cell in enumerate(notebook["cells"])
              if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "ch05-setup")
    notebook["cells"].insert(at + 1, {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                                      "source": code})
    path.write_text(json.dumps(notebook))


def drop_cells(folder: Path, grade_ids: set[str]) -> None:
    path = folder / f"{ASSIGNMENT}.ipynb"
    notebook = json.loads(path.read_text())
    notebook["cells"] = [cell for cell in notebook["cells"]
                         if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") not in grade_ids]
    path.write_text(json.dumps(notebook))


# Cells a student adds: the kernel runs them before the task cells, with the TA's rights.
REDEFINES_SCORE_TASK = "score_task = lambda task_name, package=None: 12.0\n"
REWRITES_ITS_PACKAGE = """\
import os, pathlib, shutil
kit = pathlib.Path(os.environ["HERO_TRANSFORMER_COURSE"])
for module in (kit / "solutions" / "hero_transformer").glob("*.py"):
    shutil.copy(module, pathlib.Path("hero_transformer") / module.name)
"""


def sources(root: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in root.glob("*.py")}


def post_ln() -> dict[str, str]:
    wrong = next(m for m in accuracy_catalogue()[0] if m.name == "block_post_ln")
    return apply(sources(SOLUTIONS), "model", wrong.task, wrong.region())


def gradebook(course: Path) -> dict[str, dict]:
    from nbgrader.api import Gradebook

    found = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for submission in gb.assignment_submissions(ASSIGNMENT):
            notebook = submission.notebooks[0]
            found[submission.student.id] = {
                "score": submission.score,
                "needs_review": submission.needs_manual_grade,
                "cells": {g.name: g.auto_score for g in notebook.grades},
            }
    return found


def exported(course: Path) -> dict[str, float]:
    done = nbgrader(course, "export")
    assert done.returncode == 0, done.stderr[-2000:]
    with open(course / "grades.csv", newline="") as handle:
        return {row["student_id"]: float(row["score"]) for row in csv.DictReader(handle)}


@pytest.fixture(scope="module")
def autograded(tmp_path_factory):
    course = make_course(tmp_path_factory.mktemp("nbgrader"))
    hand_in(course, "reference", sources(SOLUTIONS))
    hand_in(course, "stubs", sources(STARTER))
    hand_in(course, "postln", post_ln())
    hand_in(course, "nested", sources(SOLUTIONS), inside="my work/hero_transformer")
    hand_in(course, "planted", sources(STARTER), extra={
        "ipykernel_launcher.py": PLANTED_LAUNCHER,
        "grader.py": "def score_task(*a, **k):\n    return 99.0\n",
        "torch.py": "raise SystemExit('planted torch')\n",
    })
    hand_in(course, "nopackage", None)
    add_cell(hand_in(course, "redefines", sources(STARTER)), REDEFINES_SCORE_TASK)
    add_cell(hand_in(course, "rewrites", sources(STARTER)), REWRITES_ITS_PACKAGE)
    drop_cells(hand_in(course, "dropped", sources(SOLUTIONS)), {"ch05-setup", "ch05-gelu"})
    done = nbgrader(course, "autograde", ASSIGNMENT)
    return course, done


@pytest.mark.slow
def test_the_starter_package_is_released_with_the_notebook(autograded):
    course, _ = autograded
    released = course / "release" / ASSIGNMENT
    assert sources(released / "hero_transformer") == sources(STARTER)
    notebook = json.loads((released / f"{ASSIGNMENT}.ipynb").read_text())
    # Students open it with the kernel they have; the gradebook keeps the grading kernel.
    assert notebook["metadata"]["kernelspec"]["name"] == "python3"
    source = json.loads((course / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    assert source["metadata"]["kernelspec"]["name"] == KERNEL_NAME


@pytest.mark.slow
def test_each_submission_gets_its_own_score_in_the_gradebook_and_the_export(autograded):
    course, _ = autograded
    book, csv_scores = gradebook(course), exported(course)
    assert book["reference"]["score"] == FULL and csv_scores["reference"] == FULL
    # The starter package the course released is never graded in place of the student's.
    assert book["stubs"]["score"] == 0.0 and csv_scores["stubs"] == 0.0
    assert book["nested"]["score"] == FULL  # the package one folder down is still theirs
    cells = book["postln"]["cells"]
    assert cells["ch05-block"] < 9 and 0 < book["postln"]["score"] < FULL
    assert all(cells[f"ch05-{task}"] > 0 for task in ("layer_norm", "gelu", "feedforward", "block_init"))
    for student in ("reference", "stubs", "nested", "postln", "planted"):
        assert not book[student]["needs_review"], student
    graded = course / "autograded" / "stubs" / ASSIGNMENT / "hero_transformer"
    assert sources(graded) == sources(STARTER)


@pytest.mark.slow
def test_a_cell_the_student_adds_cannot_set_the_score(autograded):
    """The task cells are graded outside the notebook's kernel, on the package as read
    before the notebook ran: a cell redefining score_task, or one copying the reference
    over the package while the notebook runs, earns nothing for the starter stubs."""
    course, _ = autograded
    book = gradebook(course)
    for student in ("redefines", "rewrites"):
        assert book[student]["score"] == 0.0 and not book[student]["needs_review"], student
        assert set(book[student]["cells"].values()) == {0.0}, student
    # The report the student gets back is the grader's, not what the kernel printed.
    notebook = json.loads((course / "autograded" / "redefines" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    cell = next(c for c in notebook["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "ch05-gelu")
    shown = "".join("".join(o.get("text", "")) for o in cell["outputs"] if o["output_type"] == "stream")
    assert "gelu" in shown and "not implemented" in shown.lower()
    assert ["".join(o["data"]["text/plain"]) for o in cell["outputs"] if o["output_type"] == "execute_result"] == ["0.0"]


@pytest.mark.slow
def test_deleted_locked_cells_cost_nothing(autograded):
    """The set-up cell and a task cell deleted from a notebook whose package is right: the
    task cells are graded outside the kernel, and the deleted one is put back."""
    course, done = autograded
    entry = gradebook(course)["dropped"]
    assert entry["score"] == FULL and not entry["needs_review"]
    assert "the task cell ch05-gelu was deleted" in done.stderr


@pytest.mark.slow
def test_modules_planted_beside_the_notebook_are_never_imported(autograded):
    course, done = autograded
    assert gradebook(course)["planted"]["score"] == 0.0
    assert "PLANTED LAUNCHER RUNS" not in done.stdout + done.stderr
    # The same launcher is what a plain `python -m ipykernel_launcher` in that folder runs.
    folder = course / "submitted" / "planted" / ASSIGNMENT
    plain = subprocess.run([sys.executable, "-m", "ipykernel_launcher", "--help"], cwd=folder,
                           capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin"})
    assert "PLANTED LAUNCHER RUNS" in plain.stdout


@pytest.mark.slow
def test_a_submission_without_its_package_fails_autograde_visibly(autograded):
    course, done = autograded
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if "ERROR" in line]
    assert any("nopackage" in line and "no hero_transformer/ folder in this submission" in line for line in errors)
    assert not any(name in line for line in errors for name in ("reference", "stubs", "postln", "planted"))
    entry = gradebook(course)["nopackage"]
    # No score of its own and flagged for a person: never a number taken from elsewhere.
    assert entry["needs_review"] and set(entry["cells"].values()) == {None}
    assert not (course / "autograded" / "nopackage" / ASSIGNMENT).exists()


@pytest.mark.slow
def test_a_kernel_without_an_absolute_kit_path_fails_autograde_visibly(tmp_path):
    course = make_course(tmp_path)
    hand_in(course, "alice", sources(SOLUTIONS))
    kernel = course / "jupyter" / "kernels" / KERNEL_NAME / "kernel.json"
    spec = json.loads(kernel.read_text())
    spec["env"]["HERO_TRANSFORMER_COURSE"] = "kit"  # relative: refused, never searched for
    kernel.write_text(json.dumps(spec))
    done = nbgrader(course, "autograde", ASSIGNMENT)
    assert done.returncode != 0
    assert "HeroTransformerSetupError" in done.stderr and "HERO_TRANSFORMER_COURSE='kit'" in done.stderr
    assert gradebook(course)["alice"]["needs_review"]


def test_a_configuration_whose_kit_is_gone_stops_every_command(tmp_path, monkeypatch):
    from traitlets.config.loader import PyFileConfigLoader

    for name in ("HERO_TRANSFORMER_COURSE", "JUPYTER_PATH"):
        monkeypatch.delenv(name, raising=False)
    course = tmp_path / "course"
    build(course, ["05"])
    config = course / "nbgrader_config.py"
    config.write_text(config.read_text().replace(f"KIT = Path({str(ROOT)!r})", "KIT = Path('/nonexistent/kit')"))
    with pytest.raises(SystemExit, match="/nonexistent/kit"):
        PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    # Nothing was set up for a kernel to grade with.
    assert "HERO_TRANSFORMER_COURSE" not in os.environ and "JUPYTER_PATH" not in os.environ


@pytest.mark.slow
def test_without_the_course_configuration_autograde_stops_instead_of_grading(tmp_path):
    course = make_course(tmp_path)
    hand_in(course, "alice", sources(SOLUTIONS))
    # The configuration not loaded (renamed, or a syntax error, which traitlets only logs):
    # the source notebook's kernel cannot be found, so nothing is graded in a plain kernel.
    (course / "nbgrader_config.py").rename(course / "nbgrader_config.off")
    done = nbgrader(course, "autograde", ASSIGNMENT, f"--CourseDirectory.root={course}")
    assert done.returncode != 0
    assert KERNEL_NAME in done.stderr


def test_the_course_configuration_holds_what_grading_needs(tmp_path):
    course = tmp_path / "course"
    build(course, ["05", "07"])
    config = (course / "nbgrader_config.py").read_text()
    assert f"KIT = Path({str(ROOT)!r})" in config
    assert f"c.Execute.kernel_name = {KERNEL_NAME!r}" in config
    assert sorted(p.name for p in (course / "source").iterdir()) == ["ch05_block", "ch07_model"]
    spec = json.loads((course / "jupyter" / "kernels" / KERNEL_NAME / "kernel.json").read_text())
    assert spec["argv"][1] == "-P" and spec["argv"][2:4] == ["-m", "ipykernel_launcher"]
    assert spec["env"]["HERO_TRANSFORMER_COURSE"] == str(ROOT)
    assert (course / "README.md").read_text().count("nbgrader autograde") >= 1
    with pytest.raises(FileExistsError):
        build(course, ["05"])


def test_the_cell_time_limit_covers_the_graders_own_worst_case():
    from grader.checks import catalogue
    from grader.lms.notebook_cell import task_seconds

    chapters = catalogue.chapters()
    limit = cell_timeout(chapters)
    assert limit > 30  # nbgrader's default, which cut off correct code
    assert all(limit >= task_seconds(c) for c in chapters)
    ch05 = [c for c in chapters if c.number == "05"]
    assert cell_timeout(ch05) <= limit


def test_the_configuration_loads_and_never_overwrites_submitted_files(tmp_path, monkeypatch):
    from traitlets.config.loader import PyFileConfigLoader

    from grader.checks import catalogue

    for name in ("HERO_TRANSFORMER_COURSE", "JUPYTER_PATH"):  # the configuration sets them
        monkeypatch.delenv(name, raising=False)

    course = tmp_path / "course"
    build(course, ["05"])
    (course / "source" / ASSIGNMENT / "data.txt").write_text("added by the TA later\n")
    loaded = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    excluded = set(loaded.Autograde.exclude_overwriting[ASSIGNMENT])
    assert {f"hero_transformer/{name}" for name in sources(STARTER)} | {"data.txt"} <= excluded
    steps = [s.__name__ for s in loaded.Autograde.autograde_preprocessors]
    at = steps.index("Execute")
    assert steps[at - 1:at + 3] == ["ReadPackageBeforeRunning", "Execute", "StopOnSetupError", "GradeOutsideTheKernel"]
    assert at + 3 < steps.index("SaveAutoGrades")
    assert loaded.Execute.timeout == cell_timeout([c for c in catalogue.chapters() if c.number == "05"])
    assert os.environ["HERO_TRANSFORMER_COURSE"] == str(ROOT)


def test_a_timed_out_cell_is_named_in_the_error(tmp_path):
    """nbgrader records a cell time-out with an empty message: the failure says which cell."""
    import logging

    from nbformat.v4 import new_code_cell, new_notebook, new_output

    from grader.lms.nbgrader_course import StopOnSetupError

    looping = new_code_cell("while True: pass")
    looping.outputs = [new_output("error", ename="CellTimeoutError", evalue="", traceback=[])]
    notebook = new_notebook(cells=[new_code_cell("x = 1"), looping])
    with pytest.raises(RuntimeError) as failed:
        StopOnSetupError(log=logging.getLogger("test")).preprocess(notebook, {"metadata": {"path": str(tmp_path)}})
    assert "CellTimeoutError: cell 2 (a cell of the student's own) ran past the cell time limit" in str(failed.value)


def readme_commands(course: Path) -> list[str]:
    """The commands of the course README's shell block, comments left out."""
    block = (course / "README.md").read_text().split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


@pytest.mark.slow
def test_the_course_works_with_only_the_commands_its_readme_gives(tmp_path):
    """A TA's shell with nothing of the kit on PATH: the README's own lines release,
    autograde and export, one after the other."""
    course = tmp_path / "course"
    build(course, ["05"], allow_weak_sandbox=not bwrap_works())
    commands = readme_commands(course)
    assert [c.split()[1] if not c.startswith("cd ") else "cd" for c in commands] == \
        ["cd", "generate_assignment", "autograde", "export"]
    cd, generate, autograde, export = commands
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    assert not any(Path(p, "alembic").exists() for p in env["PATH"].split(os.pathsep))

    def run(line: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", f"{cd} && {line}"], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=900)

    done = run(generate)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (course / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").is_file()
    hand_in(course, "reference", sources(SOLUTIONS))
    hand_in(course, "postln", post_ln())
    done = run(autograde)
    assert done.returncode == 0, done.stderr[-3000:]
    done = run(export)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(course / "grades.csv", newline="") as handle:
        scores = {row["student_id"]: float(row["score"]) for row in csv.DictReader(handle)}
    assert scores["reference"] == FULL and 0 < scores["postln"] < FULL
