"""Ctrl-C stops every long command at any moment: `check.py`, `check.py --watch`, `grade`
and `grade-class` each exit with 130, say what was kept, print no traceback and leave
no half-written file.

Each test interrupts at a moment the program announces (grader/run/stopping.py: with
HERO_TRANSFORMER_PAUSE_AT naming a moment the program notes that it is there and waits),
and sends SIGINT to the process group as a terminal does. So the signal lands at that
moment on any machine, idle or busy; nothing here waits on time.

Each program starts with SIGINT at its default, as a terminal's foreground command does
(`as_in_a_terminal`). The test run itself may not have it: a shell starts a background
job (`make test &`, a CI runner's step) with SIGINT ignored, every process below it
inherits that, and a program that inherits an ignored SIGINT rightly never sees Ctrl-C."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from grader.run.stopping import PAUSE_VARIABLE, PAUSED_VARIABLE

pytestmark = pytest.mark.skipif(not hasattr(os, "killpg"), reason="a terminal's Ctrl-C is a POSIX process group's")

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "solutions" / "hero_transformer"
VENV = Path(os.path.realpath(sys.prefix))
NEVER = 900.0  # a cap against a program that never reaches its moment, never a verdict


def as_in_a_terminal() -> None:
    """Popen's preexec_fn: SIGINT back to its default in the child, before it runs."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Interrupted:
    """A command run until it pauses at `moment`, then sent Ctrl-C."""

    def __init__(self, command: list[str], moment: str, cwd: Path, folder: Path, env: dict | None = None):
        note = folder / "paused.txt"
        env = {**(env or os.environ), PAUSE_VARIABLE: moment, PAUSED_VARIABLE: str(note), "COLUMNS": "240"}
        with open(folder / "out.txt", "w") as out, open(folder / "err.txt", "w") as err:
            process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=err, start_new_session=True,
                                       preexec_fn=as_in_a_terminal)
        try:
            deadline = time.monotonic() + NEVER
            while f"paused at {moment}" not in _read(note) and process.poll() is None \
                    and time.monotonic() < deadline:
                time.sleep(0.02)
            self.paused = f"paused at {moment}" in _read(note)
            os.killpg(process.pid, signal.SIGINT)
            process.wait(timeout=NEVER)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
        self.code = process.returncode
        self.out, self.err = _read(folder / "out.txt"), _read(folder / "err.txt")
        assert self.paused, f"never paused at {moment}:\n{self.out}\n{self.err}"

    def stopped_cleanly(self) -> str:
        said = self.out + self.err
        assert self.code == 130, said
        assert "Traceback" not in said and "KeyboardInterrupt" not in said, said
        return said


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _no_half_files(folder: Path) -> None:
    assert not [p for p in folder.rglob(".part-*")], sorted(folder.rglob("*"))


# ------------------------------------------------------------------ grade


@pytest.mark.parametrize("moment", ["sandbox boot", "probe", "results written", "report"])
def test_grade(moment, tmp_path):
    results = tmp_path / "results.json"
    run = Interrupted([sys.executable, "-m", "grader", "grade", str(REFERENCE), "--chapters", "05", "--json",
                       str(results), "--allow-weak-sandbox", "--seed", "3"], moment, ROOT, tmp_path)
    said = run.stopped_cleanly()
    written = json.loads(results.read_text())
    _no_half_files(tmp_path)
    if moment in ("sandbox boot", "probe"):
        # Nothing finished: the file says the grading stopped, not a score of its own.
        assert f"Stopped (Ctrl-C) before the grading finished: {results} says so" in said
        assert written["tests"] == [] and written["score"] == 0
        assert "stopped (Ctrl-C) before it finished" in written["output"]
    else:
        # The grading finished: its results are whole, the report is what was cut.
        assert f"Stopped (Ctrl-C) after the grading finished: {results} holds its results." in said
        assert written["score"] == sum(t["max_score"] for t in written["tests"]) > 0


# ------------------------------------------------------------------ check.py


def _bundle_copy(bundle: Path, folder: Path) -> Path:
    return shutil.copytree(bundle, folder / "copy")


def _check_py_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, "HERO_TRANSFORMER_VENV": str(VENV)}


