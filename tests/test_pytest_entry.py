"""The public checks as pytest items (grader/pytest_plugin.py), in a freshly built and
unzipped release of chapters 02 and 05, held against what check.py says of the same code:
every public check is collected and nothing else, the statuses are check.py's check for
check, and a failing item's message is the diagnosis check.py prints under the check.

check.py and pytest run on this worktree's .venv (HERO_TRANSFORMER_VENV), as in
tests/test_check_py.py, so that no second torch is installed."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from grader.checks import catalogue
from grader.checks.ch05_block.block import example_1
from grader.checks.ch05_block.layer_norm import defaults, example_figures
from grader.generate import release
from grader.mutants import REFERENCE_PACKAGE, catalogue as mutant_catalogue
from grader.regions import package_sources
from tests.test_release import _unzipped

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.path.realpath(sys.prefix))
CHAPTERS = ["02", "05"]
# The chapter whose every mutant is run both ways: one task, nine mutants, a few seconds a grading.
MUTANT_CHAPTER = "02"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """A release of CHAPTERS as a student unzips it (the leak scans are test_release's)."""
    _, archive, _ = release.build(tmp_path_factory.mktemp("release"), CHAPTERS, run_scan=False)
    return _unzipped(archive, tmp_path_factory.mktemp("unzipped") / "fresh")


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PYTEST_")}
    env.update(HERO_TRANSFORMER_VENV=str(VENV), COLUMNS="3000")
    return env


def _public(chapters: list[str]) -> list:
    return [c for c in catalogue.all_checks() if not c.hidden and c.chapter in chapters]


def _node_id(check) -> str:
    chapter = next(c for c in catalogue.chapters() if c.number == check.chapter)
    return f"assignments/{chapter.module}/README.md::{check.task}::{check.name.split('.', 2)[2]}"


def with_package(bundle: Path, into: Path, sources: dict[str, str]) -> Path:
    """A copy of the bundle whose hero_transformer/ holds `sources`."""
    copy = into / "copy"
    shutil.copytree(bundle, copy)
    for rel, text in sources.items():
        (copy / "hero_transformer" / rel).write_text(text, encoding="utf-8")
    return copy


# ------------------------------------------------------------------ the two readings


def run_pytest(folder: Path, *args: str) -> tuple[dict[str, tuple[str, str | None]], subprocess.CompletedProcess]:
    """({check: (check.py's word as the item reports it, failure text or None)}, the run)."""
    junit = folder / "pytest-report.xml"
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={junit}", *args],
                          cwd=folder, env=_env(), capture_output=True, text=True, timeout=900)
    found = {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        failure = case.find("failure")
        found[properties["check"]] = (properties["status"], None if failure is None else failure.text)
    return found, done


_ROW = re.compile(r"^(?P<label>\S.*?) {2,}(?P<points>[\d.]+/[\d.]+) (?P<status>[a-z][a-z ()]*?)\s*$")
_NOT_STARTED = re.compile(r"^(?P<task>\w+) \(\d+ checks?\): fill in ")


def check_py_verdicts(output: str, chapters: list[str]) -> dict[str, tuple[str, str | None]]:
    """{check: (status as check.py shows it, the diagnosis under it or None)} read from
    check.py's report printed on one line a row (COLUMNS=3000); "as above" is the sentence
    above it, the "Fix this first" panel's for a chapter's first note."""
    by_task = {}
    for check in _public(chapters):
        by_task.setdefault(check.task, []).append(check.name)
    verdicts: dict[str, tuple[str, str | None]] = {}
    lines = output.splitlines()
    panel = next((lines[i + 1].strip(" │") for i, line in enumerate(lines)
                  if line.startswith("╭") and "Fix this first" in line), None)
    chapter, last, said_above = None, None, None
    for line in lines:
        if heading := re.match(r"^Chapter (\d\d) — ", line):
            chapter, last, said_above = heading.group(1), None, panel
            continue
        note = line.strip()
        if note.startswith("↳ ") and last:
            said = said_above if note[2:] == "as above" else note[2:]
            verdicts[last], said_above = (verdicts[last][0], said), said
        elif note.startswith("printed: ") and last:
            verdicts[last] = (verdicts[last][0], f"{verdicts[last][1]}\n{note}")
        elif (row := _ROW.match(line)) and chapter and row["label"] not in ("check", "chapter total"):
            if started := _NOT_STARTED.match(row["label"]):
                verdicts.update({name: ("not implemented", None) for name in by_task[started["task"]]})
                last = None
            else:
                last = f"ch{chapter}.{row['label']}"
                verdicts[last] = (row["status"], None)
    return verdicts


def run_check_py(folder: Path, chapters: list[str]) -> tuple[dict[str, tuple[str, str | None]], str]:
    done = subprocess.run([sys.executable, "check.py", *chapters], cwd=folder, env=_env(), capture_output=True,
                          text=True, timeout=900)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return check_py_verdicts(done.stdout, chapters), done.stdout


def assert_same_verdicts(folder: Path, chapters: list[str]) -> dict[str, tuple[str, str | None]]:
    """pytest's verdict on each public check of `chapters` is check.py's, word and text."""
    said, printed = run_check_py(folder, chapters)
    found, done = run_pytest(folder, "-m", " or ".join(f"ch{c}" for c in chapters))
    names = {c.name for c in _public(chapters)}
    assert set(said) == names, (sorted(names - set(said)), printed)
    assert set(found) == names, sorted(names ^ set(found))
    for name in sorted(names):
        status, text = found[name]
        assert status == said[name][0], (name, found[name], said[name])
        assert (text is None) == (said[name][0] == "passed"), (name, text)
        if said[name][0] not in ("passed", "not implemented"):  # check.py prints a diagnosis under these
            assert said[name][1] is not None and text == said[name][1], (name, text, said[name][1])
    assert "Traceback" not in done.stdout + done.stderr and 'File "' not in done.stdout, done.stdout
    return found


# ------------------------------------------------------------------ the tests


def test_collect_only_lists_every_public_check_and_nothing_else(bundle):
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q"], cwd=bundle, env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    listed = {line for line in done.stdout.splitlines() if "::" in line}
    assert listed == {_node_id(c) for c in _public(CHAPTERS)}
    hidden = [c.name.rsplit(".", 1)[-1] for c in catalogue.all_checks() if c.hidden and c.chapter in CHAPTERS]
    assert hidden and not [name for name in hidden if name in done.stdout]
    # Chapters and tasks select as the README says.
    for args, chapters, task in ((["-m", "ch02"], ["02"], None), (["-k", "layer_norm"], ["05"], "layer_norm"),
                                 (["-m", "layer_norm"], ["05"], "layer_norm")):
        chosen = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *args], cwd=bundle,
                                env=_env(), capture_output=True, text=True, timeout=300)
        expected = {_node_id(c) for c in _public(chapters) if task in (None, c.task)}
        assert {line for line in chosen.stdout.splitlines() if "::" in line} == expected, (args, chosen.stdout)
    # An item's id as a test panel sends it back (the lesson's absolute path) selects that item alone.
    one = _node_id(_public(["05"])[0])
    path, rest = one.split("::", 1)
    alone = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", f"{bundle / path}::{rest}"],
                           cwd=bundle, env=_env(), capture_output=True, text=True, timeout=300)
    assert [line for line in alone.stdout.splitlines() if "::" in line] == [one], alone.stdout


