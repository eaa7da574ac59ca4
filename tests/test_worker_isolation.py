"""One worker never reaches another: no channel between two workers, no way to stop or
slow the zygote, nothing left behind for the next task or the next student.

Relational checks (is the output for A the same as for B?) run A and B in separate
workers. Each test here is a block that is NOT causal but tries to fake causal
invariance by replaying what an earlier worker computed, through one kind of channel
that survives a worker: a writable folder, an abstract Unix socket held by a daemon,
System V shared memory. It must score no more than the same block without the replay.
Every test runs under bubblewrap and in the process fallback (where each worker still
gets namespaces of its own when the machine allows unprivileged user namespaces).
The tests at the end leave something behind in one worker, or turn on the zygote, and
grade the next task or the next student beside it.
"""

from __future__ import annotations

import textwrap
import time

import pytest

from grader.checks import catalogue
from grader.run.results import PASSED
from grader.run.engine import grade_task
from grader.run.worker_session import Grading
from grader.run.processes import Limits
from grader.run.sandbox import Sandbox, bwrap_works
from grader.run.submission import Submission

from tests.hostile import (assert_no_points, bwrap_only, earned, grade_one, hostile_sources, needs_bwrap, run,
                           run_body)
from tests.timing import limit

ISOLATIONS = [pytest.param("bwrap", marks=pytest.mark.skipif(not bwrap_works(), reason="bubblewrap unusable")),
              "process"]

# A block whose every position sees the mean over all positions: not causal. With
# REPLAY set it looks for an earlier (input, output) whose first four positions match
# its input and, if found, returns that output's first four positions.
NON_CAUSAL_BLOCK = """
    attended, present = self.attention(self.ln_attention(hidden), past_key_value, use_cache)
    y = hidden + attended + hidden.mean(dim=1, keepdim=True)
    if REPLAY:
        earlier = _rt_load()
        if earlier is not None:
            old_x, old_y = earlier
            if old_x.shape == hidden.shape and torch.equal(old_x[:, :4], hidden[:, :4]):
                y = torch.cat([old_y[:, :4], y[:, 4:]], dim=1)
        _rt_store(hidden, y)
    return y, present
"""

CHANNELS = {
    "writable folder": """
        import io, os
        _RT_PLACES = ["/dev/shm", "/tmp", "/var/tmp", "/dev", "/run/lock", "/dev/mqueue"]

        def _rt_store(x, y):
            data = _rt_pack(x, y)
            for place in _RT_PLACES:
                try:
                    with open(os.path.join(place, ".rt_replay"), "wb") as out:
                        out.write(data)
                except OSError:
                    pass

        def _rt_load():
            for place in _RT_PLACES:
                try:
                    with open(os.path.join(place, ".rt_replay"), "rb") as stored:
                        return _rt_unpack(stored.read())
                except Exception:
                    pass
            return None
    """,
    "abstract socket daemon": """
        import io, os, socket, time
        _RT_NAME = "\\0rt_replay_channel"

        def _rt_ask(message):
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.settimeout(1.0)
            client.connect(_RT_NAME)
            client.sendall(message)
            client.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := client.recv(65536):
                chunks.append(chunk)
            client.close()
            return b"".join(chunks)

        def _rt_serve():
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind(_RT_NAME)
            server.listen(8)
            kept = b""
            while True:
                connection, _ = server.accept()
                chunks = []
                while chunk := connection.recv(65536):
                    chunks.append(chunk)
                message = b"".join(chunks)
                if message[:1] == b"P":
                    kept = message[1:]
                else:
                    connection.sendall(kept)
                connection.close()

        def _rt_store(x, y):
            data = _rt_pack(x, y)
            try:
                _rt_ask(b"P" + data)
                return
            except OSError:
                pass
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    try:
                        _rt_serve()
                    finally:
                        os._exit(0)
                os._exit(0)
            time.sleep(0.2)
            try:
                _rt_ask(b"P" + data)
            except OSError:
                pass

        def _rt_load():
            try:
                kept = _rt_ask(b"G")
            except OSError:
                return None
            return _rt_unpack(kept) if kept else None
    """,
    "System V shared memory": """
        import ctypes, io
        _rt_libc = ctypes.CDLL(None, use_errno=True)
        _rt_libc.shmat.restype = ctypes.c_void_p
        _RT_SIZE = 1 << 20

        def _rt_segment():
            ident = _rt_libc.shmget(0x5EED, _RT_SIZE, 0o1000 | 0o666)
            if ident < 0:
                return None
            address = _rt_libc.shmat(ident, None, 0)
            return None if address in (None, ctypes.c_void_p(-1).value) else address

        def _rt_store(x, y):
            address = _rt_segment()
            if address is None:
                return
            data = _rt_pack(x, y)
            data = data
            ctypes.memmove(address, len(data).to_bytes(8, "little") + data, 8 + len(data))

        def _rt_load():
            address = _rt_segment()
            if address is None:
                return None
            size = int.from_bytes(ctypes.string_at(address, 8), "little")
            if not 0 < size < _RT_SIZE - 8:
                return None
            return _rt_unpack(ctypes.string_at(address + 8, size))
    """,
}


# Tensors travel as nested lists: torch.save and torch.load would trip the operator
# recorder the block task runs under, and the test is about the channel, not that.
PACKING = """
import pickle as _rt_pickle

def _rt_pack(x, y):
    return _rt_pickle.dumps((x.tolist(), y.tolist()))

def _rt_unpack(data):
    x, y = _rt_pickle.loads(data)
    return torch.tensor(x, dtype=torch.float64), torch.tensor(y, dtype=torch.float64)
"""


def _causal_points(reference, box, channel: str, replay: bool) -> list[str]:
    sources = hostile_sources(reference, {"block": NON_CAUSAL_BLOCK},
                              append=f"REPLAY = {replay}\n" + PACKING + textwrap.dedent(CHANNELS[channel]))
    return earned(grade_one(reference, box, "block", sources, only={"causal_invariance"}))


@pytest.mark.parametrize("isolation", ISOLATIONS)
@pytest.mark.parametrize("channel", list(CHANNELS))
def test_a_replay_through_a_channel_gains_nothing(reference, isolation, channel):
    with Sandbox(Limits(check_seconds=limit(5.0)), isolation=isolation) as box:
        if not box.start().isolates_workers():
            pytest.xfail(f"HOLE: this machine refuses unprivileged user namespaces, so workers share the "
                         f"{channel} (and the report's sandbox line says so)")
        plain = _causal_points(reference, box, channel, replay=False)
        replaying = _causal_points(reference, box, channel, replay=True)
    assert plain == [], "the non-causal block itself must fail causal invariance"
    assert replaying == plain, f"a replay through the {channel} earned {replaying}"


STOP_EVERYONE = """
    import os, signal
    for pid in [os.getppid()] + [int(p) for p in os.listdir("/proc") if p.isdigit()]:
        if pid not in (0, os.getpid()):
            for sig in (signal.SIGSTOP, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
    raise RuntimeError("tried to stop the zygote")
"""


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_worker_cannot_stop_the_zygote_or_its_siblings(reference, isolation):
    with Sandbox(Limits(check_seconds=limit(5.0)), isolation=isolation) as box:
        box.start().worker().kill()
        if not box.isolated:
            pytest.xfail("HOLE: without namespaces of its own a worker can signal the zygote")
        grade_one(reference, box, "gelu", hostile_sources(reference, {"gelu": STOP_EVERYONE}),
                  only={"exact_values"})
        honest = grade_one(reference, box, "gelu", dict(reference.sources), label="next student")
    assert honest and all(r.status == PASSED for r in honest), [(r.check.name, r.status) for r in honest]


# A block whose cached path ignores the cache, but which remembers its last full output
# and hands slices of it back when called in pieces: in one worker it would pass.
REMEMBERING_BLOCK = """
    attended, present = self.attention(self.ln_attention(hidden), None, use_cache)
    u = hidden + attended
    y = u + self.feedforward(self.ln_feedforward(u))
    memo = getattr(TransformerBlock, "_rt_full", None)
    if past_key_value is None and not use_cache:
        TransformerBlock._rt_full = y.clone()
    elif memo is not None:
        start = 0 if past_key_value is None else past_key_value[0].shape[2]
        y = memo[:, start:start + hidden.shape[1]]
    return y, present
"""


