"""The PrairieLearn external grader as PrairieLearn runs it: the entry point, in a copy of
/grade (PRAIRIELEARN_GRADE_ROOT), on the reference, the stub copy, a partly wrong upload
and unusable ones; every results.json held to PrairieLearn's documented format
(docs/externalGrading.md of PrairieLearn/PrairieLearn, "Grading results")."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.lms.prairielearn import ENTRY, MAX_BYTES, build, fit, results as pl_results
from grader.mutants import apply, catalogue as accuracy_catalogue
from grader.run.schedule import possible_points

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "hero_transformer"
STUBS = ROOT / "hero_transformer"

# What PrairieLearn documents for results.json, and for externalGradingOptions.
TOP_KEYS = {"gradable", "score", "message", "output", "images", "tests", "format_errors"}
TEST_KEYS = {"name", "description", "points", "max_points", "message", "output", "images"}
OPTIONS = {"enabled", "image", "entrypoint", "serverFilesCourse", "timeout", "enableNetworking", "environment"}
STAMP_KEYS = {"kit", "checks", "torch", "python", "seed", "id"}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("prairielearn") / "course-part"
    info = build(out, ["05"])
    return out, info


def _zip(path: Path, sources: dict[str, str]) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in sorted(sources.items()):
            archive.writestr(f"hero_transformer/{name}", text)


def _sources(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.glob("*.py"))}


def _post_ln() -> dict[str, str]:
    wrong = next(m for m in accuracy_catalogue()[0] if m.name == "block_post_ln")
    return apply(_sources(SOLUTIONS), "model", wrong.task, wrong.region())


def _job(built, tmp: Path, files: dict[str, bytes] | None = None, data: dict | None = None,
         python: str = sys.executable) -> tuple[subprocess.CompletedProcess, Path]:
    """A copy of /grade with the student's files (and data.json), the entry point run in it."""
    out, _ = built
    root = tmp / "grade"
    (root / "student").mkdir(parents=True)
    for name, content in (files or {}).items():
        (root / "student" / name).write_bytes(content)
    if data is not None:
        (root / "data").mkdir()
        (root / "data" / "data.json").write_text(json.dumps(data))
    env = {**os.environ, "PRAIRIELEARN_GRADE_ROOT": str(root), "PRAIRIELEARN_PYTHON": python}
    done = subprocess.run([str(out / "hero_transformer_grader" / ENTRY)], env=env, capture_output=True, text=True,
                          timeout=600)
    return done, root / "results"


def _valid(found: dict) -> None:
    """PrairieLearn's keys and limits, and the kit's stamp."""
    assert set(found) - {"stamp"} <= TOP_KEYS, set(found) - TOP_KEYS
    assert len(json.dumps(found).encode()) < MAX_BYTES
    assert isinstance(found["gradable"], bool)
    assert isinstance(found["score"], float) and 0.0 <= found["score"] <= 1.0
    assert isinstance(found["message"], str) and found["message"]
    assert set(found["stamp"]) == STAMP_KEYS and isinstance(found["stamp"]["seed"], int)
    for test in found["tests"]:
        assert set(test) <= TEST_KEYS, set(test) - TEST_KEYS
        assert isinstance(test["name"], str) and isinstance(test["message"], str) and isinstance(test["output"], str)
        assert 0 <= test["points"] <= test["max_points"]
    if found["gradable"]:
        total = sum(t["max_points"] for t in found["tests"])
        assert found["score"] == pytest.approx(sum(t["points"] for t in found["tests"]) / total, abs=1e-6)
    else:
        assert found["tests"] == [] and found["format_errors"]
        assert all(isinstance(e, str) and e for e in found["format_errors"])


def _read(results: Path) -> dict:
    found = json.loads((results / "results.json").read_text())
    _valid(found)
    return found


