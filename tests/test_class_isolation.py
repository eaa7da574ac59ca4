"""One upload never changes another's result.

The issue's attack: in grade-class, an upload whose import starts processes until the
sandbox's shared process limit is full, then sleeps, left the upload graded beside it
unable to start workers (the reference scored 13/36 beside it, blamed as "the process
running the code ended without answering", and a rerun kept it). Now each upload's
import-once process has a process limit of its own, as each worker has, and the zygote
that forks them another; a check the machine or the sandbox could not serve is the
grader's failure ("the grader could not run this check: regrade"), tried again, and
graded again by a rerun.

Each test grades a small class twice, with and without hostile uploads (ones that
starve the sandbox of processes, try to kill everything they can see, or flood their
output), and asserts every other upload's record is the same in both.
"""

from __future__ import annotations

import textwrap
import zipfile
from pathlib import Path

import pytest
from rich.console import Console

from grader.__main__ import main as cli
from grader.grade_class.gradebook import grade_class
from grader.grade_class.records import needs_grading, read_records
from grader.run.worker_session import INFRASTRUCTURE
from grader.run.results import ERROR
from grader.run.sandbox import Sandbox, bwrap_works

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "hero_transformer"
NO_RESIDUAL = ("hidden = hidden + self.residual_dropout(fed)", "hidden = self.residual_dropout(fed)")
CLASS = {"chapters": ["05"], "seed": 11, "jobs": 2, "budget": 240.0}

needs_bwrap = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap is not usable on this machine")

# Appended to the upload's model.py, which every task of chapter 05 imports.
ATTACKS = {
    # As many threads as its limit lets it start, then forks (refused: no process of its
    # own), then a sleep under the import time limit, holding all it started.
    "starves the sandbox of processes": """
        import os as _rt_os, threading as _rt_threading, time as _rt_time
        _rt_started = 0
        while _rt_started < 4096:
            try:
                _rt_threading.Thread(target=_rt_time.sleep, args=(60,), daemon=True).start()
            except Exception:
                break
            _rt_started += 1
        for _ in range(4096):
            try:
                if getattr(_rt_os, "fo" + "rk")() == 0:
                    _rt_time.sleep(60)
                    _rt_os._exit(0)
            except Exception:
                break
        _rt_time.sleep(4)
    """,
    # Every process it can name, at import and while a check runs.
    "kills its siblings": """
        import os as _rt_os, signal as _rt_signal

        def _rt_kill_everything():
            for pid in [-1, *range(1, 4096)]:
                if pid != _rt_os.getpid():
                    try:
                        _rt_os.kill(pid, _rt_signal.SIGKILL)
                    except Exception:
                        pass

        _rt_kill_everything()
    """,
    # Output as fast as it can write it, at import and while a check runs.
    "floods its output": """
        import sys as _rt_sys, time as _rt_time

        def _rt_flood(seconds):
            end, chunk = _rt_time.monotonic() + seconds, "x" * 65536
            while _rt_time.monotonic() < end:
                _rt_sys.stdout.write(chunk)
                _rt_sys.stderr.write(chunk)

        _rt_flood(3)
    """,
}
# What the attack does again while a check of its GELU runs.
DURING_A_CHECK = {"kills its siblings": "_rt_kill_everything()", "floods its output": "_rt_flood(2)"}


def _zip(folder: Path, name: str, append: str = "", replace: tuple[str, str] | None = None,
         gelu_first: str = "") -> None:
    with zipfile.ZipFile(folder / f"{name}.zip", "w") as archive:
        for file in sorted(SOLUTIONS.glob("*.py")):
            text = file.read_text()
            if replace and replace[0] in text:
                text = text.replace(*replace)
            if file.name == "model.py" and gelu_first:
                marker = "### BEGIN SOLUTION"
                start = text.index(marker, text.index("def gelu"))
                text = text[:start] + f"{gelu_first}\n    " + text[start:]
            if file.name == "model.py" and append:
                text += "\n\n" + textwrap.dedent(append) + "\n"
            archive.writestr(f"hero_transformer/{file.name}", text)


def _honest(folder: Path) -> None:
    """The uploads whose records must not change: a right one and a wrong one, named so
    that each is graded beside a hostile one (two at a time, in name order)."""
    _zip(folder, "b_alice")
    _zip(folder, "d_bob", replace=NO_RESIDUAL)


def _records(out: Path) -> dict[str, dict]:
    """Each upload's record as the gradebook reads it, less what differs between any two
    runs (times, the run's own paths)."""
    return {record["upload"]["label"]: {key: record.get(key) for key in
                                        ("status", "problem", "score", "max_score", "chapters", "checks",
                                         "infrastructure")}
            for record in read_records(out).values()}


def _grade(folder: Path, out: Path) -> dict[str, dict]:
    grade_class(folder, out, console=Console(quiet=True), **CLASS)
    return _records(out)


@pytest.fixture(scope="module")
def alone(tmp_path_factory):
    """The honest uploads graded without any hostile one beside them."""
    if not bwrap_works():
        pytest.skip("bubblewrap is not usable on this machine")
    with Sandbox() as box:
        if not box.isolates_workers():
            pytest.skip("this machine gives workers no namespaces of their own")
    base = tmp_path_factory.mktemp("alone")
    (base / "in").mkdir()
    _honest(base / "in")
    records = _grade(base / "in", base / "out")
    assert records["b_alice.zip"]["score"] == records["b_alice.zip"]["max_score"], records["b_alice.zip"]
    assert records["d_bob.zip"]["score"] < records["d_bob.zip"]["max_score"]
    return records


@pytest.mark.slow
@needs_bwrap
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_hostile_upload_changes_no_other_record(alone, tmp_path, attack):
    folder = tmp_path / "in"
    folder.mkdir()
    _honest(folder)
    for name in ("a_mallory", "c_mallory"):
        _zip(folder, name, append=ATTACKS[attack], gelu_first=DURING_A_CHECK.get(attack, ""))
    beside = _grade(folder, tmp_path / "out")
    assert set(beside) == {"a_mallory.zip", "b_alice.zip", "c_mallory.zip", "d_bob.zip"}
    for label, record in alone.items():
        changed = [(a["name"], a["status"], a["diagnosis"], b["status"], b["diagnosis"])
                   for a, b in zip(record["checks"], beside[label]["checks"]) if a != b]
        assert beside[label] == record, f"{label} beside an upload that {attack}: {changed}"


# ------------------------------------------------- the grader's failure, not theirs


def test_a_check_no_process_could_run_is_the_graders_error_and_a_rerun_grades_it(alone, tmp_path, monkeypatch):
    """The machine has no process for the class's workers: every check is `error` with
    the grader's sentence, the upload is tried again before its record is written, and
    a rerun, once processes can start, grades it as if nothing had happened."""
    from grader.grade_class import gradebook

    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    _honest(folder)
    original, refused, graded = Sandbox.fork, {"on": True}, []

    def fork(self, op):
        if refused["on"]:
            raise OSError("no process could start (the test's machine is full)")
        return original(self, op)

    real_grade_upload = gradebook.grade_upload

    def grade_upload(upload, *args, **kwargs):
        graded.append(upload.label)
        return real_grade_upload(upload, *args, **kwargs)

    monkeypatch.setattr(Sandbox, "fork", fork)
    monkeypatch.setattr(gradebook, "grade_upload", grade_upload)
    monkeypatch.setattr(gradebook._Graders, "RETRY_PAUSE", 0.1)
    monkeypatch.setattr(Sandbox, "START_PAUSE", 0.01)
    first = _grade(folder, out)
    for record in first.values():
        assert record["checks"] and {(c["status"], c["diagnosis"]) for c in record["checks"]} == {
            (ERROR, INFRASTRUCTURE)}, record["checks"][:2]
        assert record["score"] == 0 and record["infrastructure"] == len(record["checks"])
    assert all(needs_grading(r) for r in read_records(out).values())
    assert sorted(graded) == sorted(2 * list(first)), "each upload is tried again before its record is written"
    assert "could not run" in (out / "gradebook.csv").read_text()
    assert "could not run" in (out / "summary.md").read_text()
    import csv

    # Incomplete, never a grade: the points the grader could not run are not the student's to lose.
    rows = list(csv.DictReader((out / "gradebook.csv").open()))
    assert rows and all((r["status"], r["total"]) == ("incomplete", "") for r in rows), rows
    assert "leave these students' grades blank" in (out / "summary.md").read_text()

    refused["on"] = False
    assert _grade(folder, out) == alone


def test_a_shard_without_a_seed_is_refused_before_grading(tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    _zip(folder, "alice")
    out = tmp_path / "out"
    code = cli(["grade-class", str(folder), "--out", str(out), "--shard", "1/2", "--allow-weak-sandbox"])
    said = capsys.readouterr().out
    assert code == 1 and "--seed" in said, said
    assert not (out / "results").exists(), "a shard was graded before the refusal"
