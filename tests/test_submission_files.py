"""Files as students' laptops write them: names that differ from the course's only in case
(Model.py), a UTF-8 byte-order mark, Windows and old Mac line endings. Each upload form
(folder, zip, tarball) reads them alike."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from grader.run.results import PASSED
from grader.run.engine import grade
from grader.regions import package_sources
from grader.run.submission import CONTRACT_MODULES, SubmissionError, load, source_text

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "hero_transformer"


def _write(folder: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    return folder


def _as(form: str, tmp_path: Path, files: dict[str, bytes]) -> Path:
    """The files (paths inside the upload) as a folder, a zip or a tarball."""
    if form == "folder":
        return _write(tmp_path / "upload", files)
    if form == "zip":
        path = tmp_path / "upload.zip"
        with zipfile.ZipFile(path, "w") as archive:
            for rel, data in files.items():
                archive.writestr(rel, data)
        return path
    staged = _write(tmp_path / "staged", files)
    path = tmp_path / "upload.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for rel in files:
            archive.add(staged / rel, arcname=rel)
    return path


def _reference_files(prefix: str = "hero_transformer/") -> dict[str, bytes]:
    return {prefix + rel: text.encode("utf-8") for rel, text in package_sources(SOLUTIONS).items()}


def test_the_contract_modules_are_the_stub_packages_files():
    assert sorted(CONTRACT_MODULES) == sorted(p.name for p in (ROOT / "hero_transformer").glob("*.py"))


@pytest.mark.parametrize("form", ["folder", "zip", "tar"])
def test_a_module_named_in_another_case_is_named_in_the_problem(tmp_path, form):
    files = _reference_files()
    files["hero_transformer/Model.py"] = files.pop("hero_transformer/model.py")
    with pytest.raises(SubmissionError) as raised:
        load(_as(form, tmp_path, files))
    said = str(raised.value)
    assert "hero_transformer/Model.py must be named model.py" in said and "case" in said


@pytest.mark.parametrize("form", ["folder", "zip", "tar"])
def test_a_package_folder_named_in_another_case_is_named(tmp_path, form):
    files = _reference_files("upload/Hero_Transformer/")
    with pytest.raises(SubmissionError) as raised:
        load(_as(form, tmp_path, files))
    assert "Hero_Transformer/" in str(raised.value) and "must be named hero_transformer" in str(raised.value)


def test_an_extra_file_beside_the_right_one_is_no_problem(tmp_path):
    files = _reference_files()
    files["hero_transformer/Model.py"] = b"# an old copy\n"
    assert "model.py" in load(_as("folder", tmp_path, files)).sources


def test_source_text_reads_as_python_does():
    assert source_text(b"\xef\xbb\xbfx = 1\r\ny = 2\rz = 3\n") == "x = 1\ny = 2\nz = 3\n"
    assert source_text("s = 'é'\r\n".encode("utf-8")) == "s = 'é'\n"


@pytest.mark.parametrize("form", ["folder", "zip", "tar"])
def test_bom_and_crlf_files_load_as_plain_text(tmp_path, form):
    files = {rel: b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n") for rel, data in _reference_files().items()}
    sources = load(_as(form, tmp_path, files)).sources
    reference = package_sources(SOLUTIONS)
    assert sources == reference


def test_a_bom_and_crlf_package_earns_every_point(tmp_path, sandbox):
    """The reference saved by a Windows editor (BOM, CRLF) grades as the reference."""
    files = {rel: b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n") for rel, data in _reference_files().items()}
    submission = load(_as("zip", tmp_path, files))
    report = grade(submission, ["05", "06"], runner=sandbox, seed=5)
    assert report.results and all(r.status == PASSED for r in report.results), [
        (r.check.name, r.status, r.diagnosis) for r in report.results if r.status != PASSED]


def test_check_says_so_for_a_model_py_in_another_case(tmp_path):
    folder = _write(tmp_path, {rel: data for rel, data in _reference_files().items()}) / "hero_transformer"
    (folder / "model.py").rename(folder / "Model.py")
    done = subprocess.run([sys.executable, "-m", "grader", "check", str(folder), "--chapters", "05"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "300"})
    assert done.returncode == 1
    assert "hero_transformer/Model.py must be named model.py" in done.stdout, done.stdout + done.stderr
