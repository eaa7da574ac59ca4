"""A ready nbgrader course directory for hero_transformer:

    python -m grader nbgrader-course DEST [--chapters 05,07]

DEST receives
    nbgrader_config.py                  the settings below, read by every nbgrader command run in DEST
    jupyter/kernels/hero-transformer/   the kernel graded notebooks run in
    source/chNN_<topic>/                the chapter's notebook and the starter package students get
    README.md                           the TA's steps

What the configuration guarantees, and why each part is there:
- The kernel runs `python -P`: the submission folder (nbgrader's working directory for
  the kernel) is not on sys.path, so an `ipykernel_launcher.py`, `torch.py` or
  `grader.py` a student puts beside the notebook is never imported in place of the real one.
- HERO_TRANSFORMER_COURSE is set, as an absolute path, in the configuration and in the
  kernel's environment, and the kit interpreter's bin folder goes first on PATH for
  what nbgrader runs by name (alembic): autograding never depends on the TA's shell.
- `Autograde.exclude_overwriting` names every file of source/<assignment>/ but the
  notebook, recomputed each time nbgrader starts: autograde never copies the starter
  package over a student's package, and a submission without a package stays without one.
- The cell time limit is the grader's own worst case (grader.lms.notebook_cell.task_seconds),
  not nbgrader's 30 s: slow but correct code is judged by the grader's per-check limits.
- The source notebooks name that kernel, which only this configuration makes findable:
  were nbgrader_config.py not loaded (traitlets only logs a broken configuration),
  autograde would stop with "no such kernel" rather than grade in a plain kernel. The
  released copies name the usual python3 kernel.
- The task cells are graded outside the notebook's kernel, where a cell a student adds
  could redefine what they call: a preprocessor before Execute reads the package into
  nbgrader's memory, one after it grades each task cell on that copy and writes the
  report and score into the cell's outputs, which nbgrader records.
- A preprocessor after Execute fails the notebook when a cell raised
  HeroTransformerSetupError (no grader, no package, no sandbox) or timed out: nbgrader
  logs the error, records no grade for that submission and exits non-zero.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

from nbconvert.preprocessors import Preprocessor

# nbgrader_config.py loads this file by path, where grader is not importable.
ROOT = Path(__file__).resolve().parents[2]
KERNEL_NAME = "hero-transformer"
SETUP_ERROR = "HeroTransformerSetupError"
# Errors that mean the grade cells did not run to their end; never a student's score.
FATAL_ERRORS = {SETUP_ERROR, "CellTimeoutError", "DeadKernelError"}


STUDENT_KERNEL = {"name": "python3", "display_name": "Python 3", "language": "python"}


class ReleaseWithStudentKernel(Preprocessor):
    """Runs after nbgrader has recorded the source notebook (with the grading kernel) in
    the gradebook: the released copy names the ordinary python3 kernel students have."""

    enabled = True  # nbconvert's preprocessors are off unless switched on

    def preprocess(self, nb, resources):
        nb.metadata["kernelspec"] = dict(STUDENT_KERNEL)
        return nb, resources


class StopOnSetupError(Preprocessor):
    """Fails the notebook (so nbgrader fails the submission) when a cell shows an error
    that means the grading set-up, not the student's code, went wrong."""

    enabled = True

    def preprocess(self, nb, resources):
        problems = []
        for number, cell in enumerate(nb.cells, start=1):
            if cell.get("cell_type") != "code":
                continue
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error" and output.get("ename") in FATAL_ERRORS:
                    ename, said = output.get("ename"), output.get("evalue", "")
                    problems.append(f"{ename}: {said or _what_stopped(ename, number, cell)}"[:500])
        if problems:
            _fail(self.log, nb, resources, problems)
        return nb, resources


def _what_stopped(ename: str, number: int, cell) -> str:
    """The words nbgrader leaves out of a time-out or a dead kernel: which cell, and what it is."""
    grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    which = f"cell {number} ({grade_id})" if grade_id else f"cell {number} (a cell of the student's own)"
    if ename == "CellTimeoutError":
        return f"{which} ran past the cell time limit (Execute.timeout in nbgrader_config.py)"
    return f"the kernel died while {which} ran"


# The package as it was before the notebook ran, kept in nbgrader's resources between
# the two steps below.
SNAPSHOT = "hero_transformer_submission"


