"""Files as students' laptops write them: names that differ from the course's only in case
(Model.py), a UTF-8 byte-order mark, Windows and old Mac line endings, a zip with Windows
paths. Each upload form (folder, zip, tarball) reads them alike. And files as an attacker
writes them: symbolic links, pipes, paths that climb out of the archive, encrypted or
unknown members, all read as data or refused (grader/run/submission.py)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from grader.run.results import PASSED
from grader.run.engine import grade
from grader.run.processes import Limits
from grader.regions import package_sources
from grader.run.sandbox import Sandbox
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


def test_a_utf8_bom_and_windows_zip_paths_are_read(tmp_path):
    archive = tmp_path / "upload.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for source in SOLUTIONS.glob("*.py"):
            z.writestr(f"hero_transformer\\{source.name}", "\ufeff" + source.read_text())
    submission = load(archive)
    assert "model.py" in submission.sources and not submission.sources["model.py"].startswith("\ufeff")
    with Sandbox(Limits()) as box:
        report = grade(submission, chapters=["02"], runner=box, seed=1)
    assert report.score == report.max_score > 0


# ------------------------------------------------------- read as data, and only as data
#
# An upload is read, never followed: a symbolic link, a pipe, a path that climbs out of
# the archive, an encrypted member or an unknown compression is refused or set aside.


def _package(folder: Path) -> Path:
    package = folder / "hero_transformer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text("x = 1\n")
    return package


def test_a_plain_folder_still_loads(tmp_path):
    _package(tmp_path / "upload")
    assert sorted(load(tmp_path / "upload").sources) == ["__init__.py", "model.py"]


def test_a_symlinked_package_folder_is_refused(tmp_path):
    (tmp_path / "upload").mkdir()
    (tmp_path / "upload" / "hero_transformer").symlink_to(SOLUTIONS)
    with pytest.raises(SubmissionError, match="symbolic links"):
        load(tmp_path / "upload")


def test_a_symlinked_subfolder_is_refused(tmp_path):
    package = _package(tmp_path / "upload")
    (package / "more").symlink_to(SOLUTIONS)
    with pytest.raises(SubmissionError, match="hero_transformer/more"):
        load(tmp_path / "upload")


def test_a_pipe_is_not_read(tmp_path):
    package = _package(tmp_path / "upload")
    os.mkfifo(package / "pipe.py")
    with pytest.raises(SubmissionError, match="not a regular file"):
        load(tmp_path / "upload")


def test_a_symlink_stored_in_a_zip_is_refused(tmp_path):
    upload = tmp_path / "link.zip"
    with zipfile.ZipFile(upload, "w") as archive:
        link = zipfile.ZipInfo("hero_transformer/model.py")
        link.create_system, link.external_attr = 3, (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, "/etc/passwd")
        archive.writestr("hero_transformer/__init__.py", "")
    with pytest.raises(SubmissionError, match="symbolic links"):
        load(upload)


def _patched_zip(path: Path, local_offset: int, central_offset: int, value: int, width: int = 2, bits=False):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("hero_transformer/model.py", "x = 1\n")
    data = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", local_offset), (b"PK\x01\x02", central_offset)):
        at = data.find(signature) + offset
        if bits:
            data[at] |= value
        else:
            data[at:at + width] = value.to_bytes(width, "little")
    path.write_bytes(bytes(data))


def test_an_encrypted_member_is_a_submission_error(tmp_path):
    _patched_zip(tmp_path / "e.zip", 6, 8, 1, bits=True)
    with pytest.raises(SubmissionError, match="encrypted"):
        load(tmp_path / "e.zip")


def test_an_unknown_compression_is_a_submission_error(tmp_path):
    _patched_zip(tmp_path / "c.zip", 8, 10, 99)
    with pytest.raises(SubmissionError, match="compression"):
        load(tmp_path / "c.zip")


def test_symlinks_in_an_uploaded_folder_are_not_followed(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET-TA-TOKEN\n")
    package = tmp_path / "upload" / "hero_transformer"
    package.mkdir(parents=True)
    for source in SOLUTIONS.glob("*.py"):
        (package / source.name).symlink_to(source)
    (package / "notes.py").symlink_to(secret)
    try:
        submission = load(tmp_path / "upload")
    except SubmissionError:
        return
    texts = "\n".join(submission.sources.values())
    assert "BEGIN SOLUTION" not in texts and "TOPSECRET" not in texts


def test_zip_paths_cannot_escape_or_break_loading(tmp_path):
    upload = tmp_path / "weird.zip"
    model = (SOLUTIONS / "model.py").read_bytes()
    with zipfile.ZipFile(upload, "w") as archive:
        archive.writestr("hero_transformer/model.py", model)
        archive.writestr("hero_transformer/__init__.py", b"")
        archive.writestr("../../escape/hero_transformer/model.py", b"print('escaped')")
        archive.writestr("/abs/hero_transformer/abs.py", b"print('absolute')")
        archive.writestr("hero_transformer/../../../../etc/evil.py", b"print('evil')")
        archive.writestr("hero_transformer/" + "a" * 200 + ".py", b"x = 1\n")
        archive.writestr("hero_transformer/latin1.py", "s = 'caf\xe9'\n".encode("latin-1"))
        archive.writestr("hero_transformer/sub/../../../up.py", b"up = 1\n")
    submission = load(upload)
    assert "model.py" in submission.sources
    for name in submission.sources:
        assert not name.startswith("/") and ".." not in Path(name).parts, name
    assert not (tmp_path.parent / "escape").exists()
