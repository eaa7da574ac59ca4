"""A student's report carries the student's words only.

What torch, the sandbox or the kit say about themselves never shows as "printed" under
a check, while what the student's own code printed still does; and the report's runner
line tells a student how their code ran, with nothing to install.

The runs here are the student's: a release bundle of chapter 05 (no reference, and only
chapter 05's checks, so nothing the kit imports before the workers start has touched
torch's CPU detection, as in the bundle a student unpacks), with its own grader, on the
reference's code whose gelu prints and then raises: its checks fail, so the report shows
what it printed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from grader import KIT_ROOT
from grader.generate.release import build
from grader.run.feedback import Audience, without_library_talk
from grader.run.processes import Limits
from grader.run.runners import open_runner, sandbox_possible
from grader.run.sandbox import Sandbox, bwrap_works

STUDENT_SAYS = "my gelu ran on a tensor of shape"
CPUINFO = "Error in cpuinfo: failed to parse processor information from /proc/cpuinfo"
# Words of torch's and the sandbox's own that would mean their talk reached the student.
SELF_TALK = ("cpuinfo", "NNPACK", "bwrap", "/proc/")

needs_sandbox = pytest.mark.skipif(not sandbox_possible(), reason="the Linux sandbox cannot start here")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """Chapter 05's student release, with a package `mine`: the reference, but its gelu
    prints and raises."""
    folder, _, _ = build(tmp_path_factory.mktemp("release"), ["05"], run_scan=False)
    mine = folder / "mine"
    shutil.copytree(KIT_ROOT / "solutions" / "hero_transformer", mine, ignore=shutil.ignore_patterns("__pycache__"))
    model = mine / "model.py"
    text = model.read_text(encoding="utf-8")
    marker = "    ### BEGIN SOLUTION gelu\n"
    assert marker in text
    mistake = (f"    print('{STUDENT_SAYS}', tuple(x.shape), 'on', torch.backends.cpu.get_cpu_capability())\n"
               f"    raise ValueError('not done yet')\n")
    model.write_text(text.replace(marker, marker + mistake, 1), encoding="utf-8")
    return folder


def _env() -> dict:
    env = {**os.environ, "COLUMNS": "200", "PYTHONIOENCODING": "utf-8"}
    env.pop("PYTHONPATH", None)
    return env


# Run inside the bundle, with its own grader: the report as the terminal shows it and
# results.json's tests, for one way of running the code.
_GRADE_IN_BUNDLE = r'''
import io, json, sys
from rich.console import Console
from grader.run.engine import grade
from grader.run.processes import Limits
from grader.run.report import render, results_json
from grader.run.submission import load

kind = sys.argv[1]
if kind == "portable":
    from grader.run.portable import PortableRunner
    runner = PortableRunner(Limits(), "chosen by the test")
else:
    from grader.run.sandbox import Sandbox
    runner = Sandbox(Limits(), isolation=kind)
with runner:
    report = grade(load("mine"), ["05"], public_only=True, use_reference=False, runner=runner)
console = Console(file=io.StringIO(), width=200, force_terminal=False)
render(report, console)
print(json.dumps({"text": console.file.getvalue(), "sandbox": report.sandbox,
                  "outputs": {r.check.name: r.output for r in report.results},
                  "staff": {r.check.name: r.staff_output for r in report.results},
                  "tests": results_json(report, 0)["tests"]}))
'''


def _graded_in_bundle(bundle: Path, kind: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _GRADE_IN_BUNDLE, kind], cwd=bundle, env=_env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


KINDS = [pytest.param("portable", id="portable"),
         pytest.param("bwrap", id="sandbox-bwrap", marks=pytest.mark.skipif(
             not sandbox_possible() or not bwrap_works(), reason="bubblewrap is not usable here")),
         pytest.param("process", id="sandbox-process", marks=needs_sandbox)]


@pytest.mark.parametrize("kind", KINDS)
def test_only_the_students_own_print_shows(bundle, kind):
    graded = _graded_in_bundle(bundle, kind)
    printed = {name: output for name, output in graded["outputs"].items() if output}
    assert any(name.startswith("ch05.gelu.") for name in printed), printed
    for name, output in printed.items():
        # Only gelu prints: every output is the student's, whichever task's check it is under.
        assert not any(word in output for word in SELF_TALK), (name, output)
        assert STUDENT_SAYS in output, (name, output)
    assert "printed: " + STUDENT_SAYS in graded["text"], graded["text"]
    assert not any(word in graded["text"] for word in SELF_TALK), graded["text"]
    for test in graded["tests"]:
        assert not any(word in test["output"] for word in SELF_TALK), test
    assert any("Your code printed" in test["output"] and STUDENT_SAYS in test["output"]
               for test in graded["tests"]), graded["tests"]
    # Stopped where it starts, not only kept from the student: the staff's copy, which
    # keeps everything, has none of it either, and the student's code ran on the kernels
    # torch picks for this CPU, as the grader's own process does (not its plainest ones,
    # torch's choice where it cannot read /proc/cpuinfo).
    for name, output in graded["staff"].items():
        assert not any(word in output for word in SELF_TALK), (name, output)
    capability = torch.backends.cpu.get_cpu_capability()
    assert all(f"on {capability}" in output for output in printed.values()), (capability, printed)
    assert "install" not in graded["sandbox"] and "bubblewrap" not in graded["sandbox"], graded["sandbox"]
    assert "separate processes" in graded["sandbox"] and "time limit" in graded["sandbox"], graded["sandbox"]


@pytest.mark.parametrize("runner", ["portable", pytest.param("sandbox", marks=needs_sandbox)])
def test_the_students_check_as_they_run_it(bundle, runner):
    """The bundle's own command line, as `python check.py` runs it."""
    done = subprocess.run([sys.executable, "-m", "grader", "check", "mine", "--chapters", "05", "--runner", runner],
                          cwd=bundle, env=_env(), capture_output=True, text=True, timeout=600)
    text = done.stdout
    assert "Total:" in text and "Traceback" not in done.stderr, text + done.stderr[-3000:]
    assert "printed: " + STUDENT_SAYS in text, text
    assert not any(word in text for word in SELF_TALK), text
    # The runner line, whatever its label: from its first words to the panel's end.
    flat = " ".join(text.replace("│", " ").replace("╰", " ").split())
    assert "separate processes" in flat, text
    line = flat[flat.index("separate processes"):]
    assert "install" not in line and "time limit" in line, line


