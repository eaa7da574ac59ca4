"""The Gradescope autograder zip: what it holds, setup.sh on the base images' Pythons,
and run_autograder end to end in a copy of /autograder (AUTOGRADER_ROOT)."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.lms.gradescope import CPU_WHEELS, build, torch_requirement
from grader.run.schedule import possible_points

ROOT = Path(__file__).resolve().parent.parent

# Gradescope's documented results.json (docs/specs.md of gradescope/autograder_samples).
TOP_KEYS = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
            "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
TEST_KEYS = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format", "tags",
             "visibility", "extra_data"}
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
FORMATS = {"text", "html", "simple_format", "md", "ansi"}


def test_the_zip_holds_the_grader_and_the_reference_but_no_student_copy(tmp_path):
    out = tmp_path / "autograder.zip"
    names = set(build(out))
    with zipfile.ZipFile(out) as archive:
        assert set(archive.namelist()) == names
        for script in ("setup.sh", "run_autograder"):
            assert stat.S_IMODE(archive.getinfo(script).external_attr >> 16) & 0o111
    assert {"grader/run/engine.py", "grader/run/inside/zygote.py", "solutions/hero_transformer/model.py",
            "pyproject.toml", "grader/checks/ch05_block/facts.json"} <= names
    assert not any(n.startswith(("hero_transformer/", "tests/", "grader/qa/")) or n.endswith("/mutants.py")
                   for n in names)
    assert "grader/checks/ch05_block/layer_norm/hidden.py" in names


def _unpack(root: Path, chapters: list[str] | None = None) -> None:
    build(root / "autograder.zip", chapters)
    with zipfile.ZipFile(root / "autograder.zip") as archive:
        archive.extractall(root / "source")


def _run_autograder(root: Path, python: str = sys.executable) -> subprocess.CompletedProcess:
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": python}
    return subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True,
                          text=True, timeout=600)


def _hand_in(root: Path, package: Path) -> None:
    shutil.copytree(package, root / "submission" / "my-upload" / "hero_transformer",
                    ignore=shutil.ignore_patterns("__pycache__"))


def _valid_results(results: dict) -> None:
    assert set(results) <= TOP_KEYS, set(results) - TOP_KEYS
    assert isinstance(results["score"], (int, float))
    assert isinstance(results.get("execution_time", 0), (int, float))
    assert results.get("visibility", "visible") in VISIBILITY
    assert results.get("stdout_visibility", "hidden") in VISIBILITY
    assert results.get("output_format", "text") in FORMATS
    numbers = [t["number"] for t in results["tests"]]
    assert len(numbers) == len(set(numbers))
    for test in results["tests"]:
        assert set(test) <= TEST_KEYS, set(test) - TEST_KEYS
        assert test["visibility"] in VISIBILITY and test["status"] in {"passed", "failed"}
        assert test.get("output_format", "text") in FORMATS
        assert 0 <= test["score"] <= test["max_score"]
        assert isinstance(test["name"], str) and isinstance(test["output"], str)
        assert all(isinstance(tag, str) for tag in test["tags"])
    assert results["score"] == pytest.approx(sum(t["score"] for t in results["tests"]))


def _visible_text(results: dict) -> list[str]:
    """What a student sees before grades are published."""
    shown = []
    if results.get("visibility", "visible") == "visible":
        shown.append(results.get("output", ""))
    for test in results["tests"]:
        if test["visibility"] == "visible":
            shown += [test["name"], test["output"], *test["tags"]]
    return shown


@pytest.fixture(scope="module")
def one_chapter(tmp_path_factory):
    root = tmp_path_factory.mktemp("autograder-ch05")
    _unpack(root, ["05"])
    _hand_in(root, ROOT / "solutions" / "hero_transformer")
    done = _run_autograder(root)
    return done, json.loads((root / "results" / "results.json").read_text())


@pytest.fixture(scope="module")
def all_chapters(tmp_path_factory):
    root = tmp_path_factory.mktemp("autograder-all")
    _unpack(root)
    _hand_in(root, ROOT / "hero_transformer")
    done = _run_autograder(root)
    return done, json.loads((root / "results" / "results.json").read_text())


@pytest.mark.slow
def test_a_one_chapter_autograder_grades_that_chapter_only(one_chapter):
    done, results = one_chapter
    assert done.returncode == 0, done.stderr[-2000:]
    _valid_results(results)
    assert {t["tags"][0] for t in results["tests"]} == {"ch05"}
    assert sum(t["max_score"] for t in results["tests"]) == possible_points(["05"]) > 30
    assert results["score"] == possible_points(["05"])  # the reference
    assert {t["visibility"] for t in results["tests"]} == {"visible", "after_published"}


@pytest.mark.slow
def test_an_all_chapter_autograder_grades_every_chapter(all_chapters):
    done, results = all_chapters
    assert done.returncode == 0, done.stderr[-2000:]
    _valid_results(results)
    assert sum(t["max_score"] for t in results["tests"]) == possible_points() > 300
    assert results["score"] == 0  # the stub copy: every check runs, none passes
    assert all(t["status"] == "failed" for t in results["tests"])
    assert {t["tags"][0] for t in results["tests"]} == {f"ch{n:02d}" for n in range(10)}


@pytest.mark.slow
def test_visible_tests_never_show_a_hidden_checks_result(one_chapter, all_chapters):
    for _, results in (one_chapter, all_chapters):
        hidden = [t for t in results["tests"] if t["visibility"] != "visible"]
        assert hidden and all(t["visibility"] == "after_published" for t in hidden)
        shown = "\n".join(text for test in results["tests"] if test["visibility"] == "visible"
                          for text in (test["name"], test["output"], *test["tags"]))
        for test in hidden:
            assert test["name"] not in shown


@pytest.mark.slow
def test_no_visible_text_reveals_the_hidden_checks_total(one_chapter):
    _, results = one_chapter
    hidden = [t for t in results["tests"] if t["visibility"] != "visible"]
    hidden_score = sum(t["score"] for t in hidden)
    maximum = sum(t["max_score"] for t in results["tests"])
    # Any figure from which the hidden checks' points follow: the total, or the hidden part.
    revealing = [rf"(?<![\d.]){score:g}\s*/\s*{out_of:g}(?![\d.])" for score, out_of in
                 ((results["score"], maximum), (hidden_score, sum(t["max_score"] for t in hidden)))]
    for text in _visible_text(results):
        for pattern in revealing:
            assert not re.search(pattern, text), text


def test_run_autograder_leaves_a_results_file_even_when_grading_cannot_start(tmp_path):
    _unpack(tmp_path)
    done = _run_autograder(tmp_path, python="/nonexistent/python")
    assert done.returncode != 0, "a run that graded nothing must not look like a success"
    assert "no Python at /nonexistent/python" in done.stderr
    results = json.loads((tmp_path / "results" / "results.json").read_text())
    _valid_results(results)
    assert results["score"] == 0 and "course staff" in results["output"]


def test_the_teaching_guides_offline_recipe_runs_as_printed(tmp_path):
    """docs/teaching.md's command, word for word, from the kit's folder (where .venv is):
    relative paths are read from where it starts, and it writes results.json."""
    page = (ROOT / "docs" / "teaching.md").read_text()
    recipe = re.search(r"`(AUTOGRADER_ROOT=X [^`]*run_autograder)`", page.replace("\n", " "))
    assert recipe, "the teaching guide no longer gives the offline Gradescope command"
    command = re.sub(r"\s+", " ", recipe[1])
    work = tmp_path / "kit"
    work.mkdir()
    (work / ".venv").symlink_to(Path(sys.prefix))  # the kit's folder as the guide has it: .venv beside X
    x = work / "X"
    x.mkdir()
    _unpack(x, ["01"])
    _hand_in(x, ROOT / "solutions" / "hero_transformer")
    done = subprocess.run(["bash", "-c", command], cwd=work, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((x / "results" / "results.json").read_text())
    _valid_results(results)
    assert results["tests"] and all(t["score"] == t["max_score"] for t in results["tests"])


# ------------------------------------------------------------------ setup.sh

FAKE_PYTHON = """#!/bin/bash
# A stand-in interpreter: $VERSION decides whether the kit can use it.
echo "{name} $*" >> "$LOG"
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  mkdir -p "$3/bin"
  printf '#!/bin/bash\\necho "venv-python $*" >> "$LOG"\\n' > "$3/bin/python"
  chmod +x "$3/bin/python"
  exit 0
