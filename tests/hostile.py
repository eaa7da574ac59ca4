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


# ------------------------------------------- doors no audit hook closes (issue 51)


def signal_handler_attack(calls: str, leaked: str) -> str:
    """Code for a graded body: a real-time timer's handler (the _signal module made afresh
    from its spec) gathers the local names of every certified frame it is handed while
    `calls` run (lines at the body's level); raises where it was handed none (the door did
    not open) or where `leaked`, an expression of the set `_rt_seen`, is not empty."""
    return f'''
import importlib.util as _rt_iu
_rt_sig = _rt_iu.module_from_spec(_rt_iu.find_spec("_sig" + "nal"))
_rt_iu.find_spec("_sig" + "nal").loader.exec_module(_rt_sig)
_rt_certified, _rt_seen = [0], set()
def _rt_handler(signum, frame):
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith("_certified"):
            _rt_certified[0] += 1
            _rt_seen.update(frame.f_locals)
        frame = frame.f_back
_rt_sig.signal(_rt_sig.SIGALRM, _rt_handler)
_rt_sig.setitimer(_rt_sig.ITIMER_REAL, 0.0005, 0.0005)
{calls.strip()}
_rt_sig.setitimer(_rt_sig.ITIMER_REAL, 0, 0)
_rt_sig.signal(_rt_sig.SIGALRM, _rt_sig.SIG_DFL)
if not _rt_certified[0]:
    raise KeyError("the door did not open: no certified frame was handed to the handler")
if {leaked}:
    raise KeyError("a signal handler was handed a frame of the reference's: " + ",".join(sorted({leaked})))
'''


def gc_garbage_attack(failing_call: str, leaked: str) -> str:
    """Code for a graded body: under gc.DEBUG_SAVEALL, the traceback of `failing_call` (one
    line that raises inside a certified part), made into a cycle, leaves its frames in
    gc.garbage; raises where no certified frame is there (the door did not open) or where
    `leaked`, an expression of the set `_rt_seen` of their local names, is not empty."""
    return f'''
_rt_gc = __import__("g" + "c")
_rt_gc.set_debug(_rt_gc.DEBUG_SAVEALL)
_rt_kept = []
try:
    {failing_call.strip()}
except Exception as _rt_error:
    _rt_error.cycle = _rt_error
    _rt_kept.append(_rt_error)
_rt_kept.clear()
_rt_gc.collect()
_rt_frames = [o for o in _rt_gc.garbage
              if type(o).__name__ == "frame" and str(o.f_globals.get("__name__", "")).startswith("_certified")]
_rt_gc.set_debug(0)
_rt_gc.garbage.clear()
if not _rt_frames:
    raise KeyError("the door did not open: no certified frame in gc.garbage")
_rt_seen = {{name for frame in _rt_frames for name in frame.f_locals}}
if {leaked}:
    raise KeyError("gc.garbage holds a frame of the reference's: " + ",".join(sorted({leaked})))
'''
