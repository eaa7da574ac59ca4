"""A new task, the way course staff add one: `make new-task` in a copy of the kit, the
reference's body and the lesson written by hand (from files this test carries), `make
student`, and `make task-check` holds every step."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLACEHOLDER = '    raise NotImplementedError("write the reference rms_norm of task rms_norm here")\n'
BODY = "    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + 1e-5)\n"
LESSON = """
`rms_norm` divides each position's features by their root mean square, with eps = 1e-5
inside the root; unlike LayerNorm it subtracts no mean.
"""


def _kit_copy(tmp_path: Path) -> Path:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, check=True).stdout
    copy = tmp_path / "kit"
    for rel in filter(None, listed.decode().split("\0")):
        source = ROOT / rel
        if source.is_file():
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / rel)
    return copy


def _run(kit: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(kit)}
    return subprocess.run([sys.executable, *args], cwd=kit, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_a_task_added_with_the_scaffold_passes_task_check(tmp_path):
    kit = _kit_copy(tmp_path)
    made = _run(kit, "-m", "grader.generate.new_task", "05", "rms_norm", "--title", "RMS norm")
    assert made.returncode == 0, made.stdout + made.stderr
    assert "make task-check TASK=rms_norm" in made.stdout
    again = _run(kit, "-m", "grader.generate.new_task", "05", "rms_norm")
    assert again.returncode != 0 and "exists already" in again.stdout + again.stderr

    # Before the body is written, make student stops with a sentence, not a traceback.
    assert _run(kit, "-m", "grader.generate.consistency").returncode == 0
    unwritten = _run(kit, "-m", "grader.generate.facts")
    assert unwritten.returncode == 1 and "write the reference's body first" in unwritten.stderr
    assert "Traceback" not in unwritten.stderr, unwritten.stderr

    # What a person writes by hand: the region's body and the lesson's words.
    model = kit / "solutions" / "hero_transformer" / "model.py"
    text = model.read_text(encoding="utf-8")
    assert PLACEHOLDER in text
    model.write_text(text.replace(PLACEHOLDER, BODY), encoding="utf-8")
    lesson = kit / "assignments" / "ch05_block" / "README.md"
    lesson.write_text(lesson.read_text(encoding="utf-8") + LESSON, encoding="utf-8")
    for step in ("consistency", "facts", "forms", "student_copy", "lesson_tables"):
        done = _run(kit, "-m", f"grader.generate.{step}")
        assert done.returncode == 0, (step, done.stdout + done.stderr)
    checked = _run(kit, "-m", "grader.qa.task_check", "rms_norm")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "steps hold" in checked.stdout
