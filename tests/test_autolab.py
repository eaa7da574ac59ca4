"""The Autolab autograder as Autolab runs it: the handin, autograde.tar and
autograde-Makefile (renamed Makefile) copied into an empty folder, `make` run there, and
the last line of its output read as the autoresult (Autolab's "Guide for Lab Authors"
and "Formatted Feedback")."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from grader.lms.autolab import MAKEFILE, TAR, build
from grader.qa.mutants import apply, catalogue as accuracy_catalogue
from grader.run.engine import possible_points

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "hero_transformer"
STUBS = ROOT / "hero_transformer"
STAMP_KEYS = {"kit", "checks", "torch", "python", "seed", "id"}
CHECK_LINE = re.compile(r"^  (?P<got>[\d.]+)/(?P<of>[\d.]+)  (?P<name>ch\d\d\.\S+)(?P<hidden> \(hidden\))?: "
                        r"(?P<said>.*)$")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("autolab") / "assessment"
    problems = build(out, ["05"])
    return out, problems


def _sources(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.glob("*.py"))}


def _autolab(built, tmp: Path, handin_name: str, content: bytes, python: str = sys.executable):
    """What Autolab does for one submission; (make's result, the output's lines)."""
    out, _ = built
    job = tmp / "job"
    job.mkdir()
    (job / handin_name).write_bytes(content)
    shutil.copy(out / TAR, job / TAR)
    shutil.copy(out / MAKEFILE, job / "Makefile")
    # Autolab runs make at the top level: none of the kit's own `make test` flags (which
    # would make GNU make print "Leaving directory" after the autoresult).
    top_level = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    done = subprocess.run(["make"], cwd=job, env={**top_level, "HERO_TRANSFORMER_PYTHON": python},
                          capture_output=True, text=True, timeout=600)
    return done, done.stdout.rstrip("\n").splitlines()


def _autoresult(lines: list[str], problems: dict) -> dict:
    """The last line: {"scores": {...}}, one number per problem the assessment defines."""
    result = json.loads(lines[-1])
    assert set(result) == {"scores"}
    assert set(result["scores"]) == set(problems)
    for name, score in result["scores"].items():
        assert isinstance(score, (int, float)) and 0 <= score <= problems[name]
    return result["scores"]


def _semantic(lines: list[str]) -> dict:
    """The line before it: the semantic feedback, each stage's test cases passed or not."""
    semantic = json.loads(lines[-2])
    assert semantic["_presentation"] == "semantic"
    for stage in semantic.get("stages", []):
        for case in semantic[stage].values():
            assert isinstance(case["passed"], bool)
            assert ("hint" in case) is (not case["passed"])
    return semantic


def _stamp(lines: list[str]) -> dict:
    stamped = [line for line in lines if line.startswith("hero_transformer stamp: ")]
    assert len(stamped) == 1
    found = json.loads(stamped[0].split(": ", 1)[1])
    assert set(found) == STAMP_KEYS
    return found


def _zip(sources: dict[str, str]) -> bytes:
    from io import BytesIO

    buffer = BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in sorted(sources.items()):
            archive.writestr(f"hero_transformer/{name}", text)
    return buffer.getvalue()


def test_the_tar_holds_what_grading_needs_and_the_readme_names_the_problems(built):
    out, problems = built
    assert problems == {"ch05": possible_points(["05"])}
    with tarfile.open(out / TAR) as archive:
        names = set(archive.getnames())
    assert {"hero_transformer_grader/grader/run/engine.py", "hero_transformer_grader/solutions/hero_transformer/model.py",
            "hero_transformer_grader/hero_transformer/model.py", "hero_transformer_grader/pyproject.toml"} <= names
    assert not any("/tests/" in n or "/qa/" in n for n in names)
    assert all(n.startswith("hero_transformer_grader/") for n in names)
    assert f"`ch05`: {possible_points(['05']):g}" in (out / "README.md").read_text()
    dockerfile = (out / "Dockerfile").read_text()
    assert '--index-url https://download.pytorch.org/whl/cpu "torch>=2.3,<2.14"' in dockerfile
    assert f"ADD {TAR} " in dockerfile