def _notebook_cell():
    """The kit's grading for notebook cells, imported from the kit this file belongs to."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from grader.lms import notebook_cell

    return notebook_cell


class ReadPackageBeforeRunning(Preprocessor):
    """Runs before nbgrader executes the notebook. The notebook's kernel runs the
    student's code with the TA's rights, so what lies on disk after it ran is whatever
    that code left there: the package is read into nbgrader's own memory first."""

    enabled = True

    def preprocess(self, nb, resources):
        notebook_cell = _notebook_cell()
        folder = Path(resources.get("metadata", {}).get("path") or ".").resolve()
        try:
            resources[SNAPSHOT] = notebook_cell.submission_in(folder)
        except notebook_cell.HeroTransformerSetupError as problem:
            resources[SNAPSHOT] = problem
        return nb, resources


class GradeOutsideTheKernel(Preprocessor):
    """Runs after nbgrader executed the notebook. A cell a student adds can redefine
    whatever the task cells call in the kernel, so the kernel's word is not taken: each
    task cell is graded again here, on the package read before the notebook ran, and its
    outputs become that report and score (what nbgrader records and shows)."""

    enabled = True

    def preprocess(self, nb, resources):
        from nbformat.v4 import new_output

        notebook_cell = _notebook_cell()
        snapshot = resources.pop(SNAPSHOT, None)
        self._restore_deleted_task_cells(nb, resources)
        for cell in nb.cells:
            task = _task_of(cell)
            if task is None:
                continue
            try:
                if snapshot is None:
                    raise notebook_cell.HeroTransformerSetupError(
                        "the package was not read before the notebook ran (ReadPackageBeforeRunning is missing "
                        "from Autograde.autograde_preprocessors)")
                if isinstance(snapshot, Exception):
                    raise snapshot
                text, score = notebook_cell.grade_cell(task, snapshot)
            except notebook_cell.HeroTransformerSetupError as problem:
                _fail(self.log, nb, resources, [f"{SETUP_ERROR}: {problem}"[:500]])
            cell.outputs = [new_output("stream", name="stdout", text=text),
                            new_output("execute_result", data={"text/plain": repr(score)},
                                       execution_count=cell.get("execution_count"))]
        return nb, resources


    def _restore_deleted_task_cells(self, nb, resources):
        """A task cell the student deleted is put back (from nbgrader's gradebook) at the
        end of the notebook, so its task is graded like any other, never silently lost."""
        from nbformat.v4 import new_code_cell

        info = resources.get("nbgrader", {})
        if not {"db_url", "notebook", "assignment"} <= info.keys():
            return
        from nbgrader.api import Gradebook

        present = {cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") for cell in nb.cells}
        with Gradebook(info["db_url"]) as gradebook:
            notebook = gradebook.find_notebook(info["notebook"], info["assignment"])
            for grade in notebook.grade_cells:
                if grade.name in present or grade.cell_type != "code":
                    continue
                source = gradebook.find_source_cell(grade.name, info["notebook"], info["assignment"])
                cell = new_code_cell(source.source)
                cell.metadata["nbgrader"] = {"grade": True, "grade_id": grade.name, "locked": True,
                                             "points": grade.max_score, "schema_version": 3, "solution": False,
                                             "task": False}
                if _task_of(cell) is not None:
                    self.log.warning("%s: the task cell %s was deleted; it is put back and graded",
                                     resources.get("metadata", {}).get("path", ""), grade.name)
                    nb.cells.append(cell)


def _task_of(cell) -> str | None:
    """The task a grade cell scores: its id is `chNN-<task>` (set by the notebook builder
    and kept by nbgrader's gradebook, whatever the submitted file says)."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    if cell.get("cell_type") != "code" or not meta.get("grade"):
        return None
    chapter, _, task = str(meta.get("grade_id", "")).partition("-")
    return task if len(chapter) == 4 and chapter.startswith("ch") and task else None


def _fail(log, nb, resources, problems: list[str]):
    """No grade for this submission: the error in nbgrader's log, its scores cleared and
    marked for a person in the formgrader, and nbgrader's exit status non-zero."""
    where = resources.get("metadata", {}).get("path", "")
    for problem in problems[:3]:
        log.error("hero_transformer could not grade %s: %s", where, problem)
    _flag_for_review(log, nb, resources)
    raise RuntimeError(f"hero_transformer could not grade {where}: {problems[0]} (no grade recorded)")


def _flag_for_review(log, nb, resources):
    """A score left from an earlier run must not stand, and the formgrader should show
    the submission as waiting for a person: clear the autograde scores, mark them for
    manual grading."""
    info = resources.get("nbgrader", {})
    if not {"db_url", "notebook", "assignment", "student"} <= info.keys():
        return
    from nbgrader.api import Gradebook, MissingEntry

    try:
        with Gradebook(info["db_url"]) as gradebook:
            for cell in nb.cells:
                meta = cell.get("metadata", {}).get("nbgrader", {})
                if not meta.get("grade"):
                    continue
                try:
                    grade = gradebook.find_grade(meta["grade_id"], info["notebook"], info["assignment"],
                                                 info["student"])
                except MissingEntry:
                    continue
                grade.auto_score = None
                grade.needs_manual_grade = True
            gradebook.db.commit()
    except Exception as error:  # noqa: BLE001 - the set-up error below is what must reach the TA
        log.error("could not mark the submission for review in the gradebook: %r", error)


CONFIG = '''\
# nbgrader settings for a hero_transformer course, written by
# `python -m grader nbgrader-course`. Run every nbgrader command in this folder.
import importlib.util
import os
from pathlib import Path

from nbgrader.converters import Autograde, GenerateAssignment
from nbgrader.preprocessors import Execute, SaveCells

HERE = Path(__file__).resolve().parent
# The kit: the folder holding grader/ and solutions/ (the reference, never given to students).
KIT = Path({kit!r})
c = get_config()  # noqa: F821 - provided by the configuration loader

# nbgrader runs what it needs by name (`alembic` when it makes the gradebook): the kit's
# environment comes first on PATH, whatever the shell that started nbgrader has on it.
BIN = {bindir!r}
os.environ["PATH"] = os.pathsep.join([BIN] + [p for p in os.environ.get("PATH", "").split(os.pathsep)
                                              if p and p != BIN])

c.CourseDirectory.root = str(HERE)

# traitlets only logs an exception raised here and goes on without this file; leaving
# the process is the one way to stop a command that would grade without the kit.
if not (KIT / "grader" / "run" / "engine.py").is_file():
    raise SystemExit(f"nbgrader_config.py: no hero_transformer kit at {{KIT}} (grader/run/engine.py is missing); "
                     f"set KIT to the kit's folder")

# The grader's own worst case for one cell (sandbox start, then every check of the
# slowest task at its time limit); nbgrader's default of 30 s would cut off correct code.
c.Execute.timeout = {timeout}

# Nothing from source/ is copied over a submission at autograde time: the starter
# package stays what the student submitted, or absent when they submitted none.
c.Autograde.exclude_overwriting = {{
    folder.name: sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                        if p.is_file() and p.suffix != ".ipynb")
    for folder in (HERE / "source").iterdir() if folder.is_dir()
}}

# A broken set-up (no grader, no package, no sandbox) fails autograde for that
# submission, with an error in the log, instead of recording 0.
_spec = importlib.util.spec_from_file_location("hero_transformer_nbgrader", KIT / "grader" / "lms" / "nbgrader_course.py")
_hooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_hooks)
# The task cells are graded again after the notebook ran, outside its kernel (where a
# student's own cell could redefine what they call), on the package as read before.
_steps = Autograde.class_traits()["autograde_preprocessors"].default()
_at = _steps.index(Execute)
_steps[_at:_at + 1] = [_hooks.ReadPackageBeforeRunning, Execute, _hooks.StopOnSetupError,
                       _hooks.GradeOutsideTheKernel]
c.Autograde.autograde_preprocessors = _steps
os.environ["HERO_TRANSFORMER_GRADED_OUTSIDE_THE_KERNEL"] = "1"  # so the kernel need not grade them too

# The gradebook keeps the source's grading kernel; students get the usual python3 one.
_steps = GenerateAssignment.class_traits()["preprocessors"].default()
_steps.insert(_steps.index(SaveCells) + 1, _hooks.ReleaseWithStudentKernel)
c.GenerateAssignment.preprocessors = _steps

# The graded kernel, and the kit it grades with: absolute paths, never the TA's shell.
# Last, so that a failure above leaves the grading kernel unfindable (autograde stops)
# rather than running without the settings above.
os.environ["HERO_TRANSFORMER_COURSE"] = str(KIT)
{weak}c.Execute.kernel_name = {kernel!r}
os.environ["JUPYTER_PATH"] = os.pathsep.join(
    [str(HERE / "jupyter")] + [p for p in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if p])
'''

README = """\
# hero_transformer — nbgrader course

Made by `python -m grader nbgrader-course` from the kit in `{kit}`
(chapters {chapters}). Run every `nbgrader` command in this folder; nothing needs to be
on PATH (`nbgrader_config.py` puts the kit's environment first for what nbgrader runs):

```bash
cd {here}
{nbgrader} generate_assignment {first}        # source/ -> release/: the notebook and the starter package
# hand out release/{first}/ (or `nbgrader release_assignment` with an exchange)
# collect each student's folder into submitted/<student>/{first}/
{nbgrader} autograde {first}                  # grades submitted/ -> autograded/ and the gradebook
{nbgrader} export                             # grades.csv for the LMS
```

A student's submission is their copy of the assignment folder: the notebook and their
`hero_transformer/` package beside it (at any depth inside the folder). Students write
their code in the package; the notebook's locked cells grade it.

`autograde` stops with an error, and records no grade, for a submission it cannot
grade: no `hero_transformer/` in the submission, the kit missing from `{kit}`,
no bubblewrap. Read the log, fix the cause, and run
`{nbgrader} autograde {first} --student <id> --force` again. Exit status 0 means every
submission was graded.

Do not edit the `source/` notebooks' locked cells. If the kit moves, run
`python -m grader nbgrader-course` again for a new course folder (or edit `KIT` in
`nbgrader_config.py` and the paths in `jupyter/kernels/{kernel}/kernel.json`).
See `docs/teaching.md` in the kit for the whole guide.
"""


def kernel_spec(python: str, kit: Path) -> dict:
    return {
        # -P: the notebook's folder is not put on sys.path, so nothing a student places
        # beside the notebook can stand in for ipykernel, torch or the grader.
        "argv": [python, "-P", "-m", "ipykernel_launcher", "--IPKernelApp.ignore_cwd=True",
                 "-f", "{connection_file}"],
        "display_name": "hero_transformer (grading)",
        "language": "python",
        "env": {"HERO_TRANSFORMER_COURSE": str(kit)},
        "metadata": {"debugger": False},
    }


def cell_timeout(chapters) -> int:
    from grader.lms.notebook_cell import task_seconds

    # A minute on top for the kernel's own start and the set-up cell's imports.
    return int(max(task_seconds(c) for c in chapters) + 60)


def build(dest: Path, chapters: list[str] | None = None, kit: Path = ROOT, python: str | None = None,
          allow_weak_sandbox: bool = False) -> list[str]:
    """Write the course into dest (which must be empty or absent); the assignment names."""
    from grader.checks import catalogue
    from grader.generate.lesson_tables import CHAPTER_FOLDERS
    import nbformat

    from grader.generate.notebooks import build as build_notebook

    kit = kit.resolve()
    # The folder resolved, the file name kept: a venv reached through a symbolic link still
    # runs as that venv, and its real path is what the sandbox mounts.
    python = python or str(Path(sys.executable).parent.resolve() / Path(sys.executable).name)
    dest = Path(dest).resolve()
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"{dest} is not empty: choose a new folder for the course")
    known = {c.number: c for c in catalogue.chapters()}
    chosen = [n for n in (chapters or sorted(known)) if n in known]
    folders = [f for f in CHAPTER_FOLDERS if f[2:4] in chosen]
    if not folders:
        raise ValueError("no chapter with checks was chosen")
    starter = kit / "hero_transformer"
    for folder in folders:
        assignment = dest / "source" / folder
        assignment.mkdir(parents=True)
        notebook = build_notebook(folder)
        notebook.metadata["kernelspec"] = {"name": KERNEL_NAME, "display_name": "hero_transformer (grading)",
                                           "language": "python"}
        (assignment / f"{folder}.ipynb").write_text(nbformat.writes(notebook) + "\n", encoding="utf-8")
        shutil.copytree(starter, assignment / "hero_transformer",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    kernel_dir = dest / "jupyter" / "kernels" / KERNEL_NAME
    kernel_dir.mkdir(parents=True)
    (kernel_dir / "kernel.json").write_text(json.dumps(kernel_spec(python, kit), indent=2) + "\n", encoding="utf-8")
    weak = ('os.environ["HERO_TRANSFORMER_ALLOW_WEAK_SANDBOX"] = "1"  # graded code can read the reference\n'
            if allow_weak_sandbox else "")
    timeout = cell_timeout([known[n] for n in chosen])
    bindir = str(Path(python).parent)
    (dest / "nbgrader_config.py").write_text(
        CONFIG.format(kit=str(kit), kernel=KERNEL_NAME, timeout=timeout, weak=weak, bindir=bindir), encoding="utf-8")
    (dest / "README.md").write_text(README.format(kit=kit, here=shlex.quote(str(dest)), chapters=", ".join(chosen),
                                                  nbgrader=shlex.quote(str(Path(bindir) / "nbgrader")),
                                                  first=folders[0], kernel=KERNEL_NAME), encoding="utf-8")
    return folders
