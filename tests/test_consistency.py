"""`make student` stops, with a sentence saying what to add where, where the reference's
solution regions and the chapters' tasks do not name each other."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from grader.generate import consistency

ROOT = Path(__file__).resolve().parent.parent


def test_the_kit_as_committed_is_consistent():
    assert consistency.problems() == []


def test_a_region_no_chapter_grades_stops_make_student(tmp_path, monkeypatch):
    solutions = tmp_path / "hero_transformer"
    shutil.copytree(consistency.SOLUTIONS, solutions)
    model = solutions / "model.py"
    model.write_text(model.read_text(encoding="utf-8") + '''

def rms_norm(x, gamma, eps=1e-5):
    """Scale each position by its root mean square."""
    ### BEGIN SOLUTION rms_norm
    return x * gamma / (x.pow(2).mean(dim=-1, keepdim=True) + eps).sqrt()
    ### END SOLUTION
''', encoding="utf-8")
    monkeypatch.setattr(consistency, "SOLUTIONS", solutions)
    found = consistency.problems()
    assert len(found) == 1 and "'rms_norm' (rms_norm) that no chapter grades" in found[0], found
    assert "TASK_MODULES" in found[0]


def test_a_task_module_left_out_of_task_modules_stops_make_student(tmp_path, monkeypatch):
    checks = tmp_path / "checks"
    shutil.copytree(consistency.CHECKS, checks, ignore=shutil.ignore_patterns("__pycache__"))
    (checks / "ch05_block" / "rms_norm.py").write_text(
        'from grader.checks._api import Task\n\nTASKS = [Task("rms_norm", "model", "rms_norm", "RMSNorm")]\n',
        encoding="utf-8")
    monkeypatch.setattr(consistency, "CHECKS", checks)
    found = consistency.problems()
    assert len(found) == 1 and "ch05_block/rms_norm.py declares TASKS but is not in the chapter's TASK_MODULES" \
        in found[0], found


def test_the_command_is_quiet_on_a_consistent_kit():
    done = subprocess.run([sys.executable, "-m", "grader.generate.consistency"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr
