"""Grading a whole class: every folder or .zip in a directory is one student's upload.

    python -m grader grade-class uploads/ --csv gradebook.csv --json-dir results/

The CSV has one row per student (the upload's name without .zip), the total, the
maximum, one column per chapter, and a note when the upload could not be graded;
Canvas and Moodle import it as a gradebook. Each student's Gradescope-shaped
results.json goes into --json-dir. Each student gets a fresh sandbox.
"""

from __future__ import annotations

import csv
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from grader import catalogue
from grader.engine import GradeReport, grade, possible_points
from grader.report import results_json, write_json
from grader.sandbox import Limits, Sandbox
from grader.submission import SubmissionError, load


def uploads(folder: Path) -> list[Path]:
    entries = [p for p in sorted(folder.iterdir()) if not p.name.startswith((".", "__MACOSX"))]
    return [p for p in entries if p.is_dir() or p.suffix.lower() == ".zip"]


def _cell(value):
    """Text a spreadsheet would run as a formula gets a leading quote."""
    return "'" + value if isinstance(value, str) and value[:1] in ("=", "+", "-", "@") else value


def student_id(upload: Path) -> str:
    return upload.name[:-4] if upload.suffix.lower() == ".zip" else upload.name


def grade_class(folder: Path, csv_path: Path, json_dir: Path | None = None, chapters=None,
                public_only: bool = False, seed: int | None = None, console: Console | None = None,
                budget: float = 600.0) -> list[dict]:
    console = console or Console()
    if not folder.is_dir():
        raise SubmissionError(f"{folder} is not a folder of uploads")
    found = uploads(folder)
    if not found:
        raise SubmissionError(f"{folder} holds no upload folders or .zip files")
    numbers = [c.number for c in catalogue.chapters() if not chapters or c.number in chapters]
    rows = []
    with Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console) as progress:
        bar = progress.add_task("grading", total=len(found))
        for upload in found:
            name = student_id(upload)
            if any(row["student"] == name for row in rows):
                name = upload.name  # alice/ and alice.zip: keep both, apart
            progress.update(bar, description=f"grading {name}")
            # A fresh sandbox per student: nothing one upload leaves behind reaches the next.
            with Sandbox(Limits(submission_seconds=budget)) as sandbox:
                try:
                    report = grade(load(upload), chapters, public_only=public_only, sandbox=sandbox, seed=seed)
                except SubmissionError as problem:
                    report = GradeReport(str(upload), [], sandbox.describe(), "none", problem=str(problem))
                except Exception as crash:  # noqa: BLE001 - one upload must never cost the class its gradebook
                    report = GradeReport(str(upload), [], sandbox.describe(), "none",
                                         problem=f"the grader hit an internal error on this upload: {crash!r}")
            if json_dir is not None:
                write_json(results_json(report), json_dir / f"{name}.json")
            per_chapter = results_json(report)["extra_data"]["chapters"]
            row = {"student": name, "total": report.score, "max": possible_points(chapters, public_only)}
            for number in numbers:
                row[f"ch{number}"] = per_chapter.get(number, {}).get("score", 0)
            row["note"] = _cell(report.problem)
            rows.append(row)
            progress.advance(bar)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with csv_path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=["student", "total", "max", *[f"ch{n}" for n in numbers], "note"])
        writer.writeheader()
        writer.writerows(rows)
    return rows