@pytest.mark.parametrize("moment", ["sandbox boot", "probe", "report"])
def test_check_py(moment, release_05, tmp_path):
    copy = _bundle_copy(release_05, tmp_path)
    shutil.copy(REFERENCE / "model.py", copy / "hero_transformer" / "model.py")
    run = Interrupted([sys.executable, "check.py", "05"], moment, copy, tmp_path, _check_py_env())
    said = run.stopped_cleanly()
    if moment == "report":
        assert "Stopped (Ctrl-C) while the report was shown." in said
    else:
        assert "Stopped (Ctrl-C) before the checks finished." in said


@pytest.mark.parametrize("moment", ["sandbox boot", "probe"])
def test_check_on_the_portable_runner(moment, tmp_path):
    """As off Linux (macOS, Windows), where the workers are plain processes of the same
    terminal: the Ctrl-C reaches them too, and the check still stops as one."""
    run = Interrupted([sys.executable, "-m", "grader", "check", str(REFERENCE), "--chapters", "05", "--runner",
                       "portable"], moment, ROOT, tmp_path)
    assert "Stopped (Ctrl-C) before the checks finished." in run.stopped_cleanly()


@pytest.mark.parametrize("moment", ["sandbox boot", "probe", "statuses written", "between runs"])
def test_check_py_watch(moment, release_05, tmp_path):
    copy = _bundle_copy(release_05, tmp_path)
    run = Interrupted([sys.executable, "check.py", "--watch", "05"], moment, copy, tmp_path, _check_py_env())
    said = run.stopped_cleanly()
    assert said.rstrip().endswith("Stopped watching."), said
    if moment == "between runs":
        assert "not implemented" in run.out  # the run before was shown whole


# ------------------------------------------------------------------ grade-class


def _zip(path: Path, package: Path) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for file in sorted(package.glob("*.py")):
            archive.write(file, f"hero_transformer/{file.name}")


def _class(folder: Path) -> Path:
    folder.mkdir()
    for name in ("ann", "ben", "cat"):
        _zip(folder / f"{name}.zip", REFERENCE)
    return folder


# The moment -> uploads kept when the run stops there (of three, one at a time).
KEPT = {"sandbox boot": 0, "probe": 0, "record written": 1, "between uploads": 1, "gradebook written": 3}


@pytest.mark.parametrize("moment", list(KEPT))
def test_grade_class(moment, tmp_path):
    uploads, out = _class(tmp_path / "uploads"), tmp_path / "out"
    run = Interrupted([sys.executable, "-m", "grader", "grade-class", str(uploads), "--out", str(out), "--jobs", "1",
                       "--chapters", "05", "--public-only", "--seed", "2", "--allow-weak-sandbox"],
                      moment, ROOT, tmp_path)
    said = run.stopped_cleanly()
    _no_half_files(out)
    records = sorted(p for p in (out / "results").glob("*.json") if not p.name.endswith(".staff.json"))
    staff = sorted((out / "results").glob("*.staff.json"))
    assert len(records) == len(staff) == KEPT[moment], said  # a record always with its staff companion
    for record in records:
        assert json.loads(record.read_text())["status"] == "graded"
    if moment == "gradebook written":
        assert f"every upload is graded and kept in {out}/results/" in said
    else:
        assert f"Stopped: {KEPT[moment]} upload(s) graded in this run and kept in {out}/results/, " \
               f"{3 - KEPT[moment]} left." in " ".join(said.split())
    # Run again: what is kept is not graded again, and the rest is.
    again = subprocess.run([sys.executable, "-m", "grader", "grade-class", str(uploads), "--out", str(out),
                            "--jobs", "1", "--chapters", "05", "--public-only", "--seed", "2",
                            "--allow-weak-sandbox"], cwd=ROOT, capture_output=True, text=True, timeout=NEVER)
    assert again.returncode == 0, again.stdout + again.stderr
    if KEPT[moment]:
        assert f"{KEPT[moment]} upload(s) unchanged since they were graded" in again.stdout
    assert len(list((out / "results").glob("*.staff.json"))) == 3
    assert (out / "gradebook.csv").is_file()
