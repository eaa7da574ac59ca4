"""nbgrader notebooks, one per chapter, generated from the lessons and the catalogue.

    python -m grader.notebooks            write assignments/chNN_*/chNN_*.ipynb
    python -m grader.notebooks --check    exit 1 when a notebook is out of date

Each notebook is an nbgrader *source* notebook: the lesson as a read-only markdown
cell, a read-only set-up cell, and per task one read-only "autograder tests" cell
worth the task's points. That cell calls `score_task`, which grades the student's
hero_transformer/ package with the same sandboxed engine as `make grade` and prints
the report; its value (the points earned) is what nbgrader records as partial credit.
Students write their code in hero_transformer/, not in the notebook.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader import catalogue
from grader.assignments import ASSIGNMENTS, CHAPTER_FOLDERS

SETUP = '''\
# Imports the grader from the course folder (the one holding grader/). `nbgrader autograde`
# in a course made by `python -m grader nbgrader-course` sets HERO_TRANSFORMER_COURSE to
# that folder's absolute path; autograding without it is an error, never a grade. Outside
# autograding the folders above this notebook's are searched (never the notebook's own
# folder, which is the submission) and the scores are advisory only.
import os
import sys
from pathlib import Path


class HeroTransformerSetupError(RuntimeError):
    \"\"\"The grading set-up is broken: nothing below is a grade.\"\"\"


def _hero_transformer_course():
    named = os.environ.get("HERO_TRANSFORMER_COURSE", "")
    if named:
        if not Path(named).is_absolute() or not (Path(named) / "grader" / "engine.py").is_file():
            raise HeroTransformerSetupError(
                f"HERO_TRANSFORMER_COURSE={named!r} is not the absolute path of a folder holding grader/")
        return Path(named).resolve()
    if os.environ.get("NBGRADER_EXECUTION") == "autograde":
        raise HeroTransformerSetupError(
            "HERO_TRANSFORMER_COURSE is not set: autograde in a course made by "
            "`python -m grader nbgrader-course`, or set it to the course folder's absolute path")
    found = next((p for p in Path.cwd().resolve().parents if (p / "grader" / "engine.py").is_file()), None)
    if found is None:
        raise HeroTransformerSetupError(
            "no grader/ above this notebook's folder: set HERO_TRANSFORMER_COURSE to the course folder")
    print(f"WARNING: HERO_TRANSFORMER_COURSE is not set, so the grader found in {found} is used: "
          "the scores below are advisory, not grades.")
    return found


def _hero_transformer_import(course):
    # Only the course's grader: nothing of the same name from the notebook's own folder.
    here, saved = Path.cwd().resolve(), list(sys.path)
    for name in [m for m in sys.modules if m == "grader" or m.startswith("grader.")]:
        del sys.modules[name]
    sys.path[:] = [str(course)] + [p for p in saved if Path(p or ".").resolve() != here]
    try:
        import grader.notebook
    finally:
        sys.path[:] = saved
    if Path(grader.notebook.__file__).resolve().parent != (course / "grader").resolve():
        raise HeroTransformerSetupError(f"grader was imported from {grader.notebook.__file__}, not from {course}")
    return grader.notebook.score_task


score_task = _hero_transformer_import(_hero_transformer_course())'''


def _locked(grade_id: str, points: float | None = None) -> dict:
    meta = {"grade_id": grade_id, "locked": True, "schema_version": 3, "solution": False, "task": False,
            "grade": points is not None}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def build(folder: str) -> nbformat.NotebookNode:
    number = folder[2:4]
    chapter = next(c for c in catalogue.chapters() if c.number == number)
    lesson = (ASSIGNMENTS / folder / "README.md").read_text(encoding="utf-8")
    cells = [new_markdown_cell(lesson, metadata=_locked(f"ch{number}-lesson")),
             new_code_cell(SETUP, metadata=_locked(f"ch{number}-setup"))]
    for task in chapter.tasks:
        points = sum(c.points for c in chapter.checks if c.task == task.name)
        cells.append(new_markdown_cell(
            f"### Task `{task.name}` — {task.title}\n\nFill in `{task.qualname}` in "
            f"`hero_transformer/{task.module}.py`, then run the cell below ({points:g} points).",
            metadata=_locked(f"ch{number}-{task.name}-about")))
        cells.append(new_code_cell(f'score_task("{task.name}")', metadata=_locked(f"ch{number}-{task.name}", points)))
    for cell in cells:
        cell["id"] = cell.metadata["nbgrader"]["grade_id"]  # stable ids: regenerating changes nothing
    notebook = new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"}})
    nbformat.validate(notebook)
    return notebook


def path_of(folder: str) -> Path:
    return ASSIGNMENTS / folder / f"{folder}.ipynb"


def render(folder: str) -> str:
    return nbformat.writes(build(folder)) + "\n"


def stale() -> list[str]:
    known = {c.number for c in catalogue.chapters()}
    return [folder for folder in CHAPTER_FOLDERS if folder[2:4] in known
            and (not path_of(folder).exists() or path_of(folder).read_text(encoding="utf-8") != render(folder))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    out_of_date = stale()
    if args.check:
        for folder in out_of_date:
            print(f"{path_of(folder).relative_to(ASSIGNMENTS.parent)} is out of date: run `make student`")
        return 1 if out_of_date else 0
    for folder in out_of_date:
        path_of(folder).write_text(render(folder), encoding="utf-8")
    print(f"wrote {len(out_of_date)} notebook(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
