"""The gradebook files an LMS imports, written from a class run's results
(grader.grade_class.outputs.ClassResults): Canvas's gradebook CSV, Moodle's grading
worksheet and an nbgrader gradebook database. Each course's format is one function
here, named in WRITERS; grade-class --format picks one."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

from grader.files import write_atomic
from grader.grade_class.records import needs_grading
from grader.grade_class.uploads import InputError
from grader.run.report import plain

CANVAS_FIRST = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


def cell(value):
    """Text a spreadsheet would run as a formula (or a DDE command) gets a leading quote."""
    if isinstance(value, str):
        value = plain(value).replace("\r", " ").replace("\n", " ")
        if value[:1] in ("=", "+", "-", "@", "\t", "|", "%"):
            return "'" + value
    return value


def number(value) -> str:
    return f"{float(value):g}"


def csv_text(header: list[str], rows: list[list]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow([cell(h) for h in header])
    writer.writerows([[cell(v) for v in row] for row in rows])
    return buffer.getvalue()


# The note of an upload some of whose checks the grader could not run (grade left blank).
INCOMPLETE = ("incomplete: {} check(s) the grader could not run (the machine was too busy, or had no process for "
              "them); the grade is left blank until grade-class is run again")


def _grade_columns(data) -> list[tuple[str, str | None]]:
    """(header, chapter or None for the total) of each grade column. A roster exported
    from Canvas already names its assignments `Name (id)`: that header is reused."""
    name, given_id = data.options["assignment"], data.options["assignment_id"]
    existing = data.options.get("roster_columns") or []

    def header(title: str) -> str:
        for column in existing:
            if column.startswith(f"{title} (") and column.endswith(")"):
                return column
        return f"{title} ({given_id})" if given_id and title == name else title

    if data.options["columns"] == "chapters":
        return [(header(f"{name} ch{n}"), n) for n in data.numbers]
    return [(header(name), None)]


def _score(record: dict | None, chapter: str | None) -> str:
    """A grade cell; blank where nothing was uploaded, or where the grader could not run
    some checks (incomplete: an LMS's import leaves the grade unset rather than count
    points the student never lost; a rerun of grade-class fills it)."""
    if record is None or needs_grading(record):
        return ""
    return number(record["score"] if chapter is None else record["chapters"].get(chapter, {}).get("score", 0))


def canvas_csv(data) -> str:
    columns = _grade_columns(data)
    rows = [["    Points Possible", "", "", "", "",
             *[number(data.max_score() if c is None else chapter_max(data, c)) for _, c in columns]]]
    for s in data.students:
        record = data.of.get(s.key)
        rows.append([s.name or s.login, s.id, s.sis_user_id, s.sis_login_id, s.section,
                     *[_score(record, c) for _, c in columns]])
    return csv_text(CANVAS_FIRST + [h for h, _ in columns], rows)


def chapter_max(data, chapter: str) -> float:
    from grader.run.schedule import possible_points

    return possible_points([chapter], data.settings.get("public_only", False))


def moodle_csv(data) -> str:
    """Moodle's grading worksheet (Identifier, Grade) that its gradebook import also maps
    by email address or username."""
    columns = _grade_columns(data)
    chapter_columns = [(h, c) for h, c in columns if c is not None]
    rows = []
    for s in data.students:
        record = data.of.get(s.key)
        rows.append([s.identifier, s.name, s.email, s.login or s.sis_login_id, _score(record, None),
                     number(data.max_score()), *[_score(record, c) for _, c in chapter_columns],
                     _feedback_line(record)])
    return csv_text(["Identifier", "Full name", "Email address", "Username", "Grade", "Maximum Grade",
                 *[h for h, _ in chapter_columns], "Feedback comments"], rows)


def _feedback_line(record: dict | None) -> str:
    if record is None:
        return "nothing was uploaded"
    if record["problem"]:
        return record["problem"]
    if needs_grading(record):
        return INCOMPLETE.format(record["infrastructure"])
    failed = sum(c["status"] != "passed" for c in record["checks"])
    return f"{len(record['checks']) - failed} of {len(record['checks'])} checks passed"


def nbgrader_gradebook(data, path: Path) -> None:
    """One notebook per chapter with one grade cell worth the chapter's points, and each
    student's chapter score as its autograded score: what formgrader shows."""
    try:
        from nbgrader.api import Gradebook, MissingEntry
    except ImportError:
        raise InputError("--format nbgrader needs nbgrader: pip install nbgrader") from None
    import shutil
    import sys

    if shutil.which("alembic") is None:
        # nbgrader runs the `alembic` command to stamp a new database; a venv's python run
        # without activating the venv (as `make` does) has it beside itself only.
        os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    assignment = data.options["assignment"]
    with Gradebook(f"sqlite:///{path.resolve()}") as gradebook:
        gradebook.update_or_create_assignment(assignment)
        for n in data.numbers:
            notebook = f"ch{n}"
            try:
                gradebook.find_notebook(notebook, assignment)
            except MissingEntry:
                gradebook.add_notebook(notebook, assignment)
            try:
                cell = gradebook.find_grade_cell("score", notebook, assignment)
                cell.max_score = chapter_max(data, n)
            except MissingEntry:
                gradebook.add_grade_cell("score", notebook, assignment, max_score=chapter_max(data, n),
                                         cell_type="code")
        gradebook.db.commit()
        for s in data.students:
            record = data.of.get(s.key)
            if record is None or needs_grading(record):
                continue  # incomplete: no grade until a rerun grades what could not run
            first, _, last = (s.name or s.short).partition(" ")
            if ", " in s.name:
                last, _, first = s.name.partition(", ")
            student_id = data.file_names[s.key]
            gradebook.update_or_create_student(student_id, first_name=first, last_name=last, email=s.email or None)
            try:
                gradebook.find_submission(assignment, student_id)
            except MissingEntry:
                gradebook.add_submission(assignment, student_id)
            for n in data.numbers:
                grade = gradebook.find_grade("score", f"ch{n}", assignment, student_id)
                grade.auto_score = float(record["chapters"].get(n, {}).get("score", 0))
            gradebook.db.commit()


WRITERS = {
    "canvas": lambda data, out: write_atomic(out / "canvas.csv", canvas_csv(data)),
    "moodle": lambda data, out: write_atomic(out / "moodle.csv", moodle_csv(data)),
    "nbgrader": lambda data, out: nbgrader_gradebook(data, out / "gradebook.db"),
}
FORMATS = ("csv", *WRITERS)  # csv: the kit's own gradebook.csv only, written for every format


def write_lms_gradebook(fmt: str, data, out: Path) -> None:
    if fmt in WRITERS:
        WRITERS[fmt](data, out)
