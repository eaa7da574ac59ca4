"""What an nbgrader notebook's autograder cell calls: `score_task("block")` grades one
task of the hero_transformer/ package in the notebook's own folder with the sandboxed
engine, prints its report, and returns the points earned, which nbgrader takes as
partial credit for the cell.

A problem that is not the student's code — no package in the submission, no
reference, no sandbox — raises HeroTransformerSetupError instead of returning 0: the
course's nbgrader_config.py turns that error into a failed `nbgrader autograde`
(see grader/lms/nbgrader_course.py), so no one is recorded a silent 0.
"""

from __future__ import annotations

import io
import os
import secrets
from pathlib import Path

from rich.console import Console

from grader import KIT_ROOT
from grader.checks import catalogue
from grader.run.reference import Reference
from grader.run.engine import grade_task
from grader.run.worker_session import Grading
from grader.run.report import render
from grader.run.processes import Limits
from grader.run.sandbox import Sandbox
from grader.run.submission import PACKAGE, SubmissionError, load

_sandbox: Sandbox | None = None

# nbgrader sets this variable while `nbgrader autograde` executes a notebook.
AUTOGRADING = ("NBGRADER_EXECUTION", "autograde")
# Where bubblewrap cannot run, a course may still autograde with process isolation only.
ALLOW_WEAK_SANDBOX = "HERO_TRANSFORMER_ALLOW_WEAK_SANDBOX"
# Set by the course's nbgrader configuration, which grades the task cells after the
# notebook ran (grader/lms/nbgrader_course.py): the kernel then need not grade them.
GRADED_OUTSIDE = "HERO_TRANSFORMER_GRADED_OUTSIDE_THE_KERNEL"


class HeroTransformerSetupError(RuntimeError):
    """The grading set-up is broken; the submission was not graded. The name is what the
    course's nbgrader preprocessor looks for in a cell's error output."""


def autograding() -> bool:
    return os.environ.get(AUTOGRADING[0]) == AUTOGRADING[1]


def _has_package(folder: Path) -> bool:
    for _, dirs, _ in os.walk(folder, followlinks=False):
        if PACKAGE in dirs:
            return True
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
    return False


def task_seconds(chapter) -> float:
    """An upper bound on what one score_task call of `chapter` can take, from the
    grader's own limits: booting the sandbox, then, for the slowest task, a fresh
    worker and the full time limit for every check (and for every input a check runs
    separately). A notebook cell's time limit below this could cut off code the grader
    would still accept."""
    limits = Limits()
    boot = limits.setup_seconds + 30  # Sandbox._await_ready allows this much for the zygote
    slowest = max((sum(max(1, len(c.separately)) * (limits.setup_seconds + min(c.timeout, limits.check_seconds))
                       for c in chapter.checks if c.task == task.name) for task in chapter.tasks), default=0.0)
    return boot + slowest


def _sandbox_for_grading() -> Sandbox:
    global _sandbox
    if _sandbox is None:
        _sandbox = Sandbox(Limits())
    if autograding() and _sandbox.kind != "bwrap" and os.environ.get(ALLOW_WEAK_SANDBOX) != "1":
        raise HeroTransformerSetupError(
            "bubblewrap is not usable on this machine, so the code being graded could read the reference. "
            "Install bubblewrap, or build the course with `nbgrader-course --allow-weak-sandbox` to grade "
            "with process isolation only.")
    return _sandbox


def submission_in(folder: Path):
    """The package submitted in `folder` (the notebook's own), or a set-up error."""
    if not _has_package(folder):
        raise HeroTransformerSetupError(
            f"no {PACKAGE}/ folder in this submission ({folder}): the notebook grades only the package "
            f"submitted beside it. Submit the {PACKAGE}/ folder together with the notebook.")
    return _read(folder)


def _read(path: Path):
    try:
        return load(path)
    except SubmissionError as problem:
        raise HeroTransformerSetupError(f"the submission could not be read: {problem}") from None


def grade_cell(task_name: str, submission) -> tuple[str, float]:
    """One task cell's report, as text, and the points it earns, which nbgrader takes as
    partial credit: the task's checks, graded in the sandbox."""
    from grader.run.results import RUNNER_FAILED, GradeReport

    tasks = catalogue.tasks()
    if task_name not in tasks:
        raise ValueError(f"unknown task {task_name!r}; tasks: {', '.join(sorted(tasks))}")
    task = tasks[task_name]
    chapter = catalogue.chapter_of_task()[task_name]
    reference = Reference.available()
    if reference is None and autograding():
        raise HeroTransformerSetupError(
            f"the grader in {KIT_ROOT} has no solutions/: hidden checks cannot run. "
            f"Point HERO_TRANSFORMER_COURSE at the instructor's copy of the kit.")
    # Without the reference (a student's copy of the course) only public checks can run;
    # their points are scaled to the cell's full value.
    checks = [c for c in chapter.checks if c.task == task_name and (reference or not c.hidden)]
    full = sum(c.points for c in chapter.checks if c.task == task_name)
    sandbox = _sandbox_for_grading()
    # A fresh random seed per call: the hidden checks' inputs cannot be computed in
    # advance from grader/checks (which students have) and looked up.
    results = grade_task(task, checks, Grading(submission, reference, sandbox, seed=secrets.randbelow(2**31)))
    broken = [r for r in results if r.cause == RUNNER_FAILED]
    if broken:
        raise HeroTransformerSetupError(broken[0].staff_diagnosis or broken[0].diagnosis)
    report = GradeReport(submission.label, results, sandbox.describe(),
                         "the reference" if reference else "none (public checks only)")
    console = Console(file=io.StringIO(), force_jupyter=False, force_terminal=False, width=100)
    render(report, console)
    possible = sum(c.points for c in checks)
    return console.file.getvalue(), (round(full * report.score / possible, 4) if possible else 0.0)


def score_task(task_name: str, package: str | Path | None = None) -> float:
    """What a task cell calls: grade the task, print its report, return its points."""
    submission = _read(Path(package)) if package is not None else submission_in(Path.cwd())
    if autograding() and os.environ.get(GRADED_OUTSIDE) == "1":
        # The course's nbgrader set-up grades this cell itself, outside this kernel (which
        # runs the student's code), on the package as it was before the notebook ran.
        print("This cell is scored by the course's autograder, outside the notebook's kernel.")
        return 0.0
    text, score = grade_cell(task_name, submission)
    print(text, end="")
    return score