@pytest.mark.slow
def test_the_reference_zip_gets_full_marks(built, tmp_path):
    _, problems = built
    done, lines = _autolab(built, tmp_path, "handin.zip", _zip(_sources(SOLUTIONS)))
    assert done.returncode == 0, done.stderr[-2000:]
    assert _autoresult(lines, problems) == {"ch05": possible_points(["05"])}
    semantic = _semantic(lines)
    cases = semantic[semantic["stages"][0]]
    assert len(semantic["stages"]) == 1 and all(case["passed"] for case in cases.values())
    assert any(name.endswith("(hidden)") for name in cases)
    _stamp(lines)


@pytest.mark.slow
def test_the_stub_copy_as_a_tarball_scores_zero_with_every_check_listed(built, tmp_path):
    _, problems = built
    package = tmp_path / "stubs.tar.gz"
    with tarfile.open(package, "w:gz") as archive:
        archive.add(STUBS, "hero_transformer", filter=lambda i: None if "__pycache__" in i.name else i)
    done, lines = _autolab(built, tmp_path, "handin.tar.gz", package.read_bytes())
    assert done.returncode == 0, done.stderr[-2000:]
    assert _autoresult(lines, problems) == {"ch05": 0}
    semantic = _semantic(lines)
    listed = [m for m in map(CHECK_LINE.match, lines) if m]
    assert {m["name"] for m in listed} == {name.removesuffix(" (hidden)") for name in semantic[semantic["stages"][0]]}
    assert all(m["said"].startswith("not implemented") for m in listed)


@pytest.mark.slow
def test_a_single_wrong_file_is_graded_with_the_stubs_and_scores_what_its_checks_add_up_to(built, tmp_path):
    """The handin is model.py alone, with the post-LN mistake: partly right."""
    _, problems = built
    wrong = next(m for m in accuracy_catalogue()[0] if m.name == "block_post_ln")
    model = apply(_sources(SOLUTIONS), "model", wrong.task, wrong.region())["model.py"]
    done, lines = _autolab(built, tmp_path, "model.py", model.encode())
    assert done.returncode == 0, done.stderr[-2000:]
    scores = _autoresult(lines, problems)
    assert 0 < scores["ch05"] < problems["ch05"]
    listed = [m for m in map(CHECK_LINE.match, lines) if m]
    assert sum(float(m["got"]) for m in listed) == pytest.approx(scores["ch05"])
    semantic = _semantic(lines)
    cases = semantic[semantic["stages"][0]]
    failed_hidden = [name for name, case in cases.items() if name.endswith("(hidden)") and not case["passed"]]
    assert failed_hidden, "the post-LN block must fail a hidden comparison"
    for m in listed:
        name = m["name"] + (m["hidden"] or "")
        assert cases[name]["passed"] is (m["said"] == "passed")
        if not cases[name]["passed"]:
            assert m["said"].startswith(cases[name]["hint"][:200])
    assert "### BEGIN SOLUTION" not in done.stdout and "Traceback" not in done.stdout


@pytest.mark.parametrize("name, content, said", [
    ("handin.zip", b"PK\x03\x04 this is no zip", "handin.zip"),
    ("notes.py", b"print('hello')", "not a file of hero_transformer/"),
])
def test_an_unusable_handin_scores_zero_with_the_reason(built, tmp_path, name, content, said):
    _, problems = built
    done, lines = _autolab(built, tmp_path, name, content)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _autoresult(lines, problems) == {"ch05": 0}
    assert _semantic(lines) == {"_presentation": "semantic"}
    assert lines[0].startswith("This handin could not be graded: ") and said in lines[0]
    _stamp(lines)


def test_a_grader_that_cannot_start_still_ends_with_an_autoresult(built, tmp_path):
    _, problems = built
    done, lines = _autolab(built, tmp_path, "handin.zip", _zip(_sources(SOLUTIONS)), python="/nonexistent/python")
    assert done.returncode == 0
    assert _autoresult(lines, problems) == {"ch05": 0}
    assert "course staff" in lines[-2]