def test_collection_imports_neither_torch_nor_the_checks(bundle):
    script = ("import sys, pytest; code = pytest.main(['--collect-only', '-q']); "
              "print('imported:', sorted(m for m in ('torch', 'grader.checks.catalogue') if m in sys.modules)); "
              "sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", script], cwd=bundle, env=_env(), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "imported: []" in done.stdout, done.stdout


def test_the_editor_finds_the_checks_with_the_bundles_own_settings(bundle):
    settings = json.loads((bundle / ".vscode" / "settings.json").read_text(encoding="utf-8"))
    assert settings["python.testing.pytestEnabled"] is True
    assert settings["python.defaultInterpreterPath"] == "${workspaceFolder}/.venv"
    project = tomllib.loads((bundle / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["tool"]["pytest"]["ini_options"]["testpaths"] == ["assignments"]
    # check.py installs what the panel needs into .venv along with torch.
    spec = importlib.util.spec_from_file_location("bundle_check_py", bundle / "check.py")
    check_py = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check_py)
    assert any(req.startswith("pytest") for req in check_py.requirements(bundle / "pyproject.toml"))


def test_the_stubs_fail_every_check_as_check_py_says_it(bundle):
    found = assert_same_verdicts(bundle, ["05"])
    tasks = catalogue.tasks()
    for name, (status, text) in found.items():
        task = tasks[name.split(".")[1]]
        if status == "not implemented":
            assert text == f"not implemented: task {task.name} — fill in {task.qualname} (hero_transformer/model.py)"
        else:
            # Parts missing below it: the block's checks wait on the first, and say which.
            assert status == "waiting" and text.startswith("waiting on 'layer_norm'"), (name, status, text)
    assert {s for s, _ in found.values()} == {"not implemented", "waiting"}
    verbose = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "-m", "ch02"],
                             cwd=bundle, env=_env(), capture_output=True, text=True, timeout=900)
    assert verbose.returncode == 1
    assert re.search(r"README\.md::embedding::lookup NOT IMPLEMENTED", verbose.stdout), verbose.stdout
    assert "not implemented: task embedding — fill in" in verbose.stdout
    assert "Still to come: 1 hidden check worth" in verbose.stdout, verbose.stdout


