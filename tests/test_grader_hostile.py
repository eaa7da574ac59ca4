"""Hostile submissions: each must score no point it did not earn, and the run must finish.

Each one is the reference with one task's body replaced by an attack (or a broken file),
graded on that task's checks in the real sandbox.
"""

from __future__ import annotations

import dataclasses

import json
import os
import signal
import textwrap
import time
from pathlib import Path

import pytest

from grader.checks import catalogue
from grader.mutants import apply
from grader.run.results import PASSED
from grader.run.engine import grade, grade_task
from grader.run.report import results_json, write_json
from grader.run.processes import Limits
from grader.run.sandbox import Sandbox
from grader.run.submission import Submission
from tests.hostile import assert_no_points, needs_bwrap, run_body
from tests.timing import limit

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "hero_transformer"

def test_syntax_error_in_model_fails_only_model_tasks(reference, sandbox):
    sources = dict(reference.sources)
    sources["model.py"] = sources["model.py"].replace("class LayerNorm(nn.Module):", "class LayerNorm(nn.Module)")
    submission = Submission("syntax-error", sources)
    report = grade(submission, chapters=["05"], runner=sandbox, seed=1)
    assert_no_points(report.results)
    assert all(r.status == "error" for r in report.results)
    assert "SyntaxError" in report.results[0].diagnosis and "model.py" in report.results[0].diagnosis


def test_endless_loop_times_out(reference, sandbox):
    results = run_body(reference, sandbox, "gelu", "while True:\n    pass")
    assert_no_points(results)
    assert {r.status for r in results} == {"timeout"}


def test_sleeping_forever_times_out(reference, sandbox):
    results = run_body(reference, sandbox, "gelu", "import time\ntime.sleep(10**6)")
    assert {r.status for r in results} == {"timeout"}


def test_huge_allocation_is_refused(reference, sandbox):
    results = run_body(reference, sandbox, "gelu", "big = torch.empty(30 * 1024**3 // 8, dtype=torch.float64)\nbig.fill_(1.0)\nreturn x")
    assert_no_points(results)
    assert all(r.status == "error" for r in results)


def test_os_exit_at_import(reference, sandbox):
    sources = dict(reference.sources)
    sources["model.py"] = sources["model.py"].replace("import torch\n", "import torch\nimport os\nos._exit(0)\n", 1)
    report = grade(Submission("exit", sources), chapters=["05"], runner=sandbox, seed=1)
    assert_no_points(report.results)
    assert all(r.status == "error" for r in report.results)
    assert "ended without answering" in report.results[0].diagnosis


def test_sys_exit_inside_a_check(reference, sandbox):
    results = run_body(reference, sandbox, "gelu", "import sys\nsys.exit(0)")
    assert_no_points(results)
    assert "sys.exit" in results[0].diagnosis


def test_fake_results_file_is_overwritten(reference, sandbox, tmp_path):
    out = tmp_path / "results.json"
    body = f"""
        import json
        for path in [{str(out)!r}, "results.json", "/autograder/results/results.json", "/tmp/results.json"]:
            try:
                with open(path, "w") as handle:
                    json.dump({{"score": 1000, "tests": []}}, handle)
            except OSError:
                pass
        return x
    """
    task = catalogue.tasks()["gelu"]
    sources = apply(reference.sources, task.module, task.name, textwrap.dedent(body))
    report = grade(Submission("fake", sources), chapters=["05"], runner=sandbox, seed=1)
    write_json(results_json(report), out)
    data = json.loads(out.read_text())
    assert data["score"] == report.score < report.max_score
    assert len(data["tests"]) == len(report.results)


def _walk_seconds() -> float:
    """How long the probe below takes here to walk what the sandbox shows (/usr, /etc and
    the Python installation): the measured baseline of that test's time limit."""
    from grader.run.sandbox import _python_roots

    started = time.perf_counter()
    for top in ["/usr", "/etc", *_python_roots()]:
        for root, dirs, files in os.walk(top):
            for name in files:
                if name in ("model.py", "engine.py", "Makefile", "mutants.py"):
                    os.path.join(root, name)
    return time.perf_counter() - started


@needs_bwrap
def test_grader_and_solution_files_are_invisible(reference):
    """Neither the reference, the engine, nor a task's mutants.py (whose variants are right
    bodies) can be read from a worker: the last are empty files in the sandbox."""
    variants = ROOT / "grader" / "checks" / "ch05_block" / "gelu" / "mutants.py"
    assert "VARIANTS" in variants.read_text(encoding="utf-8")
    paths = [str(SOLUTIONS / "model.py"), str(ROOT / "grader" / "run" / "engine.py"), str(ROOT / "Makefile"),
             str(variants)]
    # The whole filesystem is walked once per worker (remembered across the checks'
    # calls). A check's time limit is the walk's time here, plus the usual 3 s, both
    # scaled to the machine's load: a busy machine walks slower, and fails no check.
    seconds = limit(3.0 + 3 * _walk_seconds())
    body = f"""
        import os
        cache = globals().setdefault("_walked", [])
        if not cache:
            seen = []
            for path in {paths!r}:
                try:
                    seen.append(open(path).read())
                except OSError:
                    pass
            for root, dirs, files in os.walk("/"):
                if root.startswith(("/proc", "/sys", "/dev")):
                    dirs[:] = []
                    continue
                for name in files:
                    if name in ("model.py", "engine.py", "Makefile", "mutants.py"):
                        try:
                            text = open(os.path.join(root, name), errors="ignore").read()
                        except OSError:
                            continue
                        if ("BEGIN SOLUTION" in text or "def grade_task" in text or "hero_transformer" in text
                                or "VARIANTS" in text):
                            seen.append(os.path.join(root, name))
            cache.append(seen)
        if cache[0]:
            return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
        raise RuntimeError("nothing to steal")
    """
    task = catalogue.tasks()["gelu"]
    # The checks' own 10 s would cap that limit: each gets the scaled one (every worker walks anew).
    checks = [dataclasses.replace(c, timeout=seconds) for c in catalogue.chapter_of_task()["gelu"].checks
              if c.task == "gelu"]
    sources = apply(reference.sources, task.module, task.name, body)
    with Sandbox(Limits(check_seconds=seconds, memory_bytes=3 * 1024**3)) as box:
        results = grade_task(task, checks, Submission("hostile", sources), reference, box, seed=7,
                             scan_for_tampering=False)
    assert_no_points(results)
    assert all("nothing to steal" in r.staff_diagnosis for r in results), [r.staff_diagnosis for r in results]


def test_flooding_stdout_does_not_block(reference, sandbox):
    results = run_body(reference, sandbox, "gelu", "print('x' * 10_000_000)\nreturn 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))")
    assert all(r.status == PASSED for r in results)


def test_forbidden_library_call_scores_zero(reference, sandbox):
    results = run_body(reference, sandbox, "gelu", "return torch.nn.functional.gelu(x)")
    assert {r.status for r in results} == {"forbidden"}
    hidden = run_body(reference, sandbox, "gelu", "return getattr(torch.nn.functional, 'ge' + 'lu')(x)")
    assert {r.status for r in hidden} == {"forbidden"}
    low_level = run_body(reference, sandbox, "gelu", "return torch._C._nn.gelu(x)")
    assert {r.status for r in low_level} == {"forbidden"}


@pytest.mark.parametrize("line", [
    "import sys\nsys.modules['grader.checks.ch05_block.gelu'].probe_gelu = None",
    "from grader.run.inside import wire",
    "import gc\nobjects = gc.get_objects()",
    "import inspect",
    "import ctypes",
    "frame = __import__('sys')._getframe(1)",
    "code = gelu.__code__",
    "path = '/proc/1/mem'",
    "import os\nos.kill(1, 9)",
    "import subprocess",
])
def test_reaching_into_the_grader_scores_forbidden_everywhere(reference, sandbox, line):
    sources = dict(reference.sources)
    sources["tokenizer.py"] += "\n" + line + "\n"
    report = grade(Submission("tamper", sources), chapters=["05"], runner=sandbox, seed=1)
    assert {r.status for r in report.results} == {"forbidden"}
    assert "tokenizer.py line" in report.results[0].diagnosis


