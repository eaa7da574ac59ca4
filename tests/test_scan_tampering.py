"""Regressions for problems a review found: each once cost a student points or stalled
grading."""

from __future__ import annotations

from pathlib import Path

from grader.run.reference import Reference
from grader.run.scan_tampering import scan_submission

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
