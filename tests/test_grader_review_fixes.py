"""Regressions for problems a review found: each once cost a student points or stalled
grading."""

from __future__ import annotations

import socket
import struct
import threading
import time
import zipfile
from pathlib import Path

import pytest

from grader.run.reference import Reference
from grader.run.engine import grade
from grader.run.inside import wire
from grader.run.processes import Limits
from grader.run.sandbox import Sandbox
from grader.run.scan_tampering import scan_submission
from grader.run.submission import load
from tests.timing import limit

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


def test_a_trickling_peer_cannot_outlast_the_timeout():
    ours, theirs = socket.socketpair()

    def trickle():
        theirs.sendall(struct.pack(">Q", 1000))
        for _ in range(20):
            time.sleep(0.2)
            try:
                theirs.sendall(b" ")
            except OSError:
                return

    threading.Thread(target=trickle, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        wire.recv(ours, deadline=time.monotonic() + 1.0)
    assert time.monotonic() - started < 1.0 + limit(1.0)
    ours.close()
    theirs.close()


def test_unsendable_values_come_back_as_text():
    class Loud:
        def __repr__(self):
            raise RuntimeError("no")

    sparse = __import__("torch").eye(3).to_sparse()
    back = wire.decode(__import__("json").dumps(wire.encode({"a": Loud(), "s": sparse})).encode())
    assert "Loud" in repr(back["a"])
    assert back["s"].shape == (3, 3)
