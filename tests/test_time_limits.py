"""A check's time limit is the processor time its code used (grader.run.worker.TimeLimit).

A loop that spins is a timeout on any machine load; code that sleeps or blocks is a
timeout too, said as such, at the first wall-clock cap (the limit itself, as on a quiet
machine); only a process that could not get a processor, even after later, longer caps,
is the grader's failure ("busy"). The unit
tests drive TimeLimit with a clock the test sets; the sandbox tests grade a spinning and
a sleeping gelu beside a load the test makes (six busy processes, each in a session of
its own, as other programs on a laptop or other uploads' workers are). The last tests
grade code that never ends: a loop, a sleep, a loop that tried to raise its limits and
ignore every signal, and an import that hangs.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time

import pytest

from grader.run import cpu_clock
from grader.run.processes import Limits
from grader.run.sandbox import Sandbox
from grader.run.worker import Late, TimeLimit
from tests.hostile import assert_no_points, grade_one, hostile_sources, run, run_body
from tests.timing import limit


class SetClock:
    """A process clock whose readings the test sets: processor and waiting seconds."""

    def __init__(self):
        self.used, self.waiting = 0.0, 0.0

    def cpu(self):
        return self.used

    def waited(self):
        return self.waiting


class Quick(TimeLimit):
    LOOK_SECONDS = 0.01


def _silent_channel():
    left, right = socket.socketpair()
    return left, right


def _late(limit, advance=None) -> Late:
    """The Late that `limit` raises on a channel that never answers; `advance(limit)` is
    called at every look, to move the clock the test holds."""
    left, right = _silent_channel()
    original = limit._late_yet

    def look():
        if advance is not None:
            advance(limit)
        original()

    limit._late_yet = look
    with left, right, pytest.raises(Late) as raised:
        limit.receive(left)
    return raised.value


def test_a_process_that_uses_its_processor_budget_times_out_before_any_wall_cap():
    clock = SetClock()
    limit = Quick(60.0, clock)  # a wall cap of minutes: only the processor time can end it

    def spin(_):
        clock.used += 10.0

    late = _late(limit, spin)
    assert late.status == "timeout" and "60 s of processor time" in late.reason
    assert limit.used >= 60.0


def test_a_process_that_neither_computes_nor_waits_for_a_processor_blocks_and_times_out_at_the_cap():
    clock = SetClock()
    late = _late(Quick(0.02, clock))
    assert late.status == "timeout" and "waits for something that never comes" in late.reason


def test_a_starved_process_gets_a_second_cap_and_only_then_is_the_graders_failure():
    clock = SetClock()
    caps = []

    def starve(limit):
        clock.waiting += 1.0  # always runnable, never run
        if not caps or caps[-1] != limit.cap:
            caps.append(limit.cap)

    limit = Quick(0.02, clock)
    late = _late(limit, starve)
    assert late.status == "busy" and "too busy" in late.reason
    assert len(caps) == len(TimeLimit.CAPS) and caps == sorted(caps), "a starved process is given every later cap"


def test_a_starved_process_that_then_answers_is_no_failure():
    clock = SetClock()
    left, right = _silent_channel()
    limit = Quick(0.02, clock)
    original = limit._late_yet

    def starve_then_answer():
        clock.waiting += 1.0
        if limit.extended:  # the second cap: it finally got a processor and answered
            from grader.run.inside import wire

            wire.send(right, {"result": 1})
        original()

    limit._late_yet = starve_then_answer
    with left, right:
        assert limit.receive(left) == {"result": 1}


def test_a_starved_process_gets_no_cap_past_the_uploads_own_end():
    """Where a platform kills the grader at a wall-clock timeout, the upload's own end
    (Limits.submission_wall_seconds) stops every cap: a late check, never a killed run."""
    import time

    clock = SetClock()

    def starve(_):
        clock.waiting += 1.0

    limit = Quick(60.0, clock, end=time.monotonic() + 0.05)  # caps of minutes, an end in 50 ms
    assert limit.cap <= limit.end
    late = _late(limit, starve)
    assert late.status == "timeout" and "grading time for this upload ran out" in late.reason


def test_a_platforms_budget_bounds_the_wall_clock_of_a_grading(tmp_path):
    """The LMS entries (grader.lms.external.grade_upload) give the upload a wall-clock
    limit equal to its budget: a gelu that sleeps spends no processor time, yet its
    grading ends at the budget with every check reported, so the platform's timeout (the
    budget and a margin) never kills the run before its results are written."""
    from grader import KIT_ROOT
    from grader.lms.external import grade_upload
    from grader.run.worker_session import submission_deadline, wall_cap
    from grader.run.processes import Limits
    from grader.run.results import TIMEOUT

    import time

    now = time.monotonic()
    assert submission_deadline(Limits(submission_seconds=300)) - now >= wall_cap(300)  # grade-class: the caps
    package = tmp_path / "hero_transformer"
    package.mkdir()
    for source in (KIT_ROOT / "solutions" / "hero_transformer").glob("*.py"):
        text = source.read_text()
        if source.name == "model.py":
            text = text.replace("### BEGIN SOLUTION gelu\n", "### BEGIN SOLUTION gelu\n" + "    " + SLEEPS.replace(
                "\n", "\n    ").rstrip() + "\n", 1)
        (package / source.name).write_text(text)
    outcome = grade_upload(tmp_path, "sleeps", ["05"], 4242, 8.0)
    assert outcome.report is not None, outcome
    results = outcome.report.results
    gelu = [r for r in results if r.check.task == "gelu"]
    assert gelu and all(r.status == TIMEOUT for r in gelu), [(r.check.name, r.status, r.diagnosis) for r in gelu]
    assert any("ran out" in r.diagnosis and "grading time" in r.diagnosis for r in gelu), [r.diagnosis for r in gelu]
    assert all(r.status for r in results)


def test_without_a_clock_the_limit_is_wall_clock_seconds():
    late = _late(Quick(0.05, None))
    assert late.status == "timeout" and "no answer within 0.05 s" in late.reason


def test_a_process_clock_counts_the_processor_time_of_the_process_and_its_children():
    script = ("import subprocess, sys, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time\\nt=time.process_time()\\n"
              "while time.process_time()-t<0.5: pass\\nprint(1, flush=True)\\ntime.sleep(30)'],"
              " stdout=subprocess.PIPE)\n"
              "child.stdout.readline()\n"
              "print('ready', flush=True)\n"
              "time.sleep(30)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "ready"
        clock = cpu_clock.clock_of(parent.pid)
        if clock is None:
            pytest.skip("this platform's processor times cannot be read (no /proc, no psutil)")
        # The child spun 0.5 s by its own clock; /proc counts in ticks (10 ms here) that
        # are sampled, so a reading may fall a tick or two short of it, never 0.1 s short.
        assert clock.cpu() >= 0.4, clock.cpu()
    finally:
        with contextlib.suppress(Exception):
            for pid in reversed(cpu_clock.descendants(parent.pid)):
                import os
                import signal

                os.kill(pid, signal.SIGKILL)
        parent.wait()


# ----------------------------------------------------------------- in the sandbox, under load

SPINS = "while True:\n    pass\n"
SLEEPS = "import time\ntime.sleep(3600)\nreturn x\n"


@contextlib.contextmanager
def six_busy_sessions(seconds: float = 600.0):
    """Six processes that spin, each in a session of its own, ended when the block ends
    (and by themselves after `seconds`, whatever happens to the test)."""
    loop = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"
    spinners = [subprocess.Popen([sys.executable, "-c", loop], start_new_session=True) for _ in range(6)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def _grade_gelu(reference, body: str):
    from grader.checks import catalogue
    from grader.run.engine import grade_task
    from grader.run.worker_session import Grading
    from grader.run.processes import Limits
    from grader.run.sandbox import Sandbox
    from grader.run.submission import Submission
    from tests.hostile import hostile_sources

    sources = hostile_sources(reference, {"gelu": body})
    task = catalogue.tasks()["gelu"]
    checks = [c for c in catalogue.chapter_of_task()["gelu"].checks if c.task == "gelu"][:2]
    with Sandbox(Limits(check_seconds=1.0)) as box:
        return grade_task(task, checks,
                          Grading(Submission("gelu", sources), reference, box, seed=3, imported=box.package(sources)))


needs_bwrap = pytest.mark.skipif("not __import__('grader.run.sandbox', fromlist=['x']).bwrap_works()",
                                 reason="bubblewrap is not usable on this machine")


@needs_bwrap
@pytest.mark.parametrize("load", ["quiet", "six busy sessions"])
def test_a_gelu_that_spins_is_a_timeout_on_any_load(reference, load):
    from grader.run.results import TIMEOUT

    with six_busy_sessions() if load != "quiet" else contextlib.nullcontext():
        results = _grade_gelu(reference, SPINS)
    assert [r.status for r in results] == [TIMEOUT] * len(results), [(r.status, r.staff_diagnosis) for r in results]
    assert all(r.verdict and r.verdict["kind"] == "timeout" for r in results)
    assert "processor time" in results[0].staff_diagnosis, results[0].staff_diagnosis


@needs_bwrap
def test_a_gelu_that_sleeps_is_a_timeout_said_as_waiting(reference):
    from grader.run.results import TIMEOUT

    results = _grade_gelu(reference, SLEEPS)
    assert results[0].status == TIMEOUT, (results[0].status, results[0].staff_diagnosis)
    assert "waits for something that never comes" in results[0].staff_diagnosis, results[0].staff_diagnosis


@needs_bwrap
def test_a_class_with_a_spinning_upload_settles_in_one_run_beside_six_busy_sessions(tmp_path, monkeypatch):
    """grade-class, as a TA runs it on a busy laptop: one upload's gelu spins for ever.
    One run settles every upload: the spinning gelu's checks are timeouts with the loop's
    sentence, nothing is the grader's `error`, no record is left to grade again, and the
    right upload keeps every point. (Checks limited to 2 s of processor time, to keep the
    test short; the rule is the same at 10.)"""
    import functools
    import zipfile
    from pathlib import Path

    from rich.console import Console

    from grader.grade_class import gradebook
    from grader.grade_class.records import needs_grading, read_records
    from grader.run.processes import Limits
    from grader.run.results import ERROR, TIMEOUT

    solutions = Path(__file__).resolve().parent.parent / "solutions" / "hero_transformer"
    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    for name, spins in (("a_right", False), ("b_spins", True)):
        with zipfile.ZipFile(folder / f"{name}.zip", "w") as archive:
            for file in sorted(solutions.glob("*.py")):
                text = file.read_text()
                if spins and file.name == "model.py":
                    text = text.replace("### BEGIN SOLUTION gelu\n", "### BEGIN SOLUTION gelu\n    while True:\n"
                                                                     "        pass\n", 1)
                archive.writestr(f"hero_transformer/{file.name}", text)
    monkeypatch.setattr(gradebook, "Limits", functools.partial(Limits, check_seconds=2.0))
    with six_busy_sessions():
        gradebook.grade_class(folder, out, console=Console(quiet=True), chapters=["05"], seed=5, jobs=2)
    records = {r["upload"]["label"]: r for r in read_records(out).values()}
    assert not [label for label, r in records.items() if needs_grading(r)]
    checks = {label: {c["name"]: c for c in r["checks"]} for label, r in records.items()}
    assert not [(label, c["name"], c["diagnosis"]) for label, cs in checks.items() for c in cs.values()
                if c["status"] == ERROR]
    assert records["a_right.zip"]["score"] == records["a_right.zip"]["max_score"]
    gelu = [c for name, c in checks["b_spins.zip"].items() if ".gelu." in name]
    assert gelu and all(c["status"] == TIMEOUT for c in gelu), [(c["name"], c["status"]) for c in gelu]
    assert "processor time" in gelu[0]["diagnosis"], gelu[0]["diagnosis"]


# ------------------------------------------------- code that never ends, in a graded run
#
# A loop, a sleep, a loop that tried to raise its limits and ignore every signal: each
# is a timeout; an import that hangs costs one setup timeout per task.


def test_endless_loop_times_out(reference, sandbox):
    results = run_body(reference, sandbox, "gelu", "while True:\n    pass")
    assert_no_points(results)
    assert {r.status for r in results} == {"timeout"}


def test_sleeping_forever_times_out(reference, sandbox):
    results = run_body(reference, sandbox, "gelu", "import time\ntime.sleep(10**6)")
    assert {r.status for r in results} == {"timeout"}


def test_limits_cannot_be_raised_and_signals_cannot_be_dodged(reference, sandbox):
    body = """
        import resource, signal
        raised = []
        for name in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE"):
            limit = getattr(resource, name)
            try:
                resource.setrlimit(limit, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
                raised.append(name)
            except (ValueError, OSError):
                pass
        for sig in (signal.SIGXCPU, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM):
            signal.signal(sig, signal.SIG_IGN)
        if raised:
            return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
        while True:
            pass
    """
    results = run(reference, sandbox, "gelu", body, only={"exact_values"})
    assert_no_points(results)
    assert results[0].status == "timeout"


def test_an_import_that_hangs_costs_one_setup_timeout_per_task(reference):
    sources = hostile_sources(reference, append="import time as _t\n_t.sleep(10**6)\n")
    setup = limit(1.0)
    with Sandbox(Limits(check_seconds=limit(3.0), setup_seconds=setup)) as box:
        box.worker().close()  # the zygote is up: time only the grading
        started = time.monotonic()
        results = grade_one(reference, box, "block", sources,
                            only={"shape", "zero_branch_identity", "causal_invariance", "example_1"})
        elapsed = time.monotonic() - started
    assert_no_points(results)
    assert all(r.status in ("timeout", "error") for r in results)
    assert elapsed < 2 * setup, f"{len(results)} checks took {elapsed:.1f} s with a {setup:.1f} s setup limit"
