"""The hero_transformer grader.

    checks/       what is graded: one package per chapter, one module per task
    run/          grading one submission: engine, the runners that hold student code, the
                  code inside them (run/inside/), scans, reports
    grade_class/  grading a class: uploads in, one record per upload, feedback and summary out
    lms/          every LMS back end: Gradescope, nbgrader, GitHub Classroom, gradebook files
    generate/     what authors generate from solutions/: student copy, lesson tables,
                  figures, notebooks, the student release
    qa/           the grader's own quality: mutant catalogue, outcomes, benches, demo
    files.py      atomic writes and JSON read-back, for every folder above
    edition.py    "course" here; "student" in the release a student receives

docs/architecture.md follows a submission through them.
"""

from pathlib import Path

KIT_ROOT = Path(__file__).resolve().parent.parent  # the folder holding grader/ and solutions/
