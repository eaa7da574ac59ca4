"""The hero_transformer grader.

    checks/       what is graded: one package per chapter, one module per task
    run/          grading one submission: engine, sandbox, the code inside it, scans, reports
    grade_class/  grading a class: LMS downloads in, gradebooks and feedback out
    build/        what students and LMSs receive, generated from solutions/
    qa/           the grader's own quality: mutant catalogue, benches, demo

docs/architecture.md follows a submission through them.
"""

from pathlib import Path

KIT_ROOT = Path(__file__).resolve().parent.parent  # the folder holding grader/ and solutions/