fi
[ "{usable}" = yes ]
"""

FAKE_APT = """#!/bin/bash
echo "apt-get $*" >> "$LOG"
if [ "$1" = install ] && [[ " $* " == *" python3.11 "* ]] && [ -n "$APT_HAS_PY311" ]; then
  printf '%s' "$PY311" > "$FAKEBIN/python3.11" && chmod +x "$FAKEBIN/python3.11"
fi
if [ "$1" = install ] && [[ " $* " == *" python3.11 "* ]] && [ -z "$APT_HAS_PY311" ] && [ ! -e "$FAKEBIN/.ppa" ]; then
  exit 100
fi
if [ "$1" = install ] && [[ " $* " == *" python3.11 "* ]] && [ -e "$FAKEBIN/.ppa" ]; then
  printf '%s' "$PY311" > "$FAKEBIN/python3.11" && chmod +x "$FAKEBIN/python3.11"
fi
exit 0
"""

FAKE_PPA = """#!/bin/bash
echo "add-apt-repository $*" >> "$LOG"
touch "$FAKEBIN/.ppa"
"""


def _setup_on_image(tmp_path: Path, python3_usable: bool, apt_has_py311: bool) -> list[str]:
    """Run setup.sh with apt, the PPA tool and the interpreters replaced by stand-ins,
    as on an image whose python3 is (or is not) >= 3.11; the commands it ran, in order."""
    root = tmp_path / "autograder"
    root.mkdir()
    _unpack(root)
    fakebin, tools, log = tmp_path / "fakebin", tmp_path / "tools", tmp_path / "log"
    fakebin.mkdir()
    tools.mkdir()
    for tool in ("bash", "mkdir", "chmod", "cat", "printf", "touch", "dirname"):
        found = shutil.which(tool)
        if found:
            (tools / tool).symlink_to(found)
    (fakebin / "python3").write_text(FAKE_PYTHON.format(name="python3", usable="yes" if python3_usable else "no"))
    (fakebin / "apt-get").write_text(FAKE_APT)
    (fakebin / "add-apt-repository").write_text(FAKE_PPA)
    for fake in fakebin.iterdir():
        fake.chmod(0o755)
    env = {"PATH": f"{fakebin}:{tools}", "LOG": str(log), "FAKEBIN": str(fakebin), "AUTOGRADER_ROOT": str(root),
           "PY311": FAKE_PYTHON.format(name="python3.11", usable="yes"),
           **({"APT_HAS_PY311": "1"} if apt_has_py311 else {})}
    done = subprocess.run([str(tools / "bash"), str(root / "source" / "setup.sh")], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return log.read_text().splitlines()


def _pip_installs(commands: list[str]) -> list[str]:
    return [c for c in commands if c.startswith("venv-python -m pip install") and "--upgrade pip" not in c]


def _check_torch_from_cpu_index(commands: list[str]) -> None:
    torch_line, kit_line = _pip_installs(commands)
    assert f"--index-url {CPU_WHEELS}" in torch_line and torch_line.endswith(torch_requirement())
    assert torch_requirement() == "torch>=2.3,<2.14"
    # The kit itself comes after, from the default index, with torch already in place.
    assert kit_line.endswith("install --quiet .") and "--index-url" not in kit_line


@pytest.mark.parametrize("usable", [True, False], ids=["ubuntu-24.04-python3.12", "ubuntu-22.04-python3.10"])
def test_setup_finds_or_installs_a_python_and_takes_torch_from_the_cpu_index(tmp_path, usable):
    commands = _setup_on_image(tmp_path, python3_usable=usable, apt_has_py311=True)
    installs_python = any(c.startswith("apt-get install") and " python3.11 " in f"{c} " for c in commands)
    assert installs_python is not usable
    assert ("python3 -m venv" if usable else "python3.11 -m venv") in "\n".join(commands)
    assert not any(c.startswith("add-apt-repository") for c in commands)
    _check_torch_from_cpu_index(commands)


def test_setup_falls_back_to_the_deadsnakes_ppa(tmp_path):
    commands = _setup_on_image(tmp_path, python3_usable=False, apt_has_py311=False)
    assert "add-apt-repository -y ppa:deadsnakes/ppa" in commands
    assert any(c.startswith("python3.11 -m venv") for c in commands)
    _check_torch_from_cpu_index(commands)


@pytest.mark.slow
def test_staff_see_what_the_code_said_in_the_autograders_hidden_output(one_chapter):
    done, results = one_chapter
    assert results["stdout_visibility"] == "hidden"
    staff = json.loads(done.stdout[done.stdout.index('{\n  "submission"'):])
    assert staff["score"] == results["score"]
    assert {c["name"] for c in staff["checks"]} == {t["name"] for t in results["tests"]}
