"""A new task, the way course staff add one (docs/architecture.md, "Adding a task"):
`make new-task` in a copy of the kit, then three files written by hand from what this test
carries (the reference's body, the task folder's checks, the lesson), `make student`, and
`make task-check` holds every step."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.regions import all_regions, find_regions

ROOT = Path(__file__).resolve().parent.parent
PLACEHOLDER = '    raise NotImplementedError("write the reference zz_selftest_norm of task zz_selftest_norm here")\n'
BODY = "    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + 1e-5)\n"
# The scaffold's public check with a second one added, as an author would write it: the
# output keeps its input's shape, counted once the value check passes.
SHAPE_CHECK = '''

@check("keeps_shape", 1, "zz_selftest_norm of a [2, 4, 6] input is [2, 4, 6]", probe=probe_zz_selftest_norm,
       inputs=lambda g: {"x": torch.randn(2, 4, 6, generator=g, dtype=torch.float64)}, gated_by=("example",))
def keeps_shape(out, inputs, expected):
    shape = tuple(out["y"].shape)
    return None if shape == (2, 4, 6) else f"zz_selftest_norm of a [2, 4, 6] input returned shape {list(shape)}"
'''
LESSON = """
`zz_selftest_norm` divides each position's features by their root mean square, with eps = 1e-5
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


# What `make student` writes: the stubs, the chapter's task order, facts and forms, the
# lessons' tables and notebooks.
GENERATED = ("hero_transformer/", "grader/checks/ch05_block/tasks.json", "grader/checks/ch05_block/facts.json",
             "grader/checks/ch05_block/forms.json", "grader/checks/ch05_block/hidden/forms.json", "assignments/")


def _snapshot(kit: Path) -> dict[str, str]:
    import hashlib

    return {p.relative_to(kit).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in kit.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and ".worker_view" not in p.parts}  # caches


