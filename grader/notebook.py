"""What an nbgrader notebook's autograder cell calls: `score_task("block")` grades one
task of the hero_transformer/ package beside the notebook with the sandboxed engine,
prints its report, and returns the points earned, which nbgrader takes as partial
credit for the cell."""

from __future__ import annotations

import secrets
from pathlib import Path

from rich.console import Console

from grader import catalogue
from grader.engine import Reference, grade_task
from grader.report import render
from grader.sandbox import Limits, Sandbox
from grader.submission import SubmissionError, load

_sandbox: Sandbox | None = None


def _package() -> Path:
    for folder in [Path.cwd(), *Path.cwd().parents]:
        if (folder / "hero_transformer" / "model.py").exists():
            return folder / "hero_transformer"
    raise SubmissionError("no hero_transformer/ package next to this notebook or above it")


def score_task(task_name: str, package: str | Path | None = None) -> float:
    global _sandbox
    from grader.engine import GradeReport

    tasks = catalogue.tasks()
    if task_name not in tasks:
        raise ValueError(f"unknown task {task_name!r}; tasks: {', '.join(sorted(tasks))}")
    task = tasks[task_name]
    chapter = catalogue.chapter_of_task()[task_name]
    reference = Reference.available()
    # Without the reference (a student's copy of the course) only public checks can run;
    # their points are scaled to the cell's full value.
    checks = [c for c in chapter.checks if c.task == task_name and (reference or not c.hidden)]
    full = sum(c.points for c in chapter.checks if c.task == task_name)
    if _sandbox is None:
        _sandbox = Sandbox(Limits())
    submission = load(package or _package())
    # A fresh random seed per call: the hidden checks' inputs cannot be computed in
    # advance from grader/checks (which students have) and looked up.
    results = grade_task(task, checks, submission, reference, _sandbox, seed=secrets.randbelow(2**31))
    report = GradeReport(submission.label, results, _sandbox.describe(),
                         "the reference" if reference else "none (public checks only)")
    render(report, Console(force_jupyter=False, width=100))
    possible = sum(c.points for c in checks)
    return round(full * report.score / possible, 4) if possible else 0.0
