"""The student's check on a real Windows interpreter: Windows CPython and Windows torch,
run under Wine where a machine has them set up (a `winpython` launcher: see
HERO_TRANSFORMER_WINPYTHON below). Elsewhere each test says plainly that it was not run.

From a release bundle of every chapter: the stubs score 0 with every task listed, and
the reference earns every public point, chapter 00's weights drawn by the UCRT's libm
included (the public facts hold to a tolerance what another libm moves in its last
bits; tests/test_platform_floats.py holds that on Linux). With chapter 05: a hang costs
its own task (and, with no certified parts on a laptop, the tasks built on it) only,
and check.py's run step does the same.

Under Wine on two busy cores each whole-bundle run takes 20 to 45 s (Windows torch's
import and the workers' start-ups, not the checks), the hang two minutes or more (it
waits out time limits, each with a new worker), the file about four minutes."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from grader import KIT_ROOT
from grader.checks import catalogue
from grader.generate.release import build
from grader.run.schedule import possible_points

# The launcher: an explicit path, or the workplace's shared/windows/winpython beside the kit.
WINPYTHON = Path(os.environ.get("HERO_TRANSFORMER_WINPYTHON", KIT_ROOT.parent / "shared" / "windows" / "winpython"))
WINDOWS_PYTHON = Path(os.environ.get("WINPYTHON_DIR", Path.home() / ".cache" / "winpython")) / "python.exe"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (WINPYTHON.is_file() and WINDOWS_PYTHON.is_file() and shutil.which("wine")),
                       reason=f"no Windows Python here: {WINPYTHON} and {WINDOWS_PYTHON} under Wine are needed "
                              f"(set them up with the launcher's setup.sh, or point HERO_TRANSFORMER_WINPYTHON at "
                              f"one); the Windows runners of .github/workflows/check.yml cover this in CI"),
]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    # Every chapter; the release's leak scans are test_release.py's, and here only what the
    # bundle holds counts.
    folder, _, findings = build(tmp_path_factory.mktemp("release"), None, run_scan=False)
    assert not findings
    return folder


def _windows(bundle: Path, *args: str, env: dict | None = None) -> tuple[int, str]:
    # Wine's consoles want a pipe, not a file, for the standard streams.
    done = subprocess.run([str(WINPYTHON), *args], cwd=bundle, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, timeout=1200)
    return done.returncode, done.stdout.decode("cp1252", "replace")


def _statuses(text: str) -> dict[str, str]:
    return {line.split()[0]: line.split()[-1] for line in text.splitlines()
            if line.strip().startswith(("layer_norm.", "gelu.", "feedforward.", "block_init.", "block."))}


def test_the_stubs_score_zero_with_every_task_listed(bundle):
    code, text = _windows(bundle, "-m", "grader", "check", "hero_transformer")
    assert code == 1, text
    assert f"Total: 0 / {possible_points(None, public_only=True):g} points" in text, text
    # A row starts with its check (task.check) or, for a task not begun, the task's name.
    listed = {line.split()[0].split(".")[0] for line in text.splitlines() if line[:1].isalpha()}
    assert set(catalogue.tasks()) <= listed, set(catalogue.tasks()) - listed
    assert "separate processes" in text and "does not run on Windows" in text, text
    assert "Traceback" not in text


def test_the_reference_earns_every_public_point(bundle):
    shutil.copytree(KIT_ROOT / "solutions" / "hero_transformer", bundle / "mine", dirs_exist_ok=True)
    code, text = _windows(bundle, "-m", "grader", "check", "mine")
    full = possible_points(None, public_only=True)
    assert code == 0 and f"Total: {full:g} / {full:g} points" in text, text


def test_a_hang_costs_its_own_task(bundle):
    package = bundle / "hangs"
    shutil.copytree(KIT_ROOT / "solutions" / "hero_transformer", package, dirs_exist_ok=True)
    model = package / "model.py"
    text = model.read_text(encoding="utf-8")
    begin = text.index("### BEGIN SOLUTION gelu")
    end = text.index("### END SOLUTION", begin)
    model.write_text(text[:text.index("\n", begin) + 1] + "    while True:\n        pass\n    " + text[end:],
                     encoding="utf-8")
    code, report = _windows(bundle, "-m", "grader", "check", "hangs", "--chapters", "05")
    statuses = _statuses(report)
    assert code == 1 and statuses, report
    assert all(s == "timeout" for n, s in statuses.items() if n.startswith("gelu.")), report
    assert all(s == "passed" for n, s in statuses.items() if n.startswith(("layer_norm.", "block_init."))), report


def test_check_py_runs_the_same_checks(bundle, tmp_path):
    """check.py's run step with the Windows interpreter standing in as the venv's (the
    embeddable interpreter has no venv module: the venv logic is tested on Linux)."""
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / "Scripts").symlink_to(WINDOWS_PYTHON.parent)
    # The stand-in has no pip to install with, so the venv is marked set up, as check.py
    # marks it after an install; whether the stand-in holds every requirement (pytest may
    # be missing) is the Linux tests' business.
    (venv / ".installed").touch()
    windows_path = "Z:" + str(venv).replace("/", "\\")
    code, text = _windows(bundle, "check.py", "05", env={"HERO_TRANSFORMER_VENV": windows_path})
    assert code == 1, text
    assert f"Total: 0 / {possible_points(['05'], public_only=True):g} points" in text, text
