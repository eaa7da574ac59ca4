"""`make student` stops, with a sentence saying what to add where, where the reference's
solution regions and the chapters' task folders do not name each other."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.checks.facts import inputs_are_fixed
from grader.generate import consistency
from grader.regions import all_regions

ROOT = Path(__file__).resolve().parent.parent


def test_the_kit_as_committed_is_consistent():
    assert consistency.problems() == []


def test_a_region_no_chapter_grades_stops_make_student(tmp_path, monkeypatch):
    solutions = tmp_path / "hero_transformer"
    shutil.copytree(consistency.SOLUTIONS, solutions)
    model = solutions / "model.py"
    model.write_text(model.read_text(encoding="utf-8") + '''

def zz_selftest_norm(x, gamma, eps=1e-5):
    """Scale each position by its root mean square."""
    ### BEGIN SOLUTION zz_selftest_norm
    return x * gamma / (x.pow(2).mean(dim=-1, keepdim=True) + eps).sqrt()
    ### END SOLUTION
''', encoding="utf-8")
    monkeypatch.setattr(consistency, "SOLUTIONS", solutions)
    found = consistency.problems()
    assert len(found) == 1 and "'zz_selftest_norm' (zz_selftest_norm) that no chapter grades" in found[0], found
    assert "grader/checks/chNN_<topic>/zz_selftest_norm/" in found[0] and "make new-task" in found[0]


def _checks_copy(tmp_path, monkeypatch):
    checks = tmp_path / "checks"
    shutil.copytree(consistency.CHECKS, checks, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(consistency, "CHECKS", checks)
    return checks


TASK_FOLDER = 'from grader.checks._api import Task\n\nTASKS = [Task({name!r}, "model", "zz_selftest_norm", "ZzSelftestNorm")]\n'


@pytest.mark.parametrize("layout, expected", [
    ({"zz_selftest_norm/__init__.py": TASK_FOLDER.format(name="zz_selftest_norm"), "zz_selftest_norm/hidden.py": ""},
     "grades a task 'zz_selftest_norm' that has no solution region"),
    ({"zz_selftest_norm/__init__.py": TASK_FOLDER.format(name="zzselftestnorm"), "zz_selftest_norm/hidden.py": ""},
     "declares the tasks ['zzselftestnorm']: a task's folder declares that one task, named as the folder is"),
    ({"zz_selftest_norm/__init__.py": "TITLE = 'no tasks here'\n"}, "declares no TASKS"),
    ({"zz_selftest_norm/checks.py": "x = 1\n"}, "zz_selftest_norm/ has no __init__.py"),
])
def test_a_task_folder_that_does_not_fit_stops_make_student(tmp_path, monkeypatch, layout, expected):
    checks = _checks_copy(tmp_path, monkeypatch)
    for rel, text in layout.items():
        (checks / "ch05_block" / rel).parent.mkdir(parents=True, exist_ok=True)
        (checks / "ch05_block" / rel).write_text(text, encoding="utf-8")
    found = consistency.problems()
    assert len(found) == 1 and expected in found[0] and "grader/checks/ch05_block/zz_selftest_norm/" in found[0], found


def test_a_task_whose_checks_a_student_could_hard_code_needs_a_hidden_check(monkeypatch):
    """GELU's public checks have fixed inputs: without its hidden checks, answers written
    into the code would pass, so make student stops. merge_heads has none and needs none:
    its public checks draw their inputs anew."""
    import dataclasses

    from grader.checks import catalogue

    kit = catalogue.chapters()
    assert all(inputs_are_fixed(c) for c in kit[5].checks if c.task == "gelu" and not c.hidden)
    assert not all(inputs_are_fixed(c) for c in kit[4].checks if c.task == "merge_heads")
    without = [dataclasses.replace(ch, checks=tuple(c for c in ch.checks if not (c.task == "gelu" and c.hidden)))
               for ch in kit]
    monkeypatch.setattr(catalogue, "chapters", lambda: tuple(without))
    found = consistency.problems()
    assert len(found) == 1 and "task 'gelu' has no hidden check" in found[0], found
    assert "grader/checks/ch05_block/gelu/hidden.py" in found[0]


def test_the_task_order_follows_the_regions_and_is_written_when_it_is_not(tmp_path, monkeypatch):
    checks = _checks_copy(tmp_path, monkeypatch)
    committed = {p: json.loads((checks / p / "tasks.json").read_text()) for p in consistency.task_orders()}
    assert {p: order["tasks"] for p, order in committed.items()} == consistency.task_orders()
    # The order is the regions' in the chapter's modules, whatever tasks the chapter has.
    found = all_regions(consistency.SOLUTIONS)
    regions = sorted(committed["ch05_block"]["tasks"], key=lambda t: (found[t].path, found[t].begin))
    assert committed["ch05_block"]["tasks"] == regions
    (checks / "ch05_block" / "tasks.json").write_text(json.dumps({"tasks": regions[::-1]}))
    assert consistency.write_task_orders() == [checks / "ch05_block" / "tasks.json"]
    assert json.loads((checks / "ch05_block" / "tasks.json").read_text()) == committed["ch05_block"]
    assert consistency.write_task_orders() == []


def test_the_command_is_quiet_on_a_consistent_kit():
    done = subprocess.run([sys.executable, "-m", "grader.generate.consistency"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr
