"""Stamped, comparable regrades: grade-class over a folder graded under another stamp keeps
the earlier records in previous/<stamp>/, regrades, and writes regrade.csv with each
student's old and new score and the checks whose outcome changed."""

from __future__ import annotations

import csv
import json
import zipfile
from pathlib import Path

import pytest

from grader.__main__ import main as cli
from grader.checks.ch05_block.block import zero_branch_identity
from grader.run.schedule import possible_points
from grader.run.stamp import stamp, stamp_id

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "hero_transformer"
STUB = ROOT / "hero_transformer"
NO_RESIDUAL = ("hidden = hidden + self.residual_dropout(fed)", "hidden = self.residual_dropout(fed)")
FLAGS = ["--chapters", "05", "--public-only", "--allow-weak-sandbox"]
FULL = possible_points(["05"], public_only=True)


def _zip(path: Path, source: Path, replace: tuple[str, str] | None = None) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for file in sorted(source.glob("*.py")):
            text = file.read_text()
            archive.writestr(f"hero_transformer/{file.name}", text.replace(*replace) if replace else text)


def _records(out: Path) -> dict[str, Path]:
    return {json.loads(p.read_text())["students"][0]["name"]: p for p in sorted((out / "results").glob("*.json"))
            if not p.name.endswith(".staff.json")}


def _regrade_rows(out: Path) -> dict[str, dict]:
    with (out / "regrade.csv").open(newline="") as handle:
        return {row["student"]: row for row in csv.DictReader(handle)}


def _grade(uploads: Path, out: Path, seed: int) -> None:
    assert cli(["grade-class", str(uploads), "--out", str(out), "--seed", str(seed), *FLAGS]) == 0


@pytest.fixture(scope="module")
def graded_before(tmp_path_factory):
    """A class graded once, then its records made to look graded by an older kit: another
    stamp, and for ann one check that ended the other way."""
    base = tmp_path_factory.mktemp("regrade")
    uploads = base / "uploads"
    uploads.mkdir()
    _zip(uploads / "ann.zip", SOLUTIONS)
    _zip(uploads / "ben.zip", STUB)
    _zip(uploads / "cho.zip", SOLUTIONS, NO_RESIDUAL)
    out = base / "graded"
    _grade(uploads, out, seed=1)
    old = {**stamp(1), "kit": "0" * 16, "torch": "2.3.0+cpu"}
    old["id"] = stamp_id(old)
    flipped = None
    for name, path in _records(out).items():
        record = json.loads(path.read_text())
        record["stamp"], record["kit"] = old, old["kit"]
        if name == "ann":
            check = next(c for c in record["checks"] if c["name"] == zero_branch_identity.name)
            check["status"], check["score"] = "failed", 0.0
            record["score"] -= check["max_score"]
            flipped = check
        path.write_text(json.dumps(record))
    before = {path.name: path.read_text() for path in (out / "results").glob("*.json")}
    gradebook_before = (out / "gradebook.csv").read_text()
    return uploads, out, old, flipped, before, gradebook_before


@pytest.mark.slow
def test_a_regrade_under_another_stamp_keeps_the_old_records_and_lists_what_changed(graded_before):
    uploads, out, old, flipped, before, gradebook_before = graded_before
    _grade(uploads, out, seed=1)
    new = stamp(1)
    kept = out / "previous" / old["id"]
    # The earlier records and their staff companions, untouched, with the gradebook they made.
    assert {p.name: p.read_text() for p in (kept / "results").glob("*.json")} == before
    assert (kept / "gradebook.csv").read_text() == gradebook_before
    archived = json.loads((kept / "archived.json").read_text())
    assert archived["stamp"] == old and archived["replaced_by"]["id"] == new["id"]
    # The new records, under the new stamp.
    records = {name: json.loads(p.read_text()) for name, p in _records(out).items()}
    assert sorted(records) == ["ann", "ben", "cho"]
    assert all(r["stamp"] == new and r["results"]["extra_data"]["stamp"] == new for r in records.values())
    staff = json.loads(next((out / "results").glob("ann*.staff.json")).read_text())
    assert staff["stamp"] == new
    rows = _regrade_rows(out)
    assert sorted(rows) == ["ann", "ben", "cho"]
    assert rows["ann"]["old_score"] == f"{FULL - flipped['max_score']:g}" and rows["ann"]["new_score"] == f"{FULL:g}"
    assert rows["ann"]["changed_checks"] == f"{zero_branch_identity.name}: failed -> passed"
    assert rows["ben"]["old_score"] == rows["ben"]["new_score"] == "0" and rows["ben"]["changed_checks"] == ""
    assert rows["cho"]["old_score"] == rows["cho"]["new_score"] and rows["cho"]["changed_checks"] == ""
    assert all(row["note"] == "" and row["old_max"] == row["new_max"] == f"{FULL:g}" for row in rows.values())
    summary = (out / "summary.md").read_text()
    assert new["id"] in summary and old["id"] in summary and f"previous/{old['id']}/" in summary
    assert "1 score(s) changed" in summary


@pytest.mark.slow
def test_a_rerun_under_the_same_stamp_regrades_nothing_and_a_new_seed_regrades_again(graded_before, capsys):
    uploads, out, old, _, _, _ = graded_before
    _grade(uploads, out, seed=1)  # the regrade above, or this one, under stamp(1)
    first = {p.name: p.read_text() for p in (out / "results").glob("*.json")}
    capsys.readouterr()
    _grade(uploads, out, seed=1)
    assert "3 upload(s) unchanged since they were graded" in capsys.readouterr().out
    assert {p.name: p.read_text() for p in (out / "results").glob("*.json")} == first
    assert sorted(p.name for p in (out / "previous").iterdir()) == [old["id"]]

    # Another seed is another stamp: the stamp(1) grades are kept too, and compared anew.
    _grade(uploads, out, seed=2)
    one, two = stamp(1), stamp(2)
    assert sorted(p.name for p in (out / "previous").iterdir()) == sorted([old["id"], one["id"]])
    assert {p.name: p.read_text() for p in (out / "previous" / one["id"] / "results").glob("*.json")} == first
    rows = _regrade_rows(out)
    assert rows["ann"]["old_score"] == rows["ann"]["new_score"] == f"{FULL:g}"  # compared with stamp(1), not the old kit
    assert all(json.loads(p.read_text())["stamp"] == two for p in _records(out).values())
    summary = (out / "summary.md").read_text()
    assert one["id"] in summary and two["id"] in summary and old["id"] not in summary


def test_grade_stamps_its_results_and_staff_file_with_the_seed_it_drew(tmp_path):
    """`grade` without --seed still names the seed its hidden checks used."""
    out = tmp_path / "results.json"
    assert cli(["grade", str(SOLUTIONS), "--chapters", "01", "--allow-weak-sandbox", "--json", str(out)]) == 0
    found = json.loads(out.read_text())["extra_data"]["stamp"]
    assert isinstance(found["seed"], int) and found == stamp(found["seed"])
    assert json.loads((tmp_path / "results.staff.json").read_text())["stamp"] == found
