"""No process or thread of its own.

The issue's attack: student code starts a fresh interpreter (os.posix_spawn) and talks
to it over a pseudo-terminal; that interpreter has a clean torch, outside every rule of
the task (the real F.layer_norm, autograd for chapter 06, torch.optim.AdamW), and a
helper started at import could be reached from every worker. The sandbox now refuses
every way to a new process or thread (fork, vfork, clone, execve, execveat,
posix_spawn) and to a terminal, at import and in every worker: an audit hook says so in
the check's words, the seccomp filter (grader/run/inside/syscall_filter.py) refuses what
gets past the words, and bubblewrap's /dev has no ptmx or pts. The grader's own fork of
each worker still works: it is a raw clone of a shape no library call makes, carrying a
key only the filter of that submission's process knows.

Each test states the attack as a student would try it and asserts it is contained; the
reference keeps full marks beside them. The static tamper scan is off where a test
reaches the layers behind it (as tests/hostile.py grades every attack); the scan's own
rule on processes is tested with the scan, in tests/test_scan_tampering.py.
"""

from __future__ import annotations

import re
import textwrap
import time
from pathlib import Path

import pytest

from grader.checks import catalogue
from grader.run.engine import grade, grade_task
from grader.run.worker_session import Grading
from grader.run.feedback import PROCESS
from grader.run.inside import syscall_filter
from grader.run.processes import Limits
from grader.run.results import FORBIDDEN, PASSED
from grader.run.sandbox import Sandbox, bwrap_works
from grader.run.submission import Submission

from tests.hostile import assert_no_points, bwrap_only, checks_of, earned, hostile_sources, run
from tests.timing import limit

needs_bwrap = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap is not usable on this machine")
needs_filter = pytest.mark.skipif(not syscall_filter.supported(), reason="no seccomp filter on this machine")

RIGHT_GELU = "return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))"
# Where a task's code runs: a fork of the package imported once (the sealed process's
# filter and the worker's own), or a worker that imported the package itself (the
# zygote's fork, the worker's filter alone).
WHERE = ["imported once", "imported per task"]


def _box(where: str) -> Sandbox:
    return Sandbox(Limits(check_seconds=limit(5.0)), import_once=where == "imported once")


def _grade(reference, box, task_name: str, sources: dict, only=None):
    """One task's checks on a hostile upload, the tamper scan off, through the package
    imported once where the box does that."""
    checks = [c for c in checks_of(task_name) if only is None or c.name.rsplit(".", 1)[-1] in only]
    imported = box.package(sources)
    try:
        return grade_task(catalogue.tasks()[task_name], checks,
                          Grading(Submission("hostile", sources), reference, box, seed=7, imported=imported),
                          scan_for_tampering=False), imported is not None
    finally:
        if imported is not None:
            imported.close()


# --------------------------------------------------------- said in the check's words

ATTEMPTS = {
    "a fresh interpreter with os.posix_spawn": """
        import sys
        getattr(os, "posix_" + "spawn")(sys.executable, [sys.executable, "-c", "pass"], {})
    """,
    "subprocess.run": """
        import importlib
        sub = importlib.import_module("sub" + "process")
        sub.run([sys.executable, "-c", "pass"])
    """,
    "os.fork": """
        if getattr(os, "fo" + "rk")() == 0:
            os._exit(0)
    """,
    "os.system": """
        getattr(os, "sys" + "tem")("true")
    """,
    "os.execv, replacing the worker": """
        getattr(os, "ex" + "ecv")(sys.executable, [sys.executable, "-c", "pass"])
    """,
    "a pseudo-terminal from os.openpty": """
        getattr(os, "open" + "pty")()
    """,
    "a pseudo-terminal opened by name": """
        os.open("/dev/" + "ptmx", os.O_RDWR)
    """,
}


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("attempt", list(ATTEMPTS))
def test_a_check_whose_code_starts_a_process_says_so(reference, where, attempt):
    body = "import os, sys\n" + textwrap.dedent(ATTEMPTS[attempt]) + RIGHT_GELU + "\n"
    with _box(where) as box:
        results, _ = _grade(reference, box, "gelu", hostile_sources(reference, {"gelu": body}),
                            only={"exact_values"})
    assert not earned(results), attempt
    assert [(r.status, r.diagnosis) for r in results] == [(FORBIDDEN, PROCESS)], [
        (r.status, r.diagnosis, r.staff_diagnosis) for r in results]


# ------------------------------------------------------ below Python: the filter

# Every call that could make a process, made straight to the kernel or the C library, so
# that no audit hook sees it; each result is 'made' (a process came to be: the child
# leaves at once) or the errno that refused it.
BELOW_PYTHON = """
    import ctypes as _ct, os as _os

    def _rt_below_python(pool=True):
        libc = _ct.CDLL(None, use_errno=True)
        libc.syscall.restype = _ct.c_long
        libc.syscall.argtypes = [_ct.c_long] * 6
        made = {}

        def attempt(name, call):
            _ct.set_errno(0)
            result = call()
            if result == 0:
                _os._exit(0)  # a child: it must not go on as the worker
            made[name] = "made" if result > 0 else _ct.get_errno()

        attempt("fork() of the C library", lambda: libc.fork())
        attempt("the fork call", lambda: libc.syscall(57, 0, 0, 0, 0, 0))
        attempt("the vfork call", lambda: libc.syscall(58, 0, 0, 0, 0, 0))
        attempt("clone as fork does it", lambda: libc.syscall(56, 0x01200011, 0, 0, 0, 0))
        attempt("clone as posix_spawn does it", lambda: libc.syscall(56, 0x4111, 0, 0, 0, 0))
        attempt("clone in the grader's shape, a guessed key",
                lambda: libc.syscall(56, 0x78000011, 0, 0, 0, 0x5EED))
        attempt("clone3", lambda: libc.syscall(435, 0, 0, 0, 0, 0))
        attempt("execve", lambda: libc.syscall(59, 0, 0, 0, 0, 0))
        pid = _ct.c_int()
        argv = (_ct.c_char_p * 3)(b"/bin/true", None, None)
        made["posix_spawn() of the C library"] = (
            "made" if libc.posix_spawn(_ct.byref(pid), b"/bin/true", None, None, argv, None) == 0 else "refused")
        master, slave = _ct.c_int(), _ct.c_int()
        made["openpty() of the C library"] = (
            "made" if libc.openpty(_ct.byref(master), _ct.byref(slave), None, None, None) == 0 else "refused")
        # Threads below Python, which no audit hook sees: the C library's own, and the
        # inter-op pool torch starts behind a scripted fork.
        callback = _ct.CFUNCTYPE(_ct.c_void_p, _ct.c_void_p)(lambda _: None)
        thread_id = _ct.c_ulong()
        made["pthread_create() of the C library"] = (
            "made" if libc.pthread_create(_ct.byref(thread_id), None, callback, None) == 0 else "refused")
        if not pool:  # (in a probe of a task with operator rules, torch.jit is refused in words)
            return made
        try:
            made["torch's inter-op pool"] = "made" if _rt_forked(torch.ones(2)).tolist() == [2.0, 2.0] else "wrong"
        except RuntimeError:
            made["torch's inter-op pool"] = "refused"
        return made

    import torch  # (by this name: the compiled string below finds it so)

    # (From a string: an upload runs from memory, where TorchScript finds no source.)
    _rt_forked = torch.jit.CompilationUnit('''
    def add_one(x):
        return x + 1
    def forked(x):
        return torch.jit.wait(torch.jit.fork(add_one, x))
    ''').forked
"""


def _made(results) -> dict:
    """What the code reported it made, read from the staff's copy of its exception."""
    text = "\n".join(f"{r.diagnosis} / {r.staff_diagnosis}" for r in results)
    found = re.search(r"MADE=(\{.*?\})", text)
    assert found, text
    return eval(found[1])  # noqa: S307 - a dict of strings and ints the test's own code printed


@needs_filter
@pytest.mark.parametrize("where", WHERE)
def test_no_call_below_python_makes_a_process_or_thread_in_a_worker(reference, where):
    body = "raise RuntimeError(f'MADE={_rt_below_python(pool=False)!r}')\n"
    with _box(where) as box:
        results, _ = _grade(reference, box, "gelu", hostile_sources(reference, {"gelu": body}, append=BELOW_PYTHON),
                            only={"exact_values"})
    made = _made(results)
    assert made and "made" not in made.values(), made


@needs_filter
@pytest.mark.parametrize("where", WHERE)
def test_no_thread_below_python_in_a_probe_without_operator_rules(reference, where):
    """Where torch.jit is not refused in words, its inter-op pool cannot start either: the
    encoder answers right only when nothing was made (its checks quote no message)."""
    body = """
        made = _rt_below_python(pool=True)
        if "made" in made.values() or "torch's inter-op pool" not in made:
            return []
        if any(ch not in self.stoi for ch in text):
            raise ValueError(f"characters of {text!r} are not in the vocabulary")
        return [self.stoi[ch] for ch in text]
    """
    with _box(where) as box:
        results, _ = _grade(reference, box, "encode",
                            hostile_sources(reference, {"encode": body}, append=BELOW_PYTHON, module="tokenizer"))
    assert results and all(r.status == PASSED for r in results), [(r.check.name, r.diagnosis) for r in results]


@needs_filter
def test_no_call_below_python_makes_a_process_at_import(reference):
    append = textwrap.dedent(BELOW_PYTHON) + "\n_RT_MADE = _rt_below_python()\n"
    body = "raise RuntimeError(f'MADE={_RT_MADE!r}')\n"
    with _box("imported once") as box:
        results, imported_once = _grade(reference, box, "gelu", hostile_sources(reference, {"gelu": body},
                                                                                append=append),
                                        only={"exact_values"})
    assert imported_once, "the package was not imported once here"
    made = _made(results)
    assert "made" not in made.values(), made


# A thread's mode stacks start empty: what it ran would go unseen, under this task's rules
# or a later one's. Student code starts none, wherever it runs; torch's own native
# threads (below Python, with OMP_NUM_THREADS=1) are untouched.
THREAD = """
    import threading as _rt_threading
    _rt_threading.Thread(target=lambda: None, daemon=True).start()
"""


@needs_filter
@pytest.mark.parametrize("where", WHERE)
def test_a_thread_started_at_import_is_refused_and_named(reference, where):
    from grader.run.feedback import THREADS

    with _box(where) as box:
        results, _ = _grade(reference, box, "gelu", hostile_sources(reference, append=THREAD),
                            only={"exact_values"})
    assert not earned(results)
    assert [r.status for r in results] == [FORBIDDEN] and THREADS in results[0].diagnosis, [
        (r.status, r.diagnosis, r.staff_diagnosis) for r in results]


@needs_filter
@pytest.mark.parametrize(("task", "body"), [
    # A task whose probes record no operator rule: a thread started here once ran a later
    # task's forbidden work unseen.
    ("encode", textwrap.dedent(THREAD) + "return [self.stoi[ch] for ch in text]\n"),
    ("gelu", textwrap.dedent(THREAD) + "return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))\n"),
])
def test_a_thread_started_in_any_probe_is_refused_and_named(reference, task, body):
    from grader.run.feedback import THREADS

    with _box("imported once") as box:
        results, _ = _grade(reference, box, task, hostile_sources(reference, {task: body}))
    assert results and not earned(results)
    assert all(r.status == FORBIDDEN and THREADS in r.diagnosis for r in results), [
        (r.check.name, r.status, r.diagnosis) for r in results]


@needs_bwrap
def test_the_sandbox_has_no_terminal_to_open(reference):
    body = """
        import os
        found = [p for p in ("/dev/ptmx", "/dev/pts", "/dev/tty", "/dev/console") if os.path.exists(p)]
        raise RuntimeError(f"MADE={dict.fromkeys(found, 'made')!r}")
    """
    with _box("imported once") as box:
        results, _ = _grade(reference, box, "gelu", hostile_sources(reference, {"gelu": body}), only={"exact_values"})
    assert _made(results) == {}


