"""The portable runner, held on Linux to what Windows and macOS lack.

An interpreter is made here whose start-up (a .pth line, which also runs in the
workers it starts with -I) takes away what the other platforms do not have: the
modules resource, fcntl, termios, pwd and grp; os.fork, os.geteuid, os.getuid,
os.killpg, os.setsid; signal.SIGALRM and signal.setitimer; and /proc. The student's
files come with CRLF line endings and a UTF-8 BOM, in a folder whose name has spaces
and an accent, and the console speaks cp1252."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from grader import KIT_ROOT
from grader.checks import catalogue
from grader.run.engine import grade
from grader.run.schedule import possible_points
from grader.run.processes import Limits, RunnerRefused
from grader.run.portable import PortableRunner
from grader.run.reference import REFERENCE_PACKAGE, Reference
from grader.run.results import PASSED
from grader.run.runners import open_runner
from grader.run.submission import Submission

WITHOUT_LINUX = r'''
import builtins, os, signal, sys
for name in ("resource", "fcntl", "termios", "pwd", "grp"):
    sys.modules[name] = None  # import fails, as on Windows
for name in ("fork", "geteuid", "getuid", "killpg", "setsid"):
    if hasattr(os, name):
        delattr(os, name)
for name in ("SIGALRM", "setitimer"):
    if hasattr(signal, name):
        delattr(signal, name)
_open, _listdir, _scandir = builtins.open, os.listdir, os.scandir
def _no_proc(path):
    text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else ""
    if text == "/proc" or text.startswith("/proc/"):
        raise FileNotFoundError(2, "no /proc on this platform", text)
def open(file, *args, **kwargs):
    _no_proc(file)
    return _open(file, *args, **kwargs)
def listdir(path="."):
    _no_proc(path)
    return _listdir(path)
def scandir(path="."):
    _no_proc(path)
    return _scandir(path)
builtins.open, os.listdir, os.scandir = open, listdir, scandir
'''


def _python_starting_with(home: Path, start_code: str) -> Path:
    """A venv on this machine's Python that sees the kit's packages and runs the code
    `start_code` at every start, also in the workers it starts with -I."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home)], check=True)
    python = home / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "kit_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    # Run by a .pth line, not as sitecustomize.py: a distribution's own sitecustomize in
    # the standard library (Debian's) comes first on sys.path and would shadow it.
    Path(site, "laptop_start.py").write_text(start_code, encoding="utf-8")
    Path(site, "laptop_start.pth").write_text("import laptop_start\n", encoding="utf-8")
    return python


@pytest.fixture(scope="module")
def constrained_python(tmp_path_factory) -> Path:
    """A venv on this machine's Python that sees the kit's packages and lacks the above."""
    python = _python_starting_with(tmp_path_factory.mktemp("constrained"), WITHOUT_LINUX)
    probe = subprocess.run([str(python), "-I", "-c", "import os, importlib.util as u; "
                            "print(hasattr(os, 'fork'), u.find_spec('torch') is not None); import resource"],
                           capture_output=True, text=True)
    assert probe.stdout.split() == ["False", "True"] and "ModuleNotFoundError" in probe.stderr, probe
    return python


def _laptop_copy(source: Path, folder: Path) -> Path:
    """The package as a Windows laptop holds it: CRLF, a BOM, an awkward path."""
    target = folder / "My Documents é" / "hero_transformer"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    for path in target.rglob("*.py"):
        text = path.read_text(encoding="utf-8").replace("\r\n", "\n").replace("\n", "\r\n")
        path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    return target


