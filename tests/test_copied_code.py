"""Code a student carries over from elsewhere: an import block it came with, and a crash
the student must be able to read in their own run.

A forbidden module imported and never used is told as just that, once, on top of the
report, and `submit` stops before the upload. A crash in `check` shows the student's own
message and line even where certified parts stand in (the report goes to its author
only); the course's grade of the same code keeps them for staff.
"""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest
from rich.console import Console

from grader.__main__ import main as cli
from grader.__main__ import run_grading
from grader.run.results import ERROR, FORBIDDEN, PASSED
from grader.run.scan_tampering import UNUSED, scan_file, scan_submission, tampering_reason

SOLUTIONS = Path(__file__).resolve().parent.parent / "solutions" / "hero_transformer"
# A LayerNorm that stops with a message of its own: the student's to read.
RAISES = "        raise ValueError(f'rows of {x.shape[-1]} features are not what this norm was written for')\n"


def _copy(tmp_path: Path, first_line: str = "", crash: bool = False) -> Path:
    package = tmp_path / "hero_transformer"
    shutil.copytree(SOLUTIONS, package)
    model = package / "model.py"
    text = model.read_text(encoding="utf-8")
    if crash:
        marker = "        ### BEGIN SOLUTION layer_norm\n"
        assert marker in text
        text = text.replace(marker, marker + RAISES, 1)
    model.write_text(first_line + text, encoding="utf-8")
    return package


@pytest.mark.parametrize("line", ["import inspect\n", "import inspect as insp\n", "from dis import dis\n",
                                  "import ctypes\n"])
def test_an_unused_forbidden_import_is_named_as_unused(line):
    hits = scan_file(line + "x = 1\n")
    assert len(hits) == 1 and hits[0][1].endswith(UNUSED), hits
    said = tampering_reason(scan_submission({"model.py": line + "x = 1\n"}))
    assert "model.py line 1" in said and "deleting that line is all you need to do" in said


@pytest.mark.parametrize("code", ["import inspect\ninspect.getsource(len)\n",
                                  "import inspect as insp\nsrc = insp\n",
                                  "from inspect import getsource\ngetsource(len)\n"])
def test_a_used_forbidden_import_is_not_called_unused(code):
    hits = scan_file(code)
    assert hits and not any(what.endswith(UNUSED) for _, what in hits), hits
    assert "deleting that line" not in tampering_reason(scan_submission({"model.py": code}))


def test_check_says_an_unused_import_once_on_top(tmp_path, capsys):
    package = _copy(tmp_path, "import inspect\n")
    console = Console(width=100, force_terminal=False)
    report = run_grading(str(package), "05", True, None, console, for_the_author=True)
    assert report.results and all(r.status == FORBIDDEN for r in report.results)
    shown = capsys.readouterr().out
    assert shown.count("deleting that line is all you need to do") == 1, shown
    assert "Fix this first" in shown and "as above" in shown


def test_submit_stops_before_packing_an_unused_forbidden_import(tmp_path, capsys):
    package = _copy(tmp_path, "import inspect\n")
    out = tmp_path / "submission.zip"
    assert cli(["submit", str(package), "--output", str(out)]) == 1
    assert not out.exists()
    assert "model.py line 1" in capsys.readouterr().out
    assert cli(["submit", str(package), "--output", str(out), "--anyway"]) == 0
    with zipfile.ZipFile(out) as packed:
        assert "hero_transformer/model.py" in packed.namelist()


def test_check_shows_the_authors_own_crash_and_a_grade_keeps_it_for_staff(tmp_path):
    package = _copy(tmp_path, crash=True)
    quiet = Console(file=open("/dev/null", "w"), width=100)  # noqa: SIM115 - closed with the process
    own = run_grading(str(package), "05", True, None, quiet, for_the_author=True)
    graded = run_grading(str(package), "05", True, None, quiet)
    by_name = {r.check.name: r for r in graded.results}
    crashed = [r for r in own.results if r.status == ERROR]
    assert crashed, [(r.check.name, r.status) for r in own.results]
    for result in crashed:
        assert "not what this norm was written for" in result.diagnosis, result.diagnosis
        assert "model.py line" in result.diagnosis, result.diagnosis
        beside = by_name[result.check.name]
        assert beside.status == ERROR and "not what this norm" not in beside.diagnosis
        assert "not what this norm was written for" in beside.staff_diagnosis
    # The parts that do not build on LayerNorm are graded alike in both runs.
    assert any(r.status == PASSED for r in own.results)
    assert [r.status for r in own.results] == [r.status for r in graded.results]