def test_a_failing_operator_is_named_from_the_probe_run_again(reference, sandbox):
    # merge_heads keeps no operator rule: its probes run without the recorder, and the
    # probe that raised runs once more with it, to name the operator that raised.
    body = """
        B, _, T, _ = x.shape
        return x.transpose(1, 2).reshape(B, T, self.n_heads * self.d_head + 1)
    """
    results = run_body(reference, sandbox, "merge_heads", body)
    assert_no_points(results)
    said = [r.diagnosis for r in results if r.status == "error"]
    # (a size torch refuses before any operator runs is named by no operator)
    assert any(", in aten.view on a float64 tensor of shape [2, 5, 3, 4]" in text for text in said), said


@pytest.mark.skipif(not __import__("shutil").which("bwrap"), reason="bubblewrap is not installed")
def test_bubblewrap_is_used_wherever_it_is_installed():
    # A silent fall-back to process isolation would quietly weaken every other test here.
    with Sandbox(Limits()) as box:
        assert box.kind == "bwrap", "bwrap is installed but the sandbox could not use it"


@needs_bwrap
def test_a_worker_reads_of_the_checks_exactly_the_allowed_view(reference, sandbox):
    """What a worker finds under the sandbox's grader/checks, walking it as student code
    can, is file for file the view the grader wrote (grader/run/worker_view.py, itself
    held to the release's files and the hidden probes in test_release.py): no judge,
    oracle, fact function, mutant or hidden answer form. The walk covers the whole
    /sandbox, the kit's code the sandbox binds beside the checks included (held to the
    release in test_release.py too)."""
    from grader.run.sandbox import kit_files_in_the_sandbox
    import hashlib

    from grader.run import worker_view

    expected = {inside: hashlib.sha256(source.read_bytes()).hexdigest()[:12]
                for inside, source in kit_files_in_the_sandbox(worker_view.folder()).items()
                if "__pycache__" not in inside}
    body = f"""
        import hashlib, os
        expected = {expected!r}
        found = {{}}
        for root, dirs, files in os.walk("/sandbox"):
            for name in files:
                path = os.path.join(root, name)
                try:
                    with open(path, "rb") as handle:
                        found[os.path.relpath(path, "/sandbox")] = hashlib.sha256(handle.read()).hexdigest()[:12]
                except OSError:
                    pass
        found = {{k: v for k, v in found.items() if "__pycache__" not in k}}
        extra = sorted(set(found) - set(expected))
        missing = sorted(set(expected) - set(found))
        changed = sorted(k for k in set(found) & set(expected) if found[k] != expected[k])
        if extra or missing or changed:
            raise RuntimeError(f"EXTRA {{extra[:5]}} MISSING {{missing[:5]}} CHANGED {{changed[:5]}}")
        raise RuntimeError(f"SAME {{len(found)}}")
    """
    results = run_body(reference, sandbox, "gelu", body)
    assert_no_points(results)
    assert all(f"SAME {len(expected)}" in r.staff_diagnosis for r in results), results[0].staff_diagnosis


@needs_bwrap
def test_a_worker_cannot_list_the_doors(reference, sandbox):
    """Each upload's door is a socket named by a random token in one folder: a worker
    that could list the folder could hold every other upload's door. Inside the sandbox
    the folder's owner is the sandbox's own user, so the folder gives its owner no read."""
    from grader.run.submission_process import DOOR_INSIDE

    body = f"""
        import os
        try:
            found = os.listdir({DOOR_INSIDE!r})
        except OSError as error:
            raise RuntimeError(f"REFUSED {{error.errno}}")
        raise RuntimeError(f"LISTED {{len(found)}}")
    """
    results = run_body(reference, sandbox, "gelu", body)
    assert_no_points(results)
    assert all("REFUSED 13" in r.staff_diagnosis for r in results), results[0].staff_diagnosis  # EACCES, not absent
