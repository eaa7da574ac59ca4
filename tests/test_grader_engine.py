"""The engine end to end: the reference earns every point, the student copy none,
uploads are found at any depth, and results.json has Gradescope's shape."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from grader.__main__ import main as cli
from grader.checks import catalogue
from grader.run.results import NOT_IMPLEMENTED, PASSED
from grader.run.engine import grade
from grader.regions import all_regions
from grader.run.report import results_json
from grader.run.processes import Limits
from grader.run.sandbox import Sandbox
from grader.run.submission import SubmissionError, load

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "hero_transformer"
STUDENT = ROOT / "hero_transformer"


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(Limits()) as box:
        yield box


@pytest.fixture(scope="module")
def reference_report(sandbox):
    return grade(load(SOLUTIONS), runner=sandbox, seed=11)


def test_every_task_is_a_region_of_the_reference_and_back():
    regions = all_regions(SOLUTIONS)
    tasks = catalogue.tasks()
    for name, task in tasks.items():
        assert name in regions, f"task {name} has no solution region"
        assert (f"{task.module}.py", task.qualname) == (regions[name].path, regions[name].qualname)
    ungraded = sorted(set(regions) - set(tasks))
    assert not ungraded, f"solution regions no check grades: {ungraded}"


def test_every_task_has_a_public_and_a_hidden_check():
    for chapter in catalogue.chapters():
        for task in chapter.tasks:
            checks = [c for c in chapter.checks if c.task == task.name]
            assert any(not c.hidden for c in checks), f"{task.name} has no public check"
            assert sum(c.points for c in checks) > 0


def test_check_names_are_unique_and_well_formed():
    names = [c.name for c in catalogue.all_checks()]
    assert len(names) == len(set(names))
    for check in catalogue.all_checks():
        chapter, task, what = check.name.split(".")
        assert chapter == f"ch{catalogue.chapter_of_task()[check.task].number}" and task == check.task and what


def test_reference_gets_full_marks(reference_report):
    failing = [(r.check.name, r.status, r.diagnosis) for r in reference_report.results if r.status != PASSED]
    assert not failing
    assert reference_report.score == reference_report.max_score > 0


def test_student_copy_gets_zero_and_every_check_not_implemented(sandbox):
    report = grade(load(STUDENT), runner=sandbox, seed=11)
    assert report.score == 0
    odd = [(r.check.name, r.status, r.diagnosis) for r in report.results if r.status != NOT_IMPLEMENTED]
    assert not odd


def test_results_json_has_gradescope_shape(reference_report):
    data = results_json(reference_report)
    assert data["score"] == reference_report.score
    assert isinstance(data["execution_time"], float) and data["output"]
    assert len(data["tests"]) == len(reference_report.results)
    for number, test in enumerate(data["tests"], start=1):
        assert set(test) == {"name", "number", "score", "max_score", "status", "output", "output_format",
                             "visibility", "tags", "extra_data"}
        assert (test["extra_data"]["verdict"] is None) == (test["status"] == "passed")
        assert test["status"] in ("passed", "failed") and test["output_format"] == "md"
        assert test["visibility"] in ("visible", "after_published") and test["number"] == str(number)
    chapters = data["extra_data"]["chapters"]
    assert sum(c["max_score"] for c in chapters.values()) == data["extra_data"]["max_score"]
    json.dumps(data)


def test_hidden_check_output_reveals_no_numbers_from_expected_values(sandbox):
    # A wrong GELU fails hidden checks; their text must not print the expected tensor.
    from grader.mutants import apply
    from grader.run.reference import Reference

    reference = Reference()
    sources = apply(reference.sources, "model", "gelu", "return torch.relu(x)")
    report = grade(load_sources(sources), chapters=["05"], runner=sandbox, seed=3)
    for test in results_json(report)["tests"]:
        if "hidden" in test["tags"] and test["status"] == "failed":
            assert "tensor(" not in test["output"]


def load_sources(sources):
    from grader.run.submission import Submission

    return Submission("inline", sources)


def _write_package(folder: Path):
    for source in SOLUTIONS.glob("*.py"):
        target = folder / source.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source.read_text())


@pytest.mark.parametrize("prefix", ["hero_transformer", "myrepo/hero_transformer", "a/b/c/hero_transformer"])
def test_package_found_at_any_depth_in_a_zip(tmp_path, prefix):
    archive = tmp_path / "upload.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for source in SOLUTIONS.glob("*.py"):
            z.writestr(f"{prefix}/{source.name}", source.read_text())
        z.writestr("__MACOSX/hero_transformer/._model.py", "junk")
        z.writestr("notes.txt", "hello")
    submission = load(archive)
    assert set(submission.sources) == {p.name for p in SOLUTIONS.glob("*.py")}


def test_package_found_in_a_folder(tmp_path):
    _write_package(tmp_path / "repo" / "hero_transformer")
    assert "model.py" in load(tmp_path / "repo").sources
    assert "model.py" in load(tmp_path / "repo" / "hero_transformer").sources


@pytest.mark.parametrize("make", ["missing", "empty_dir", "text_file", "bad_zip", "zip_without_package"])
def test_unusable_uploads_are_clear_errors(tmp_path, make):
    path = tmp_path / "upload"
    if make == "empty_dir":
        path.mkdir()
    elif make == "text_file":
        path.write_text("not a submission")
    elif make == "bad_zip":
        path = tmp_path / "upload.zip"
        path.write_bytes(b"PK\x03\x04 broken")
    elif make == "zip_without_package":
        path = tmp_path / "upload.zip"
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("model.py", "x = 1")
    with pytest.raises(SubmissionError) as error:
        load(path)
    assert "hero_transformer" in str(error.value) or "exist" in str(error.value) or "zip" in str(error.value)


def test_cli_writes_json_even_for_a_bad_upload(tmp_path, capsys):
    out = tmp_path / "results.json"
    status = cli(["grade", str(tmp_path / "nothing-here.zip"), "--json", str(out)])
    data = json.loads(out.read_text())
    assert status == 1 and data["score"] == 0 and "does not exist" in data["output"]


def test_cli_rejects_an_unknown_chapter(capsys):
    with pytest.raises(SystemExit) as stop:
        cli(["grade", str(SOLUTIONS), "--chapters", "42"])
    assert "no chapter" in str(stop.value.code)


def test_submit_packs_the_package(tmp_path, monkeypatch):
    out = tmp_path / "submission.zip"
    assert cli(["submit", str(SOLUTIONS), "--output", str(out)]) == 0
    with zipfile.ZipFile(out) as z:
        assert "hero_transformer/model.py" in z.namelist()
    assert "model.py" in load(out).sources


def test_grade_class_writes_a_gradebook(tmp_path):
    import csv
    import shutil

    from grader.grade_class.gradebook import grade_class

    uploads = tmp_path / "uploads"
    shutil.copytree(SOLUTIONS, uploads / "alice")  # the package's files in a folder of another name
    shutil.copytree(STUDENT, uploads / "bob" / "hero_transformer")
    (uploads / "carol.zip").write_text("not a zip")
    # share_sandbox=False: the way a machine that cannot isolate workers grades, a fresh sandbox per upload.
    rows = grade_class(uploads, tmp_path / "out", csv_path=tmp_path / "gradebook.csv", json_dir=tmp_path / "json",
                       chapters=["05"], share_sandbox=False)
    with (tmp_path / "gradebook.csv").open() as f:
        table = {row["student"]: row for row in csv.DictReader(f)}
    assert set(table) == {"alice", "bob", "carol"}
    assert float(table["alice"]["total"]) == float(table["alice"]["max"]) == float(table["alice"]["ch05"]) > 0
    assert float(table["bob"]["total"]) == 0 and float(table["bob"]["max"]) > 0
    assert table["carol"]["note"] and float(table["carol"]["total"]) == 0
    # Each student's results.json, and beside it the staff-only companion.
    assert {p.name for p in (tmp_path / "json").iterdir()} == {
        f"{name}{suffix}" for name in ("alice", "bob", "carol") for suffix in (".json", ".staff.json")}
    assert len(rows) == 3