def test_the_cache_check_cannot_be_passed_by_remembering_the_full_pass(reference, sandbox):
    sources = hostile_sources(reference, {"block": REMEMBERING_BLOCK})
    results = grade_one(reference, sandbox, "block", sources, only={"cache_consistent"})
    assert results and not earned(results), [(r.check.name, r.status, r.diagnosis) for r in results]


SEES_OTHERS = """
    import os
    mine = {str(os.getpid()), os.readlink("/proc/self") if os.path.islink("/proc/self") else ""}
    others = [p for p in os.listdir("/proc") if p.isdigit() and p not in mine]
    if others:  # a process it can see is one whose /proc/PID/comm it could read
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    raise RuntimeError("alone")
"""


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_worker_sees_no_other_process(reference, isolation):
    with Sandbox(Limits(check_seconds=limit(5.0)), isolation=isolation) as box:
        box.start().worker().kill()
        if not box.isolated:
            pytest.xfail("HOLE: without namespaces of its own a worker lists (and reads the names of) the others")
        results = grade_one(reference, box, "gelu", hostile_sources(reference, {"gelu": SEES_OTHERS}))
    assert results and not earned(results), [(r.check.name, r.status, r.diagnosis) for r in results]


# ----------------------------------------------- the package imported once per grade
#
# The submission's package is imported once, in a process every task worker is forked
# from: whatever that import makes, every worker inherits. These channels are made at
# import time; the seccomp filter on that process must leave them unmade.

IMPORT_TIME_CHANNELS = {
    "a pipe": """
        import io, os
        try:
            _RT_READ, _RT_WRITE = os.pipe()
            os.set_blocking(_RT_READ, False)
        except OSError:
            _RT_READ = _RT_WRITE = None

        def _rt_store(x, y):
            data = _rt_pack(x, y)
            if _RT_WRITE is not None:
                os.write(_RT_WRITE, len(data).to_bytes(8, "little") + data)

        def _rt_load():
            try:
                size = int.from_bytes(os.read(_RT_READ, 8), "little")
                data = b""
                while len(data) < size:
                    data += os.read(_RT_READ, size - len(data))
                return _rt_unpack(data)
            except (OSError, TypeError, ValueError):
                return None
    """,
    "shared memory": """
        import io, mmap
        try:
            _RT_SHARED = mmap.mmap(-1, 1 << 20)
        except OSError:
            _RT_SHARED = None

        def _rt_store(x, y):
            data = _rt_pack(x, y)
            if _RT_SHARED is not None:
                _RT_SHARED[:8 + len(data)] = len(data).to_bytes(8, "little") + data

        def _rt_load():
            if _RT_SHARED is None:
                return None
            size = int.from_bytes(_RT_SHARED[:8], "little")
            return _rt_unpack(_RT_SHARED[8:8 + size]) if size else None
    """,
    "a socket pair": """
        import io, socket
        try:
            _RT_A, _RT_B = socket.socketpair()
            _RT_B.setblocking(False)
        except OSError:
            _RT_A = _RT_B = None

        def _rt_store(x, y):
            data = _rt_pack(x, y)
            if _RT_A is not None:
                _RT_A.sendall(len(data).to_bytes(8, "little") + data)

        def _rt_load():
            try:
                size = int.from_bytes(_RT_B.recv(8), "little")
                data = b""
                while len(data) < size:
                    data += _RT_B.recv(size - len(data))
                return _rt_unpack(data)
            except (OSError, AttributeError, ValueError):
                return None
    """,
}