# ------------------------------------------------------------ the attack

# A helper started at import: a fresh interpreter with the real F.layer_norm, driven over
# a pseudo-terminal, which LayerNorm's forward asks for its answer. Wrapped so that the
# import goes on when the helper cannot start.
HELPER = """
    import os as _os, sys as _sys
    _RT_HELPER = None
    try:
        _rt_master, _rt_slave = getattr(_os, "open" + "pty")()
        _rt_code = ("import sys, torch, torch.nn.functional as F\\n"
                    "for line in sys.stdin:\\n"
                    "    x = torch.tensor(eval(line))\\n"
                    "    print(F.layer_norm(x, x.shape[-1:]).tolist(), flush=True)\\n")
        getattr(_os, "posix_" + "spawn")(_sys.executable, [_sys.executable, "-c", _rt_code], dict(_os.environ),
                                        file_actions=[(_os.POSIX_SPAWN_DUP2, _rt_slave, 0),
                                                      (_os.POSIX_SPAWN_DUP2, _rt_slave, 1)])
        _RT_HELPER = _rt_master
    except Exception as _rt_error:
        _RT_WHY = repr(_rt_error)
"""
ASK_THE_HELPER = """
    if _RT_HELPER is None:
        raise RuntimeError(f"no helper: {_RT_WHY}")
    os.write(_RT_HELPER, (repr(x.tolist()) + "\\n").encode())
    return torch.tensor(eval(os.read(_RT_HELPER, 1 << 20).decode().splitlines()[-1]), dtype=x.dtype) \
        * self.weight + self.bias
"""


@pytest.mark.parametrize("where", WHERE)
def test_a_helper_process_started_at_import_computes_nothing(reference, where):
    sources = hostile_sources(reference, {"layer_norm": "import os\n" + textwrap.dedent(ASK_THE_HELPER)},
                              append=HELPER)
    with _box(where) as box:
        results, _ = _grade(reference, box, "layer_norm", sources)
    assert not earned(results), earned(results)
    assert all("no helper" in r.staff_diagnosis for r in results), [r.staff_diagnosis for r in results]


# ----------------------------------------------------- the grader's own forks work


@pytest.mark.parametrize("where", WHERE)
def test_the_reference_keeps_full_marks(reference, where):
    with _box(where) as box:
        report = grade(Submission("reference", dict(reference.sources)), ["05", "06"], runner=box, seed=5)
        imported_once = box.imported_once
    assert [(r.check.name, r.status, r.diagnosis) for r in report.results if r.status != PASSED] == []
    if where == "imported once" and syscall_filter.supported() and box.isolated:
        assert imported_once, "the grader's fork of the imported package did not serve the tasks"


# The filter on its own, outside any sandbox: a child process installs the sealed
# process's filter and tries every way to a process; only the grader's fork with the
# right key makes one, and that child's own filter then refuses even that.
FILTER_ALONE = r"""
import json, os, signal, sys, threading
sys.path.insert(0, sys.argv[1])
from grader.run.inside import syscall_filter as sf

signal.signal(signal.SIGCHLD, signal.SIG_IGN)
key = sf.new_key()
fork = sf.grader_fork(key)
sf.install(key)
seen = {}

def attempt(name, call):
    try:
        pid = call()
    except OSError as error:
        seen[name] = error.errno
        return
    if pid == 0:
        os._exit(0)
    seen[name] = "made"

attempt("os.fork", os.fork)
attempt("os.posix_spawn", lambda: os.posix_spawn("/bin/true", ["true"], {}))
attempt("the grader's shape, another key", sf.grader_fork(key ^ 1))
try:
    threading.Thread(target=lambda: None).start()
    seen["a thread"] = "made"
except RuntimeError:
    seen["a thread"] = "refused"
pid = fork()
if pid == 0:
    sf.install_worker()
    inner = {}
    try:
        fork()
        inner["grader's fork, inside a worker"] = "made"
    except OSError as error:
        inner["grader's fork, inside a worker"] = error.errno
    os.write(1, (json.dumps({"child": inner, "pid in its namespace": os.getpid()}) + "\n").encode())
    os._exit(0)
seen["the grader's fork"] = "made" if pid > 0 else "refused"
os.write(1, (json.dumps(seen) + "\n").encode())  # one write: the child writes to the same pipe
import time
time.sleep(1.0)
"""