def _check(python: Path, package: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONIOENCODING": "cp1252", "COLUMNS": "200"}
    env.pop("PYTHONPATH", None)
    return subprocess.run([str(python), "-m", "grader", "check", str(package), *args], cwd=KIT_ROOT, env=env,
                          capture_output=True, timeout=900)


def _total(stdout: bytes) -> str:
    text = stdout.decode("cp1252")
    line = next(line for line in text.splitlines() if "Total:" in line)
    return line.split("Total:")[1].split("points")[0].strip()


@pytest.mark.slow
def test_without_linux_the_check_picks_the_portable_runner_stubs_score_zero(constrained_python, tmp_path):
    stubs = _laptop_copy(KIT_ROOT / "hero_transformer", tmp_path)
    done = _check(constrained_python, stubs, "--chapters", "05,07")
    assert done.returncode == 1, done.stderr.decode("utf-8", "replace")[-2000:]
    assert _total(done.stdout) == f"0 / {possible_points(['05', '07'], public_only=True):g}"
    text = done.stdout.decode("cp1252")
    assert "separate processes" in text and "lacks what the Linux sandbox needs" in text and "asked for" not in text
    for task in ("layer_norm", "gelu", "block", "lm_forward"):
        assert task in text, task  # every task listed
    assert b"Traceback" not in done.stderr


@pytest.mark.slow
def test_without_linux_the_reference_earns_every_public_point(constrained_python, tmp_path):
    reference = _laptop_copy(REFERENCE_PACKAGE, tmp_path)
    done = _check(constrained_python, reference)
    assert done.returncode == 0, done.stdout.decode("cp1252", "replace")[-3000:]
    full = possible_points(None, public_only=True)
    assert _total(done.stdout) == f"{full:g} / {full:g}"


def _with_body(package: Path, module: str, function_line: str, body: str) -> None:
    """Replace the body of the solution region under `function_line` in module."""
    path = package / module
    text = path.read_bytes().decode("utf-8-sig").replace("\r\n", "\n")
    start = text.index(function_line)
    begin = text.index("### BEGIN SOLUTION", start)
    end = text.index("### END SOLUTION", begin)
    indent = text[text.rindex("\n", 0, begin) + 1:begin]
    lines = "".join(f"{indent}{line}\n" for line in body.strip("\n").splitlines())
    path.write_text(text[:text.index("\n", begin) + 1] + lines + indent + text[end:], encoding="utf-8")


@pytest.mark.slow
def test_a_hang_and_a_crash_cost_only_their_own_task(constrained_python, tmp_path):
    # Without certified parts a task's code also runs under the tasks that build on it
    # (feed-forward and block call gelu); the others must not notice.
    package = _laptop_copy(REFERENCE_PACKAGE, tmp_path)
    _with_body(package, "model.py", "def gelu(", "while True:\n    pass")
    _with_body(package, "model.py", "class TokenEmbedding", "import os\nos._exit(3)")
    done = _check(constrained_python, package, "--chapters", "02,05")
    text = done.stdout.decode("cp1252")
    assert done.returncode == 1 and "Total:" in text, done.stderr.decode("utf-8", "replace")[-2000:]
    rows = [line.split() for line in text.splitlines() if line.strip().startswith(("gelu.", "embedding.",
                                                                                      "layer_norm."))]
    statuses = {row[0]: row[-1] for row in rows}
    assert statuses and all(s == "timeout" for n, s in statuses.items() if n.startswith("gelu.")), text
    assert all(s == "error" for n, s in statuses.items() if n.startswith("embedding.")), text
    assert all(s == "passed" for n, s in statuses.items() if n.startswith("layer_norm.")), text
    assert "block_init.parameter_ledger" in text and "parameter_ledger" in next(
        line for line in text.splitlines() if "block_init.parameter_ledger" in line and "passed" in line)


def test_the_portable_runner_refuses_the_reference_and_hidden_checks():
    submission = Submission("reference", Reference.available().sources)
    with pytest.raises(RunnerRefused, match="Linux sandbox"):
        open_runner("portable", with_reference=True)
    with PortableRunner(Limits()) as runner:
        with pytest.raises(RunnerRefused, match="Gradescope"):
            grade(submission, ["05"], public_only=False, use_reference=False, runner=runner)
        with pytest.raises(RunnerRefused):
            grade(submission, ["05"], public_only=True, use_reference=True, runner=runner)
        assert runner.started == 0  # refused before any process started


SLOW_START = r'''
import sys, time
class SlowStart:
    """torch and the kit's checks take 3 s longer to import, as on a laptop's first run."""
    def find_spec(self, name, path=None, target=None):
        if name in ("torch", "grader.checks"):
            time.sleep(3)
        return None
sys.meta_path.insert(0, SlowStart())
'''


def test_a_slow_start_is_not_charged_to_the_students_import(tmp_path, monkeypatch):
    """A worker loads torch and the kit's checks before it says hello; Limits.setup_seconds
    then times the student's package alone. Here each takes 3 s more and the student's
    import may take 2 s: the reference still earns every public point."""
    python = _python_starting_with(tmp_path / "slow", SLOW_START)
    monkeypatch.setattr(sys, "executable", str(python))  # the runner starts its workers with this
    submission = Submission("reference", Reference.available().sources)
    with PortableRunner(Limits(setup_seconds=2.0)) as runner:
        report = grade(submission, ["05"], public_only=True, use_reference=False, runner=runner)
    assert [r.check.name for r in report.results if r.status != PASSED] == [], [
        (r.check.name, r.diagnosis) for r in report.results if r.status != PASSED]


def test_grade_on_the_portable_runner_writes_the_refusal_into_results_json(tmp_path):
    out = tmp_path / "results.json"
    done = subprocess.run([sys.executable, "-m", "grader", "grade", str(REFERENCE_PACKAGE), "--runner", "portable",
                           "--json", str(out)], cwd=KIT_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    import json

    results = json.loads(out.read_text(encoding="utf-8"))
    assert results["score"] == 0 and "Linux sandbox" in results["output"]


@pytest.mark.slow
@pytest.mark.parametrize("chapter", sorted(c.number for c in catalogue.chapters()))
def test_every_mutant_and_variant_gets_the_same_public_verdicts_on_both_runners(chapter):
    from grader.qa.catch_table import SEED
    from grader.mutants import catalogue as accuracy_catalogue
    from grader.run.engine import grade_task
    from grader.run.worker_session import Grading

    reference = Reference.available()
    mutants, variants = accuracy_catalogue()
    # Every variant, and each task's first mutant: every task's probes and judges run on
    # both runners, right and wrong, at about a third of the whole catalogue's cost (the
    # whole catalogue is graded on the sandbox by `make mutants`).
    first_mutants = list({e.task: e for e in reversed(mutants)}.values())
    entries = [e for e in [*first_mutants, *variants] if catalogue.chapter_of_task()[e.task].number == chapter]
    assert entries
    verdicts = {}
    for kind in ("sandbox", "portable"):
        with open_runner(kind, with_reference=False) as runner:
            for entry in entries:
                task = catalogue.tasks()[entry.task]
                checks = [c for c in catalogue.chapter_of_task()[task.name].checks
                          if c.task == task.name and not c.hidden]
                results = grade_task(task, checks,
                                     Grading(Submission(entry.name, entry.apply(reference.sources)), None, runner, SEED))
                verdicts.setdefault(kind, {})[entry.name] = [(r.check.name, r.status, r.diagnosis) for r in results]
    assert verdicts["portable"] == verdicts["sandbox"]
    # Not vacuous: the chapter's mutants fail somewhere, and its variants pass everywhere.
    assert any(s != PASSED for e in entries if type(e).__name__ == "Mutant"
               for _, s, _ in verdicts["portable"][e.name])