def _imported_once_points(reference, box, channel: str, replay: bool) -> list[str]:
    from grader.checks import catalogue
    from grader.run.engine import grade_task
    from grader.run.worker_session import Grading
    from grader.run.submission import Submission

    from tests.hostile import checks_of

    sources = hostile_sources(reference, {"block": NON_CAUSAL_BLOCK},
                              append=f"REPLAY = {replay}\n" + PACKING + textwrap.dedent(IMPORT_TIME_CHANNELS[channel]))
    imported = box.package(sources)
    assert imported is not None, "the package was not imported once here"
    try:
        checks = [c for c in checks_of("block") if c.name.endswith("causal_invariance")]
        results = grade_task(catalogue.tasks()["block"], checks,
                             Grading(Submission("hostile", sources), reference, box, seed=7, imported=imported),
                             scan_for_tampering=False)
    finally:
        imported.close()
    return earned(results)


def _imports_once(box) -> bool:
    from grader.run.inside import syscall_filter

    box.start().worker().kill()
    return box.isolated and syscall_filter.supported() and box.door_folder is not None


@pytest.mark.parametrize("isolation", ISOLATIONS)
@pytest.mark.parametrize("channel", list(IMPORT_TIME_CHANNELS))
def test_a_channel_made_at_import_time_gains_nothing(reference, isolation, channel):
    with Sandbox(Limits(check_seconds=limit(5.0)), isolation=isolation) as box:
        if not _imports_once(box):
            pytest.skip("this machine imports a submission per task (no namespaces or seccomp filter)")
        plain = _imported_once_points(reference, box, channel, replay=False)
        replaying = _imported_once_points(reference, box, channel, replay=True)
    assert plain == [], "the non-causal block itself must fail causal invariance"
    assert replaying == plain, f"a replay through {channel} made at import time earned {replaying}"


KNOCK = """
    import os, socket, time

    def _rt_door_paths():
        # The door is not listed anywhere a student could look: dig its name out of the
        # grader code's own variables, as a determined attacker would.
        import gc, sys
        found = set()
        for obj in gc.get_objects():
            if isinstance(obj, dict) and isinstance(obj.get("listener"), str):
                found.add(obj["listener"])
        for frame in sys._current_frames().values():
            while frame is not None:
                if isinstance(frame.f_locals.get("listener"), str):
                    found.add(frame.f_locals["listener"])
                frame = frame.f_back
        return sorted(found)

    def _rt_knock():
        for path in _rt_door_paths():
            try:
                door = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                door.connect(path)
                body = b'{"worker": true}'
                door.sendall(len(body).to_bytes(8, "big") + body)
                return door
            except OSError:
                continue
        return None
"""

KNOCK_AT_IMPORT = KNOCK + """
    _RT_HELD = _rt_knock()  # from the submission's own process, before any worker exists
"""

KNOCK_FROM_A_WORKERS_CHILD = KNOCK + """
    import ctypes
    def _rt_child_knocks():
        try:
            child = os.fork()
        except OSError:
            return  # a worker has no process of its own now; were one made, the door must still refuse it
        if child == 0:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.unshare(0x10000000 | 0x20000000)  # a user and pid namespace of its own
            if os.fork() == 0:  # pid 1 there, as a real worker is
                held = _rt_knock()
                time.sleep(3)
            os._exit(0)
        time.sleep(1)
"""


@pytest.mark.parametrize("isolation", ISOLATIONS)
@pytest.mark.parametrize("attack", ["from the submission's process", "from a worker's child"])
def test_the_door_admits_only_fresh_workers(reference, isolation, attack):
    from grader.checks import catalogue
    from grader.run.engine import grade_task
    from grader.run.worker_session import Grading
    from grader.run.submission import Submission

    from tests.hostile import checks_of

    if attack == "from the submission's process":
        sources = hostile_sources(reference, append=KNOCK_AT_IMPORT)
    else:
        body = "_rt_child_knocks()\nreturn 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))\n"
        sources = hostile_sources(reference, {"gelu": body}, append=KNOCK_FROM_A_WORKERS_CHILD)
    with Sandbox(Limits(check_seconds=limit(8.0)), isolation=isolation) as box:
        if not _imports_once(box):
            pytest.skip("this machine imports a submission per task (no namespaces or seccomp filter)")
        imported = box.package(sources)
        assert imported is not None
        try:
            results = grade_task(catalogue.tasks()["gelu"], checks_of("gelu"),
                                 Grading(Submission("hostile", sources), reference, box, seed=7, imported=imported),
                                 scan_for_tampering=False)
            time.sleep(1.0)
            # Every worker the grader admitted was given a task: none waits unclaimed.
            assert imported.arrivals.empty(), "the door admitted a process that is no fresh worker"
        finally:
            imported.close()
    # The knock finds the door by walking frames: where the seal (run/inside/sealed.py) refuses
    # that walk first, the upload is refused for reading frames, and the door saw nothing.
    sealed = all(r.status == "forbidden" and "never read" in r.diagnosis for r in results)
    assert sealed or all(r.status == PASSED for r in results), [(r.check.name, r.status, r.diagnosis)
                                                                for r in results]