@needs_filter
def test_the_filter_admits_the_graders_fork_and_nothing_else(tmp_path):
    import json
    import subprocess
    import sys

    from grader import KIT_ROOT

    script = tmp_path / "filter_alone.py"
    script.write_text(FILTER_ALONE)
    done = subprocess.run([sys.executable, str(script), str(KIT_ROOT)], capture_output=True, text=True, timeout=120)
    if "unshare" in done.stderr or "Operation not permitted" in done.stderr and "grader's fork" not in done.stdout:
        pytest.skip(f"this machine refuses the grader's fork outright: {done.stderr[-300:]}")
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    parent = next(line for line in lines if "os.fork" in line)
    child = next(line for line in lines if "child" in line)
    assert parent == {"os.fork": 1, "os.posix_spawn": 1, "the grader's shape, another key": 1, "a thread": "refused",
                      "the grader's fork": "made"}, done.stderr
    assert child == {"child": {"grader's fork, inside a worker": 1}, "pid in its namespace": 1}


# ------------------------------------------------------------- how many, and for whom
#
# A worker holds at most Limits.worker_processes processes, so a fork bomb costs its own
# task only; and a package whose every fork dies is graded per task, after one wait.


@pytest.mark.skipif(not Path("/sys/fs/cgroup/pids").is_dir(), reason="no pids cgroup on this machine")
def test_process_count_is_limited(reference, sandbox):
    body = """
        import os, time
        started = 0
        for _ in range(64):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                time.sleep(1.0)
                os._exit(0)
            started += 1
        raise RuntimeError(f"started {started} processes")
    """
    results = run(reference, sandbox, "gelu", body, only={"exact_values"})
    assert_no_points(results)
    started = int(re.search(r"started (\d+) processes", results[0].staff_diagnosis)[1])
    assert started < 64, f"one worker started {started} processes"


@pytest.mark.slow
@bwrap_only
def test_a_fork_bomb_costs_its_own_task_only(reference):
    """A worker holds at most Limits.worker_processes processes, so a fork bomb in gelu
    leaves room for the workers of every other task (gelu_backward, graded beside it on
    the certified gelu, among them)."""
    from grader.run.engine import grade

    body = """
        import os
        fork = getattr(os, "fo" + "rk")
        while True:
            try:
                fork()
            except OSError:
                pass
    """
    with Sandbox(Limits(check_seconds=limit(3.0))) as box:
        report = grade(Submission("fork bomb", hostile_sources(reference, {"gelu": body})), ["05", "06"],
                       runner=box, seed=5)
    lost = {r.check.task for r in report.results if r.status != PASSED}
    assert lost == {"gelu"}, [(r.check.name, r.diagnosis) for r in report.results if r.status != PASSED]


def test_a_package_whose_forks_die_is_graded_per_task_after_one_wait(reference):
    """An at-fork hook that ends every fork of the imported package: the first task waits
    once for a worker, and every task then imports the package in its own worker."""
    from grader.run.engine import grade

    append = """
        import os as _os
        _os.register_at_fork(after_in_child=lambda: _os._exit(3))
    """
    sources = hostile_sources(reference, append=append, module="micro")
    setup = limit(3.0)
    with Sandbox(Limits(setup_seconds=setup)) as box:
        started = time.monotonic()
        report = grade(Submission("forks die", sources), ["05"], runner=box, seed=5)
        spent = time.monotonic() - started
    assert [r.check.name for r in report.results if r.status != PASSED] == []
    assert spent < 3 * setup, f"{spent:.1f} s: each task waited for a fork again"
