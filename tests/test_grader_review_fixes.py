"""Regressions for problems a review found: each once cost a student points or stalled
grading."""

from __future__ import annotations

import zipfile
from pathlib import Path

from grader.run.reference import Reference
from grader.run.engine import grade
from grader.run.processes import Limits
from grader.run.sandbox import Sandbox
from grader.run.scan_tampering import scan_submission
from grader.run.submission import load

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "hero_transformer"


def test_prose_that_mentions_the_grader_is_not_tampering():
    sources = dict(Reference().sources)
    sources["tokenizer.py"] += (
        '\n\ndef _note():\n    """My own helper; the autograder never calls it."""\n'
        '    raise ValueError("the grader checks this")\n')
    assert scan_submission(sources) == []
    sources["tokenizer.py"] += '\nTARGET = "grader.checks.ch05_block.gelu"\n'
    assert scan_submission(sources)


def test_an_absurd_line_of_source_costs_nothing_else():
    sources = dict(Reference().sources)
    sources["junk.py"] = "x = a" + ".b" * 100_000 + "\n"
    assert scan_submission(sources) == []  # unparsable here; the worker reports it if it matters


def test_a_utf8_bom_and_windows_zip_paths_are_read(tmp_path):
    archive = tmp_path / "upload.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for source in SOLUTIONS.glob("*.py"):
            z.writestr(f"hero_transformer\\{source.name}", "\ufeff" + source.read_text())
    submission = load(archive)
    assert "model.py" in submission.sources and not submission.sources["model.py"].startswith("\ufeff")
    with Sandbox(Limits()) as box:
        report = grade(submission, chapters=["02"], runner=box, seed=1)
    assert report.score == report.max_score > 0