def test_in_the_kit_the_plugin_grades_the_stubs_or_the_reference():
    """The kit has no public_checks.json: the catalogue says what to collect, and the
    reference stands in for the parts a task builds on, as in `make check`."""
    base = [sys.executable, "-m", "pytest", "-p", "grader.pytest_plugin", "-p", "no:cacheprovider", "-q",
            "assignments/ch02_embedding"]
    env = {k: v for k, v in _env().items() if k != "HERO_TRANSFORMER_VENV"}
    stubs = subprocess.run(base, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    checks = len(_public(["02"]))
    assert stubs.returncode == 1 and f"{checks} failed" in stubs.stdout, stubs.stdout + stubs.stderr
    assert "not implemented: task embedding — fill in" in stubs.stdout
    right = subprocess.run(base + ["--hero-package", "solutions/hero_transformer"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=900)
    assert right.returncode == 0 and f"{checks} passed" in right.stdout, right.stdout + right.stderr


def test_the_reference_passes_everything(bundle, tmp_path):
    copy = with_package(bundle, tmp_path, package_sources(REFERENCE_PACKAGE))
    found, done = run_pytest(copy)
    assert done.returncode == 0, done.stdout + done.stderr
    assert set(found) == {c.name for c in _public(CHAPTERS)}
    assert {status for status, _ in found.values()} == {"passed"}
    points = sum(c.points for c in _public(CHAPTERS))
    assert f"Chapters 02, 05: {points:g} / {points:g} points" in done.stdout, done.stdout
    assert re.search(r"Still to come: \d+ hidden checks worth", done.stdout), done.stdout


def test_a_wrong_layer_norm_reads_in_pytest_as_in_check_py(bundle, tmp_path):
    """The panel's view of a LayerNorm that divides by d - 1: its value check fails with the
    lesson's figure, the properties that hold count (the slip is named, so the body
    computes), and the block's worked example waits on it."""
    wrong = next(m for m in mutant_catalogue()[0] if m.name == "layer_norm_variance_d_minus_1")
    copy = with_package(bundle, tmp_path, wrong.apply(package_sources(REFERENCE_PACKAGE)))
    found = assert_same_verdicts(copy, ["05"])
    assert found[example_figures.name][0] == "failed"
    assert "d - 1" in found[example_figures.name][1]
    assert found[defaults.name][0] == "passed"
    assert found[example_1.name][0] == "waiting"
    assert found[example_1.name][1].startswith("waiting on 'layer_norm'")


@pytest.mark.slow
def test_every_mutant_of_a_chapter_gets_check_pys_verdicts_in_pytest(bundle, tmp_path):
    mutants = [m for m in mutant_catalogue()[0] if catalogue.chapter_of_task()[m.task].number == MUTANT_CHAPTER]
    assert len(mutants) >= 5
    reference = package_sources(REFERENCE_PACKAGE)
    for mutant in mutants:
        copy = with_package(bundle, tmp_path / mutant.name, mutant.apply(reference))
        found = assert_same_verdicts(copy, [MUTANT_CHAPTER])
        assert any(status != "passed" for status, _ in found.values()), mutant.name