def test_the_students_copy_loses_cpuinfos_lines_only():
    """Where a check fails, what the student printed is theirs to debug with; a line
    torch's CPU detection would write is not."""
    audience = Audience(SimpleNamespace(sources={}), None)
    printed = f"{CPUINFO}\n{STUDENT_SAYS} (2, 3)\nWarning in cpuinfo: something about caches\n"
    shown, staff = audience.output(printed)
    assert shown == f"{STUDENT_SAYS} (2, 3)\n"
    assert staff == printed  # course staff keep everything
    assert audience.output(CPUINFO + "\n") == ("", CPUINFO + "\n")
    # Only whole lines in cpuinfo's own form go: the student's words about it stay.
    own = "I read that 'Error in cpuinfo: x' is harmless\n"
    assert without_library_talk(own) == own


def test_the_runner_line_speaks_to_whom_reads_it():
    """A public run's line has nothing to install; a graded run's keeps the staff's
    account, with the advice where bubblewrap is missing (`make grade` refuses that
    sandbox unless told --allow-weak-sandbox)."""
    for kind in ("bwrap", "process"):
        with Sandbox(Limits(), isolation=kind, public=True) as box:
            line = box.describe()
        assert "install" not in line and "separate processes" in line and "10 s" in line, line
    with Sandbox(Limits(), isolation="process", public=False) as box:
        assert "install it" in box.describe()
    with Sandbox(Limits(), isolation="bwrap", public=False) as box:
        assert box.describe().startswith("bubblewrap (")


@needs_sandbox
def test_open_runner_tells_the_sandbox_who_reads_its_line():
    with open_runner("sandbox", Limits(), with_reference=False) as box:
        assert box.public
    with open_runner("sandbox", Limits(), with_reference=True) as box:
        assert not box.public