def test_the_build_holds_the_image_the_entry_point_and_a_documented_info_json(built):
    out, info = built
    options = info["externalGradingOptions"]
    assert set(options) <= OPTIONS
    assert options["enabled"] is True and options["image"]
    assert options["entrypoint"] == f"/opt/hero_transformer/{ENTRY} 05"
    assert 0 < options["timeout"] <= 600
    assert info["gradingMethod"] == "External" and json.loads((out / "info.json").read_text()) == info
    dockerfile = (out / "Dockerfile").read_text()
    assert '--index-url https://download.pytorch.org/whl/cpu "torch>=2.3,<2.14"' in dockerfile
    assert "COPY hero_transformer_grader/ /opt/hero_transformer/" in dockerfile
    assert "bubblewrap" in dockerfile and "chmod -R go-rwx solutions grader" in dockerfile
    kit = out / "hero_transformer_grader"
    assert os.access(kit / ENTRY, os.X_OK)
    assert (kit / "grader" / "run" / "engine.py").is_file() and (kit / "solutions" / "hero_transformer").is_dir()
    assert (kit / "hero_transformer" / "model.py").read_text() == (STUBS / "model.py").read_text()
    assert not (kit / "tests").exists() and not (kit / "grader" / "qa").exists()
    assert 'file-names="submission.zip"' in (out / "question.html").read_text()


@pytest.mark.slow
def test_the_reference_scores_one(built, tmp_path):
    package = tmp_path / "submission.zip"
    _zip(package, _sources(SOLUTIONS))
    done, results = _job(built, tmp_path, {"submission.zip": package.read_bytes()})
    assert done.returncode == 0, done.stderr[-2000:]
    found = _read(results)
    assert found["gradable"] is True and found["score"] == 1.0
    assert sum(t["max_points"] for t in found["tests"]) == possible_points(["05"])
    assert {t["name"].split(".")[0] for t in found["tests"]} == {"ch05"}
    assert all(t["message"] == "passed" for t in found["tests"])
    hidden = [t for t in found["tests"] if t["description"].startswith("hidden check")]
    assert hidden and all(t["output"] == "" for t in hidden)
    staff = json.loads((results / "results.staff.json").read_text())
    assert staff["stamp"] == found["stamp"] and staff["score"] == possible_points(["05"])


@pytest.mark.slow
def test_the_stub_copy_handed_in_as_loose_files_is_gradable_and_scores_zero(built, tmp_path):
    files = {p.name: p.read_bytes() for p in sorted(STUBS.glob("*.py"))}
    done, results = _job(built, tmp_path, files)
    assert done.returncode == 0, done.stderr[-2000:]
    found = _read(results)
    assert found["gradable"] is True and found["score"] == 0.0
    assert all(t["points"] == 0 and t["message"].startswith("not implemented") for t in found["tests"])


