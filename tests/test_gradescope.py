"""The Gradescope autograder zip: what it holds, and run_autograder end to end."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

from grader.gradescope import build

ROOT = Path(__file__).resolve().parent.parent


def test_the_zip_holds_the_grader_and_the_reference_but_no_student_copy(tmp_path):
    out = tmp_path / "autograder.zip"
    names = set(build(out))
    with zipfile.ZipFile(out) as archive:
        assert set(archive.namelist()) == names
        for script in ("setup.sh", "run_autograder"):
            assert stat.S_IMODE(archive.getinfo(script).external_attr >> 16) & 0o111
    assert {"grader/engine.py", "grader/inside/zygote.py", "solutions/hero_transformer/model.py",
            "pyproject.toml"} <= names
    assert not any(n.startswith(("hero_transformer/", "tests/", "grader/accuracy/")) for n in names)


def _unpack(tmp_path: Path) -> None:
    build(tmp_path / "autograder.zip")
    with zipfile.ZipFile(tmp_path / "autograder.zip") as archive:
        archive.extractall(tmp_path / "source")


def test_run_autograder_grades_a_submission_into_results_json(tmp_path):
    _unpack(tmp_path)
    submission = tmp_path / "submission" / "my-upload" / "hero_transformer"
    shutil.copytree(ROOT / "hero_transformer", submission)
    env = {**os.environ, "AUTOGRADER_ROOT": str(tmp_path), "AUTOGRADER_PYTHON": sys.executable}
    done = subprocess.run(["bash", str(tmp_path / "source" / "run_autograder")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "results" / "results.json").read_text())
    assert results["score"] == 0 and len(results["tests"]) > 100  # the stub copy: every check runs, none passes
    assert all(t["status"] == "failed" for t in results["tests"])


def test_run_autograder_leaves_a_results_file_even_when_grading_cannot_start(tmp_path):
    _unpack(tmp_path)
    env = {**os.environ, "AUTOGRADER_ROOT": str(tmp_path), "AUTOGRADER_PYTHON": "/nonexistent/python"}
    done = subprocess.run(["bash", str(tmp_path / "source" / "run_autograder")], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    results = json.loads((tmp_path / "results" / "results.json").read_text())
    assert results["score"] == 0 and "course staff" in results["output"]