def _run(kit: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(kit)}
    return subprocess.run([sys.executable, *args], cwd=kit, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_a_task_added_with_the_scaffold_passes_task_check(tmp_path):
    kit = _kit_copy(tmp_path)
    made = _run(kit, "-m", "grader.generate.new_task", "05", "zz_selftest_norm", "--title", "self-test norm")
    assert made.returncode == 0, made.stdout + made.stderr
    assert "make task-check TASK=zz_selftest_norm" in made.stdout
    row = next(line for line in (kit / "assignments" / "README.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("| [ch05_block]"))
    assert row.endswith(", `zz_selftest_norm` (`model.py`) |"), row  # "what you implement" names it
    again = _run(kit, "-m", "grader.generate.new_task", "05", "zz_selftest_norm")
    assert again.returncode != 0 and "exists already" in again.stdout + again.stderr

    # Before the body is written, make student stops with a sentence, not a traceback.
    assert _run(kit, "-m", "grader.generate.consistency").returncode == 0
    unwritten = _run(kit, "-m", "grader.generate.facts")
    assert unwritten.returncode == 1 and "write the reference's body first" in unwritten.stderr
    assert "Traceback" not in unwritten.stderr, unwritten.stderr

    folder = kit / "grader" / "checks" / "ch05_block" / "zz_selftest_norm"
    assert sorted(p.name for p in folder.iterdir()) == ["__init__.py", "hidden.py", "mutants.py"]
    scaffolded = _snapshot(kit)

    # What a person writes by hand: the region's body, the folder's checks, the lesson's words.
    checks = folder / "__init__.py"
    checks.write_text(checks.read_text(encoding="utf-8") + SHAPE_CHECK, encoding="utf-8")
    model = kit / "solutions" / "hero_transformer" / "model.py"
    text = model.read_text(encoding="utf-8")
    assert PLACEHOLDER in text
    model.write_text(text.replace(PLACEHOLDER, BODY), encoding="utf-8")
    lesson = kit / "assignments" / "ch05_block" / "README.md"
    lesson.write_text(lesson.read_text(encoding="utf-8") + LESSON, encoding="utf-8")
    for step in ("consistency", "facts", "forms", "student_copy", "lesson_tables"):
        done = _run(kit, "-m", f"grader.generate.{step}")
        assert done.returncode == 0, (step, done.stdout + done.stderr)
    checked = _run(kit, "-m", "grader.qa.task_check", "zz_selftest_norm")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "steps hold" in checked.stdout
    listed = _run(kit, "-c", "from grader.checks import catalogue\n"
                  "from grader.checks.ch05_block.zz_selftest_norm import keeps_shape\n"
                  "print(keeps_shape.check in catalogue.chapters()[5].checks, keeps_shape.name.split('.'))")
    assert listed.stdout.strip() == "True ['ch05', 'zz_selftest_norm', 'keeps_shape']", listed.stdout + listed.stderr

    # Every other file that changed was written by a command, none by hand.
    changed = {rel for rel, digest in _snapshot(kit).items() if scaffolded.get(rel) != digest}
    by_hand = {"solutions/hero_transformer/model.py", "grader/checks/ch05_block/zz_selftest_norm/__init__.py",
               "assignments/ch05_block/README.md"}
    generated = changed - by_hand
    assert by_hand <= changed and all(rel.startswith(GENERATED) for rel in generated), sorted(generated)
    # The task took its place in the chapter: where its region stands among the chapter's regions.
    order = json.loads((kit / "grader" / "checks" / "ch05_block" / "tasks.json").read_text(encoding="utf-8"))
    found = all_regions(kit / "solutions" / "hero_transformer")
    assert "zz_selftest_norm" in order["tasks"]
    assert order["tasks"] == sorted(order["tasks"], key=lambda t: (found[t].path, found[t].begin)), order


METHOD_PLACEHOLDER = ('        raise NotImplementedError("write the reference ZzSelftestScale.forward of task '
                      'zz_selftest_scale here")\n')
METHOD_BODY = "        return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + 1e-5)\n"


@pytest.mark.slow
def test_a_method_of_a_new_class_is_scaffolded_in_its_chapters_part(tmp_path):
    """FUNC=Class.method: the class with its __init__ outside the region, the region the
    method's body, written at the end of the chapter's part of model.py (before chapter
    07's heading), and the task passes task-check once its body is written."""
    kit = _kit_copy(tmp_path)
    made = _run(kit, "-m", "grader.generate.new_task", "05", "zz_selftest_scale", "--function",
                "ZzSelftestScale.forward")
    assert made.returncode == 0, made.stdout + made.stderr
    assert "ZzSelftestScale.__init__" in made.stdout
    model = kit / "solutions" / "hero_transformer" / "model.py"
    text = model.read_text(encoding="utf-8")
    assert text.index("class ZzSelftestScale(") < text.index("chapter 07: the model")
    region = find_regions(text, "model.py")
    assert [r.qualname for r in region if r.task == "zz_selftest_scale"] == ["ZzSelftestScale.forward"]
    model.write_text(text.replace(METHOD_PLACEHOLDER, METHOD_BODY), encoding="utf-8")
    for step in ("consistency", "facts", "forms", "student_copy", "lesson_tables"):
        done = _run(kit, "-m", f"grader.generate.{step}")
        assert done.returncode == 0, (step, done.stdout + done.stderr)
    checked = _run(kit, "-m", "grader.qa.task_check", "zz_selftest_scale")
    assert checked.returncode == 0 and "steps hold" in checked.stdout, checked.stdout + checked.stderr
    order = json.loads((kit / "grader" / "checks" / "ch05_block" / "tasks.json").read_text(encoding="utf-8"))
    assert order["tasks"][-1] == "zz_selftest_scale", order  # after the block, as its region is


def test_a_function_name_that_is_neither_says_what_func_takes(tmp_path):
    from grader.generate.new_task import scaffold

    with pytest.raises(SystemExit) as stopped:
        scaffold(tmp_path, "05", "zz_selftest_scale", "Zz-Scale", "model", "title")
    assert "Class.method (RMSNorm.forward)" in str(stopped.value)
