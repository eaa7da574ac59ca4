"""A task's public checks use inputs every student can read, so code that only looks their
answers up (a table computed elsewhere, an error anywhere else) passes them. When graded,
code that passes every public check of a task and fails every hidden one (whose inputs
are drawn for each grading) earns none of the task's public points
(grader.run.engine.public_only); a slip fails a public check too and loses nothing more.
The kit's own table of every task (grader.qa.trivial_bodies, kind "table") scores 0
beside the other bodies that compute nothing (tests/test_gating_and_confusions.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grader.checks import catalogue
from grader.qa.trivial_bodies import trivial_entries
from grader.run.engine import gated, public_only
from grader.run.reference import Reference
from grader.run.results import ERROR, FAILED, GRADER_FAILED, PASSED, CheckResult

ROOT = Path(__file__).resolve().parent.parent


def _upload_with(entry, root: Path) -> Path:
    """The reference with the entry's body in place, as a folder a TA would grade."""
    package = root / "hero_transformer"
    package.mkdir(parents=True)
    for rel, text in entry.apply(Reference.available().sources).items():
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        (package / rel).write_text(text, encoding="utf-8")
    return root


def test_a_table_of_the_published_gelu_answers_earns_no_point_when_graded(tmp_path):
    table = next(t for t in trivial_entries() if t.name == "gelu_table")
    upload = _upload_with(table, tmp_path / "upload")
    out = tmp_path / "results.json"
    done = subprocess.run([sys.executable, "-m", "grader", "grade", str(upload), "--chapters", "05", "--json", str(out),
                           "--allow-weak-sandbox"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.is_file(), done.stdout + done.stderr
    tests = {t["name"]: t for t in json.loads(out.read_text())["tests"]}
    gelu = {name: t for name, t in tests.items() if name.startswith("ch05.gelu.")}
    public = {name: t for name, t in gelu.items() if t["visibility"] == "visible" and "hidden" not in t["tags"]}
    assert public and sum(t["score"] for t in gelu.values()) == 0
    for name, t in public.items():
        assert t["extra_data"]["verdict"] == {"kind": "public_only", "task": "gelu",
                                              "on": ["ch05.gelu.matches_reference"]}, name
        assert "published inputs only" in t["output"], name
    # Every other task of the chapter is the reference's, and keeps every point.
    others = [t for name, t in tests.items() if not name.startswith("ch05.gelu.")]
    assert others and all(t["score"] == t["max_score"] for t in others)


def test_the_table_passes_the_students_own_check(tmp_path):
    """No hidden check runs in `check`: the public checks pass there (the student's own check
    says what the public inputs show; what they cannot show costs points when graded)."""
    table = next(t for t in trivial_entries() if t.name == "gelu_table")
    upload = _upload_with(table, tmp_path / "upload")
    out = tmp_path / "check.json"
    subprocess.run([sys.executable, "-m", "grader", "check", str(upload / "hero_transformer"), "--chapters", "05",
                    "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    tests = {t["name"]: t for t in json.loads(out.read_text())["tests"]}
    gelu = [t for name, t in tests.items() if name.startswith("ch05.gelu.")]
    assert gelu and all(t["status"] == "passed" for t in gelu)


@pytest.mark.parametrize("task", sorted(catalogue.tasks()))
def test_every_task_has_a_check_on_inputs_drawn_for_each_grading(task):
    """Where a task had none, a table of its public answers would keep every point."""
    def drawn(check, seed):
        return check.make_inputs(torch.Generator().manual_seed(seed + sum(map(ord, check.name))))

    def differ(a, b) -> bool:
        if isinstance(a, torch.Tensor):
            return not (isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b))
        if isinstance(a, dict):
            return a.keys() != b.keys() or any(differ(a[k], b[k]) for k in a)
        if isinstance(a, (list, tuple)):
            return len(a) != len(b) or any(differ(x, y) for x, y in zip(a, b))
        return a != b

    hidden = [c for c in catalogue.all_checks() if c.task == task and c.hidden]
    assert any(differ(drawn(c, 1), drawn(c, 2)) for c in hidden), task


def _result(name: str, status: str, cause: str = "") -> CheckResult:
    return CheckResult(next(c for c in catalogue.all_checks() if c.name == name), status, cause=cause)


def test_public_points_are_withheld_only_from_code_that_passes_exactly_what_it_was_shown():
    public = [_result("ch05.gelu.exact_values", PASSED), _result("ch05.gelu.odd_part", PASSED)]
    failing = _result("ch05.gelu.matches_reference", FAILED)
    crashed = _result("ch05.gelu.matches_reference", ERROR)
    for hidden in (failing, crashed):
        withheld = public_only([*public, hidden])
        assert set(withheld) == {"ch05.gelu.exact_values", "ch05.gelu.odd_part"}
        said = gated(public[0], {}, withheld["ch05.gelu.exact_values"])
        assert said.status == FAILED and said.verdict["kind"] == "public_only"
        assert gated(hidden, {}, withheld.get(hidden.check.name, ())) is hidden  # keeps its own verdict
    # A slip fails a public check too: what passed keeps its points.
    slip = [public[0], _result("ch05.gelu.odd_part", FAILED), failing]
    assert public_only(slip) == {}
    # So does code that passes a hidden check, a run without hidden checks (the student's
    # own check), and a run where the grader failed on a check of its own.
    assert public_only([*public, _result("ch05.gelu.matches_reference", PASSED)]) == {}
    assert public_only(public) == {}
    assert public_only([*public, _result("ch05.gelu.matches_reference", ERROR, cause=GRADER_FAILED)]) == {}
