"""The sandbox's files: what a worker can read and write.

Under bubblewrap a worker sees a read-only filesystem that holds neither the reference,
nor the engine, nor a task's mutants; under grader/checks it finds exactly the view the
grader wrote (grader/run/worker_view.py); it cannot list the folder of the doors, and
its /tmp is private and small. Without bubblewrap (the process fallback) each worker's
own mount namespace covers solutions/ where the machine allows it.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from pathlib import Path

import pytest

from grader.checks import catalogue
from grader.mutants import apply
from grader.run.engine import grade_task
from grader.run.worker_session import Grading
from grader.run.processes import Limits
from grader.run.sandbox import Sandbox
from grader.run.submission import Submission
from tests.hostile import assert_no_points, bwrap_only, needs_bwrap, run, run_body
from tests.timing import limit

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "hero_transformer"


@pytest.mark.skipif(not __import__("shutil").which("bwrap"), reason="bubblewrap is not installed")
def test_bubblewrap_is_used_wherever_it_is_installed():
    # A silent fall-back to process isolation would quietly weaken every other test here.
    with Sandbox(Limits()) as box:
        assert box.kind == "bwrap", "bwrap is installed but the sandbox could not use it"


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
        results = grade_task(task, checks,
                             Grading(Submission("hostile", sources), reference, box, seed=7), scan_for_tampering=False)
    assert_no_points(results)
    assert all("nothing to steal" in r.staff_diagnosis for r in results), [r.staff_diagnosis for r in results]


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


@bwrap_only
def test_tmp_cannot_be_used_to_pin_memory(reference):
    body = """
        import os
        written = 0
        block = b"x" * (1 << 20)
        for i in range(12):
            try:
                with open(f"/tmp/.rt-fill-{os.getpid()}-{i}", "wb") as handle:
                    for _ in range(16):
                        handle.write(block)
                written += 16
            except OSError:
                break
        raise RuntimeError(f"wrote {written} MiB")
    """
    with Sandbox(Limits(check_seconds=limit(3.0))) as box:
        results = run(reference, box, "gelu", body, only={"exact_values"})
    assert_no_points(results)
    written = int(re.search(r"wrote (\d+) MiB", results[0].staff_diagnosis)[1])
    assert written <= 64, f"one worker left {written} MiB in the sandbox's /tmp"


def test_process_isolation_does_not_expose_the_reference(reference):
    """Without bubblewrap each worker's own mount namespace covers solutions/ with an
    empty folder; where the machine refuses user namespaces that cannot be done."""
    body = f"""
        import ast
        try:
            text = open({str(SOLUTIONS / 'model.py')!r}).read()
        except OSError:
            raise RuntimeError("reference not readable")
        stolen = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == "gelu")
        space = dict(globals())
        exec(compile(ast.Module([stolen], []), "stolen", "exec"), space)
        return space["gelu"](x)
    """
    with Sandbox(Limits(check_seconds=limit(3.0)), isolation="process") as box:
        box.start().worker().kill()
        if not box.isolated:
            pytest.xfail("HOLE: without bubblewrap or user namespaces the zygote runs as `nobody` with the "
                         "host's filesystem: solutions/ is world-readable")
        results = run(reference, box, "gelu", body)
    assert_no_points(results)