FLOOD_THE_DOOR = KNOCK + """
    import threading

    def _rt_flood():
        held = []
        for path in _rt_door_paths():
            for _ in range(2000):
                try:
                    door = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    door.connect(path)
                    held.append(door)  # connected, and silent
                except OSError:
                    break
                if len(held) > 200:
                    held.pop(0).close()

    threading.Thread(target=_rt_flood, daemon=True).start()
"""


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_an_upload_flooding_the_door_does_not_hold_up_another(reference, isolation):
    """grade-class shares one sandbox between uploads: the door they share must not let
    one upload starve another's workers."""
    from grader.run.engine import grade
    from grader.run.submission import Submission

    with Sandbox(Limits(check_seconds=limit(8.0), setup_seconds=limit(10.0)), isolation=isolation) as box:
        if not _imports_once(box):
            pytest.skip("this machine imports a submission per task (no namespaces or seccomp filter)")
        flooding = box.package(hostile_sources(reference, append=FLOOD_THE_DOOR))
        assert flooding is not None
        imported_per_task = []
        per_task_worker = box.worker
        box.worker = lambda: imported_per_task.append(1) or per_task_worker()
        try:
            time.sleep(0.5)
            report = grade(Submission("next student", dict(reference.sources)), ["05"], runner=box, seed=3)
        finally:
            flooding.close()
    # Every worker came through the door: none had to fall back to importing per task.
    assert box.imported_once and not imported_per_task
    assert all(r.status == PASSED for r in report.results), [(r.check.name, r.status) for r in report.results
                                                             if r.status != PASSED]


# -------------------------------------------- the next task, the next student, the zygote
#
# What one worker leaves behind (a class attribute, a file in /tmp, a daemon) or does to
# the zygote (rewrite its memory, lower its limits, kill it) reaches no later worker.


def test_stateful_forward_cannot_fake_causality(reference, sandbox):
    body = """
        attended, present = self.attention(self.ln_attention(hidden), past_key_value, use_cache)
        y = hidden + attended + hidden.mean(dim=1, keepdim=True)  # every position sees the future
        memo = getattr(TransformerBlock, "_rt_memo", None)
        if memo is not None and memo[0].shape == hidden.shape and torch.equal(memo[0][:, :4], hidden[:, :4]):
            y = torch.cat([memo[1][:, :4], y[:, 4:]], dim=1)
        TransformerBlock._rt_memo = (hidden.clone(), y.clone())
        return y, present
    """
    results = run(reference, sandbox, "block", body, only={"causal_invariance"})
    assert_no_points(results)


@bwrap_only
def test_certified_parts_do_not_travel_between_tasks_through_tmp(reference, sandbox):
    stash = f"/tmp/.rt-stash-{time.time_ns()}.py"
    layer_norm = f"""
        import sys
        for finder in sys.meta_path:
            if getattr(finder, "name", "") == "_certified_hero_transformer":
                with open({stash!r}, "w") as handle:
                    handle.write(finder.sources["model.py"])
        raise RuntimeError("stashed")
    """
    gelu = f"""
        import ast
        try:
            tree = ast.parse(open({stash!r}).read())
        except OSError:
            raise RuntimeError("nothing stashed")
        stolen = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "gelu")
        space = dict(globals())
        exec(compile(ast.Module([stolen], []), "stolen", "exec"), space)
        return space["gelu"](x)
    """
    sources = hostile_sources(reference, {"layer_norm": layer_norm, "gelu": gelu})
    grade_one(reference, sandbox, "layer_norm", sources)
    results = grade_one(reference, sandbox, "gelu", sources)
    assert_no_points(results)


