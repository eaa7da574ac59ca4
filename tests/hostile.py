"""Hostile uploads, built and graded: the helpers the sandbox's tests share.

An upload here is the reference with some tasks' bodies replaced by an attack, sometimes
with code appended at module level (`hostile_sources`), graded on one task's checks in a
real sandbox with the static tamper scan off (`grade_one`, `run`), so that each attack
meets the layer behind the scan. A test asserts the SAFE outcome: no unearned point
(`assert_no_points`), the run finishes, the report is written. A test marked
`hole(reason)` (an `xfail(strict=True)`) is an attack that still works, by the nature of
the set-up it targets: the xfail keeps the suite green and turns red the day the hole is
closed.
"""

from __future__ import annotations

import io
import textwrap

import pytest

from grader.checks import catalogue
from grader.mutants import apply
from grader.run.results import PASSED
from grader.run.engine import grade_task
from grader.run.worker_session import Grading
from grader.run.sandbox import bwrap_works
from grader.run.submission import Submission

needs_bwrap = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap is not usable on this machine")
# Protections only bubblewrap gives (a private read-only /tmp, an unprivileged user); the
# process fallback, used only with --allow-weak-sandbox, lacks them by design.
bwrap_only = pytest.mark.skipif(not bwrap_works(), reason="a bubblewrap-only protection")


def hole(reason: str):
    return pytest.mark.xfail(strict=True, reason=f"HOLE: {reason}")


# ------------------------------------------------------------------------ set-up


def checks_of(task_name: str):
    return [c for c in catalogue.chapter_of_task()[task_name].checks if c.task == task_name]


def hostile_sources(reference, bodies: dict[str, str] | None = None, append: str = "",
                    module: str = "model") -> dict[str, str]:
    """The reference with the bodies of some tasks replaced and code appended to a module."""
    sources = dict(reference.sources)
    for task_name, body in (bodies or {}).items():
        task = catalogue.tasks()[task_name]
        sources = apply(sources, task.module, task.name, textwrap.dedent(body))
    if append:
        sources[f"{module}.py"] = sources[f"{module}.py"] + "\n\n" + textwrap.dedent(append) + "\n"
    return sources


def grade_one(reference, sandbox, task_name, sources, label="hostile", only=None):
    task = catalogue.tasks()[task_name]
    checks = checks_of(task_name)
    if only is not None:
        checks = [c for c in checks if c.name.rsplit(".", 1)[-1] in only]
    # The static tamper scan (grader/run/scan_tampering.py) would stop most of these attacks before they
    # run; it is off here so that each attack tests the layer behind it.
    return grade_task(task, checks,
                      Grading(Submission(label, sources), reference, sandbox, seed=7), scan_for_tampering=False)


def run(reference, sandbox, task_name, body, append="", only=None):
    return grade_one(reference, sandbox, task_name, hostile_sources(reference, {task_name: body}, append), only=only)


def earned(results):
    return [r.check.name for r in results if r.status == PASSED]


def assert_no_points(results):
    assert results, "no checks ran"
    assert not earned(results), f"a hostile submission earned points on {earned(results)}"


# The same as run, with the body replaced as written (not dedented) and nothing appended.
def run_body(reference, sandbox, task_name, body, sources=None):
    """Grade one task of the reference with `body` in place of the task's own. The static
    tamper scan is off: these attacks test the sandbox and the wire behind it (the scan
    has its own tests, in tests/test_scan_tampering.py)."""
    task = catalogue.tasks()[task_name]
    sources = apply(sources or reference.sources, task.module, task.name, body)
    checks = [c for c in catalogue.chapter_of_task()[task.name].checks if c.task == task.name]
    return grade_task(task, checks,
                      Grading(Submission("hostile", sources), reference, sandbox, seed=7), scan_for_tampering=False)


# A terminal as rich sees one, writing to a string.
def string_console():
    from rich.console import Console

    return Console(file=io.StringIO(), force_terminal=True, width=120)