@pytest.mark.slow
def test_a_partly_wrong_upload_from_data_json_gets_the_grade_of_python_m_grader_grade(built, tmp_path):
    """model.py alone, passed only in data.json's _files (an empty /grade/student): graded
    with the stubs for the other files, with the variant's seed, as `grade --seed` grades it."""
    model = _post_ln()["model.py"]
    data = {"variant_seed": 4242, "params": {},
            "submitted_answers": {"_files": [{"name": "model.py",
                                              "contents": base64.b64encode(model.encode()).decode()}]}}
    done, results = _job(built, tmp_path, data=data)
    assert done.returncode == 0, done.stderr[-2000:]
    found = _read(results)
    assert found["gradable"] is True and 0.0 < found["score"] < 1.0
    assert found["stamp"]["seed"] == 4242

    # The same upload, graded by the kit's own command: the same checks end the same way.
    package = tmp_path / "package" / "hero_transformer"
    package.mkdir(parents=True)
    for name, text in {**_sources(STUBS), "model.py": model}.items():
        (package / name).write_text(text)
    cli = subprocess.run([sys.executable, "-m", "grader", "grade", str(package), "--chapters", "05", "--seed", "4242",
                          "--allow-weak-sandbox", "--json", str(tmp_path / "grade.json")], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert cli.returncode == 0, cli.stderr[-2000:]
    graded = json.loads((tmp_path / "grade.json").read_text())
    assert {t["name"]: t["status"] == "passed" for t in graded["tests"]} == \
        {t["name"]: t["message"] == "passed" for t in found["tests"]}
    assert graded["extra_data"]["stamp"]["seed"] == 4242

    # A failing hidden check says the grader's student-facing diagnosis, nothing of the staff's.
    staff = {c["name"]: c for c in json.loads((results / "results.staff.json").read_text())["checks"]}
    failed_hidden = [t for t in found["tests"] if staff[t["name"]]["hidden"] and t["points"] == 0]
    assert failed_hidden
    for test in failed_hidden:
        check = staff[test["name"]]
        assert test["message"] == f"{check['status']}: {check['diagnosis']}" and test["output"] == ""
        if check["staff_diagnosis"] != check["diagnosis"]:
            assert check["staff_diagnosis"] not in test["message"]


@pytest.mark.parametrize("files, said", [
    ({"submission.zip": b"PK\x03\x04 this is no zip"}, "submission.zip"),
    ({"notes.txt": b"I did not finish", "model.txt": b"class Model: ..."}, "no hero_transformer/ folder"),
    ({}, "Nothing was uploaded"),
])
def test_an_unusable_upload_is_not_gradable_and_costs_no_attempt(built, tmp_path, files, said):
    done, results = _job(built, tmp_path, files)
    assert done.returncode == 0, done.stderr[-2000:]
    found = _read(results)
    assert found["gradable"] is False and found["score"] == 0.0
    assert any(said in error for error in found["format_errors"]), found["format_errors"]
    assert str(tmp_path) not in json.dumps(found)  # the job's paths are not the student's business
    assert not (results / "results.staff.json").exists()


def test_a_grader_that_cannot_start_still_leaves_a_not_gradable_results_json(built, tmp_path):
    package = tmp_path / "submission.zip"
    _zip(package, _sources(SOLUTIONS))
    done, results = _job(built, tmp_path, {"submission.zip": package.read_bytes()}, python="/nonexistent/python")
    assert done.returncode == 0
    found = json.loads((results / "results.json").read_text())
    assert found["gradable"] is False and "course staff" in found["format_errors"][0]


def test_results_are_cut_to_prairielearns_size_limit_outputs_first():
    tests = [{"name": f"ch05.t{i}", "description": "", "points": 1, "max_points": 1, "message": "passed",
              "output": "x" * 20_000} for i in range(200)]
    found = fit({"gradable": True, "score": 1.0, "message": "m", "tests": tests, "stamp": {}})
    assert len(json.dumps(found).encode()) <= MAX_BYTES
    assert len(found["tests"]) == 200 and all(t["message"] == "passed" for t in found["tests"])
    assert all(t["output"].endswith("[cut]") for t in found["tests"])
    # The same results grade the same: nothing but text was shortened.
    assert sum(t["points"] for t in found["tests"]) == 200


def test_results_json_is_built_from_the_student_facing_fields_only():
    """A check whose student and staff diagnoses differ shows the student's; a hidden
    check never shows output, whatever the report holds."""
    from types import SimpleNamespace

    from grader.checks.ch05_block.block import formula
    from grader.checks.ch05_block.block.hidden import matches_reference
    from grader.run.results import GradeReport

    def check(name, hidden):
        return SimpleNamespace(name=name, hidden=hidden, points=2.0, summary="what a pass means", chapter="05",
                               task="block")

    results = [SimpleNamespace(check=check(formula.name, False), status="failed", score=0.0,
                               diagnosis="the block re-normalises its output", staff_diagnosis="SECRET staff words",
                               output="printed by the code", staff_output="SECRET"),
               SimpleNamespace(check=check(matches_reference.name, True), status="failed", score=0.0,
                               diagnosis="differs from the reference on random inputs", staff_diagnosis="SECRET",
                               output="inputs the code printed", staff_output="SECRET")]
    report = GradeReport("your upload", results, "sandbox", "the reference")
    found = pl_results(report, {"kit": "k"})
    assert "SECRET" not in json.dumps(found)
    public, hidden = found["tests"]
    assert public["message"] == "failed: the block re-normalises its output"
    assert public["output"] == "printed by the code"
    assert hidden["output"] == "" and hidden["description"].startswith("hidden check")