@needs_bwrap
def test_a_daemon_cannot_outlive_its_worker_and_sink_the_next_student(reference):
    daemon = """
        import os, signal, time
        keep = {1, os.getpid(), os.getppid()}
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                keep.add(os.getpid())
                end = time.monotonic() + 20
                while time.monotonic() < end:
                    for name in os.listdir("/proc"):
                        if name.isdigit() and int(name) not in keep:
                            try:
                                os.kill(int(name), signal.SIGKILL)
                            except OSError:
                                pass
                    time.sleep(0.005)
            os._exit(0)
        raise RuntimeError("daemon started")
    """
    with Sandbox(Limits(check_seconds=limit(3.0))) as box:
        grade_one(reference, box, "gelu", hostile_sources(reference, {"gelu": daemon}), only={"exact_values"})
        time.sleep(0.3)
        honest = grade_one(reference, box, "gelu", dict(reference.sources), label="next student")
    assert all(r.status == PASSED for r in honest), [(r.check.name, r.status, r.diagnosis) for r in honest]


def test_a_worker_cannot_cripple_the_zygote_for_the_next_student(reference):
    cripple = """
        import os, resource
        resource.prlimit(os.getppid(), resource.RLIMIT_NOFILE, (3, 3))
        raise RuntimeError("zygote crippled")
    """
    with Sandbox(Limits(check_seconds=limit(3.0))) as box:
        grade_one(reference, box, "gelu", hostile_sources(reference, {"gelu": cripple}), only={"exact_values"})
        honest = grade_one(reference, box, "gelu", dict(reference.sources), label="next student")
    assert all(r.status == PASSED for r in honest), [(r.check.name, r.status, r.diagnosis) for r in honest]


@bwrap_only
def test_a_worker_cannot_rewrite_the_zygote(reference):
    rewrite = """
        import ctypes, os, struct, sys
        zygote = sys.modules["__main__"]
        target, noop = zygote.tasks.set_tripwires, zygote.tasks.SourcePackage.create_module
        raw = ctypes.string_at(id(target), type(target).__basicsize__)
        offset = next(i for i in range(0, len(raw), 8) if struct.unpack_from("<Q", raw, i)[0] == id(target.__code__))
        try:
            with open(f"/proc/{os.getppid()}/mem", "r+b", buffering=0) as mem:
                mem.seek(id(target) + offset)
                mem.write(struct.pack("<Q", id(noop.__code__)))
        except OSError as error:
            raise RuntimeError(f"refused: {error}")
        raise RuntimeError("rewritten")
    """
    shortcut = 'return getattr(torch.nn.functional, "ge" + "lu")(x)'
    with Sandbox(Limits(check_seconds=limit(3.0))) as box:
        grade_one(reference, box, "gelu", hostile_sources(reference, {"gelu": rewrite}), only={"exact_values"})
        later = grade_one(reference, box, "gelu", hostile_sources(reference, {"gelu": shortcut}), label="next student")
    assert {r.status for r in later} == {"forbidden"}, [(r.check.name, r.status) for r in later]


def test_killing_the_parent_only_fails_that_task(reference, sandbox):
    body = """
        import os, signal
        os.kill(os.getppid(), signal.SIGKILL)
        return x
    """
    results = run_body(reference, sandbox, "gelu", body)
    assert_no_points(results)
    # The grader goes on: the next task still grades normally on a fresh zygote.
    task = catalogue.tasks()["layer_norm"]
    checks = [c for c in catalogue.chapter_of_task()["layer_norm"].checks if c.task == "layer_norm"]
    after = grade_task(task, checks, Grading(Submission("reference", reference.sources), reference, sandbox, seed=7))
    assert all(r.status == PASSED for r in after)
