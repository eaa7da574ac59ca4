"""Running untrusted code: the grader's side of the zygote (grader/run/inside/zygote.py).

Where bubblewrap works, the zygote runs in it as an unprivileged user with no network,
an empty read-only /tmp, and only the Python install, the venv and grader/{run/inside,checks}
visible: the reference, the engine, the submission on disk and the results file are not
in its filesystem at all (the check modules are, but the expected values they judge
against are computed by the reference, in the grader). Elsewhere it runs as a plain child process (as
`nobody` when the grader is root) with the same resource limits; `Sandbox.kind` says
which, and the report shows it.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import sysconfig
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from grader import KIT_ROOT
from grader.run.inside import wire

GRADER_DIR = KIT_ROOT / "grader"
SANDBOX_ROOT = "/sandbox"
NOBODY = 65534
# Folders of the course that hold what no worker may read (the reference), where the
# worker shares the grader's filesystem (no bubblewrap).
HIDDEN_FROM_WORKERS = ("solutions",)
DOOR_INSIDE = f"{SANDBOX_ROOT}/door"  # where the grader's socket for connected workers appears
GIB = 1024**3


@dataclass
class Limits:
    memory_bytes: int = 4 * GIB  # address space; torch alone maps ~0.7 GB
    cpu_seconds: int = 120  # per worker, a backstop behind the wall-clock timeouts
    file_bytes: int = 16 * 1024 * 1024
    open_files: int = 256
    check_seconds: float = 10.0
    setup_seconds: float = 30.0
    processes: int = 48  # processes and threads of the whole sandbox, where a pids cgroup exists
    # Wall clock for one submission, all its checks: past it the rest are 'timeout'.
    submission_seconds: float = 600.0

    def rlimits(self) -> dict:
        return {
            "RLIMIT_AS": self.memory_bytes,
            "RLIMIT_CPU": self.cpu_seconds,
            "RLIMIT_FSIZE": self.file_bytes,
            "RLIMIT_NOFILE": self.open_files,
            "RLIMIT_CORE": 0,
        }


class WorkerFailed(Exception):
    """The worker did not answer: it hung, died or sent garbage. `status` is one of
    timeout / crashed / garbage; `output` is the tail of what it printed."""

    def __init__(self, status: str, reason: str, output: str = ""):
        super().__init__(reason)
        self.status, self.reason, self.output = status, reason, output


class _OutputTail:
    """Drains a worker's stdout/stderr so it can never block on a full pipe, keeping
    only the first and last few hundred characters."""

    def __init__(self, fd: int, keep: int = 600):
        self.head, self.tail, self.keep, self.total = bytearray(), collections.deque(maxlen=keep), keep, 0
        self.thread = threading.Thread(target=self._drain, args=(fd,), daemon=True)
        self.thread.start()

    def _drain(self, fd):
        with os.fdopen(fd, "rb", buffering=0) as stream:
            while chunk := stream.read(65536):
                self.total += len(chunk)
                room = self.keep - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                self.tail.extend(chunk)

    def text(self, wait: float = 0.2) -> str:
        self.thread.join(wait)
        head = self.head.decode("utf-8", "replace")
        tail = bytes(self.tail).decode("utf-8", "replace")
        if not tail:
            return head
        skipped = self.total - len(self.head) - len(self.tail)
        return head + (f"\n… ({skipped} characters skipped) …\n" if skipped > 0 else "") + tail


class Worker:
    def __init__(self, sandbox: "Sandbox", pid: int, channel: socket.socket, output: _OutputTail,
                 end=None):
        self.sandbox, self.pid, self.channel, self.output = sandbox, pid, channel, output
        self._end = end or (lambda: sandbox._kill(pid))
        self.alive = True
        self.certified: tuple[str, ...] = ()  # the tasks whose reference it holds, as the grader vets them

    def _exchange(self, message, timeout: float, sending: bool = True):
        try:
            if sending:
                self.channel.settimeout(timeout)
                wire.send(self.channel, message)
            return wire.recv(self.channel, deadline=time.monotonic() + timeout)
        except (socket.timeout, TimeoutError):
            self.kill()
            raise WorkerFailed("timeout", f"no answer within {timeout:g} s (an endless loop, or far too slow)",
                               self.output.text()) from None
        except (EOFError, ConnectionError, BrokenPipeError, OSError):
            self.kill()
            raise WorkerFailed("crashed", "the process running the code ended without answering "
                               "(a crash, os._exit/sys.exit at import, or the memory limit)",
                               self.output.text()) from None
        except wire.WireError as error:
            self.kill()
            raise WorkerFailed("garbage", f"the process sent a malformed answer: {error}", self.output.text()) from None

    def start(self, request: dict, timeout: float):
        return self._exchange(request, timeout)

    def call(self, module: str, probe: str, inputs: dict, timeout: float):
        return self._exchange({"module": module, "probe": probe, "inputs": inputs}, timeout)

    def kill(self):
        if self.alive:
            self.alive = False
            self._end()
            try:
                self.channel.close()
            except OSError:
                pass

    def close(self):
        if self.alive:
            try:
                self.channel.settimeout(1.0)
                wire.send(self.channel, {"op": "exit"})
            except OSError:
                pass
            self.kill()


def bwrap_works() -> bool:
    exe = shutil.which("bwrap")
    if not exe:
        return False
    try:
        done = subprocess.run(_bwrap_prefix(exe) + [sys.executable, "-I", "-c", "pass"],
                              capture_output=True, timeout=30)
        return done.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _python_roots() -> list[str]:
    roots = {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix),
             os.path.realpath(os.path.dirname(os.path.realpath(sys.executable)) + "/..")}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(os.path.realpath(path))
    # Keep only the outermost folders; bind each once.
    ordered = sorted(roots, key=len)
    return [r for i, r in enumerate(ordered) if not any(r.startswith(o + "/") for o in ordered[:i])]


def _bwrap_prefix(exe: str, door_dir: str | None = None) -> list[str]:
    args = [exe, "--unshare-all", "--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY),
            "--cap-drop", "ALL", "--die-with-parent", "--new-session",
            "--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev", "--tmpfs", "/tmp",
            "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
            "--setenv", "OMP_NUM_THREADS", "1", "--setenv", "MKL_NUM_THREADS", "1",
            "--chdir", "/tmp"]
    for link in ("/lib", "/lib64", "/bin", "/sbin"):
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    for etc in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/passwd", "/etc/group"):
        if os.path.exists(etc):
            args += ["--ro-bind", etc, etc]
    for root in _python_roots():
        args += ["--ro-bind", root, root]
    # Only the sandbox-side code of the grader: never grader/ as a whole, never solutions/.
    args += ["--ro-bind", str(GRADER_DIR / "__init__.py"), f"{SANDBOX_ROOT}/grader/__init__.py",
             "--ro-bind", str(GRADER_DIR / "run" / "__init__.py"), f"{SANDBOX_ROOT}/grader/run/__init__.py",
             "--ro-bind", str(GRADER_DIR / "run" / "inside"), f"{SANDBOX_ROOT}/grader/run/inside",
             "--ro-bind", str(GRADER_DIR / "checks"), f"{SANDBOX_ROOT}/grader/checks"]
    if door_dir:
        args += ["--ro-bind", door_dir, DOOR_INSIDE]
    # Last, once every mount point under it exists (the venv may live in /tmp): /tmp is an
    # empty, read-only tmpfs, so nothing a worker writes can reach a later one.
    args += ["--remount-ro", "/tmp"]
    return args


class _PidsCgroup:
    """A cgroup-v1 pids group for one sandbox, where the machine offers one (root, with
    /sys/fs/cgroup/pids): caps how many processes and threads its code may run at once,
    and lets close() end every last one of them."""

    ROOT = Path("/sys/fs/cgroup/pids")

    PREFIX = "hero_transformer_grader."

    def __init__(self, limit: int):
        self.path = None
        self._sweep()
        try:
            path = self.ROOT / f"{self.PREFIX}{os.getpid()}.{id(self)}"
            path.mkdir()
            (path / "pids.max").write_text(str(limit))
            self.path = path
        except OSError:
            self.path = None

    @classmethod
    def _sweep(cls):
        """Remove the empty groups of graders that are gone (one killed before its close())."""
        try:
            entries = list(cls.ROOT.glob(cls.PREFIX + "*"))
        except OSError:
            return
        for entry in entries:
            owner = entry.name[len(cls.PREFIX):].split(".")[0]
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                try:
                    entry.rmdir()  # fails, harmlessly, while processes remain in it
                except OSError:
                    pass

    def join(self):
        """In the forked child before exec: move it (and all it will start) into the group."""
        if self.path is not None:
            with open(self.path / "cgroup.procs", "w") as procs:
                procs.write(str(os.getpid()))

    def close(self):
        if self.path is None:
            return
        for _ in range(50):
            try:
                pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
            except OSError:
                pids = []
            for pid in pids:
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
            try:
                self.path.rmdir()
                self.path = None
                return
            except OSError:
                time.sleep(0.02)


class Sandbox:
    """One zygote, restarted whenever it dies; `worker()` forks a fresh worker."""

    def __init__(self, limits: Limits | None = None, isolation: str = "auto", reuse_zygote: bool = True,
                 import_once: bool = True):
        self.limits = limits or Limits()
        # reuse_zygote=False starts a fresh interpreter (and torch import) for every
        # worker: slower, kept to measure what the zygote saves (`make bench`).
        self.reuse_zygote = reuse_zygote
        if isolation == "auto":
            isolation = "bwrap" if bwrap_works() else "process"
        self.kind = isolation
        self.as_nobody = isolation == "process" and os.geteuid() == 0
        self._process = None
        self._control = None
        self._ready = False
        self._lock = threading.Lock()
        self._pids: _PidsCgroup | None = None  # made when the first zygote starts
        self.isolated = False  # whether each worker gets namespaces of its own (the zygote says)
        # import_once=False imports a submission's package in every task's worker, as
        # where the seccomp filter is not available (kept to measure what it saves).
        from grader.run.inside import syscall_filter

        self._door = _DoorFolder() if import_once and reuse_zygote and syscall_filter.supported() else None
        self.imported_once = False  # whether the last submission was imported once (the report says so)

    def describe(self, imported_once: bool | None = None) -> str:
        """The sandbox in words; `imported_once` for the submission being reported (two
        uploads graded side by side may differ), else the last one started."""
        imported_once = self.imported_once if imported_once is None else imported_once
        capped = self._pids is not None and self._pids.path is not None
        cap = f", at most {self.limits.processes} processes" if capped else ""
        apart = ("each worker in namespaces of its own (pids, network, IPC, mounts)" if self.isolated else
                 "workers share one set of namespaces: this machine refuses unprivileged user namespaces, so "
                 "a worker can reach its siblings through IPC, abstract sockets and signals")
        if imported_once:
            apart += ("; the package imported once per submission, in a process sealed by a seccomp filter "
                      "that each task's worker is forked from")
        if self.kind == "bwrap":
            return (f"bubblewrap (no network, empty read-only /tmp, reference and grader files not visible, "
                    f"user nobody{cap}; {apart})")
        who = "user nobody" if self.as_nobody else "the grader's own user"
        return (f"separate process as {who} with resource limits; {apart} (bubblewrap unavailable: "
                f"install it for full isolation)")

    def start(self) -> "Sandbox":
        """Begin booting the zygote now (it imports torch, ~1 s) without waiting for it,
        so that the grader's own start-up overlaps with it."""
        with self._lock:
            if self._process is None:
                self._spawn()
        return self

    def _start(self):
        self._spawn()
        self._await_ready()

    def _spawn(self):
        if self._pids is None:
            self._pids = _PidsCgroup(self.limits.processes)
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fd = child_end.fileno()
        if self.kind == "bwrap":
            root = SANDBOX_ROOT
            command = _bwrap_prefix(shutil.which("bwrap"), self._door.dir if self._door else None) + [
                sys.executable, "-I", f"{root}/grader/run/inside/zygote.py", str(fd), root]
            preexec, env, cwd = self._pids.join, None, "/"
        else:
            root = str(GRADER_DIR.parent)
            command = [sys.executable, "-I", str(GRADER_DIR / "run" / "inside" / "zygote.py"), str(fd), root]
            env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                   # Each worker's own mount namespace covers these with an empty folder.
                   "HERO_TRANSFORMER_HIDE": os.pathsep.join(str(GRADER_DIR.parent / d) for d in HIDDEN_FROM_WORKERS)}

            def preexec():
                self._pids.join()
                if self.as_nobody:
                    _drop_to_nobody()

            cwd = "/tmp"
        try:
            self._process = subprocess.Popen(command, pass_fds=[fd], stdin=subprocess.DEVNULL,
                                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                             env=env, cwd=cwd, preexec_fn=preexec,
                                             start_new_session=True)
        except OSError:
            parent_end.close()
            child_end.close()
            if self.as_nobody:
                # `nobody` may be unable to reach this Python (e.g. one under /root).
                self.as_nobody = False
                return self._spawn()
            raise
        child_end.close()
        self._control = parent_end
        self._ready = False

    def _await_ready(self):
        parent_end = self._control
        parent_end.settimeout(self.limits.setup_seconds + 30)
        try:
            ready = json.loads(parent_end.recv(4096) or b"{}")
        except (OSError, ValueError):
            ready = {}
        if not ready.get("ready"):
            self._process.kill()
            self._process.wait()
            error = (self._process.stderr.read() or b"").decode("utf-8", "replace")[-2000:]
            parent_end.close()
            self._process = self._control = None
            if self.as_nobody:
                # `nobody` may be unable to reach this Python (e.g. one under /root).
                self.as_nobody = False
                return self._start()
            raise RuntimeError(f"the sandbox did not start ({self.kind}): {error}")
        parent_end.settimeout(30)
        self.isolated = ready.get("isolated") is True
        self._ready = True

    def _ensure(self):
        if self._process is None or self._process.poll() is not None:
            self._shutdown_process()
            self._start()
        elif not self._ready:
            self._await_ready()

    def worker(self) -> Worker:
        with self._lock:
            for attempt in range(2):
                if not self.reuse_zygote:
                    self._shutdown_process()
                self._ensure()
                ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                out_read, out_write = os.pipe()
                try:
                    socket.send_fds(self._control, [json.dumps({"op": "fork"}).encode()], [theirs.fileno(), out_write])
                    reply = json.loads(self._control.recv(4096) or b"{}")
                    pid = int(reply["pid"])
                except (OSError, ValueError, KeyError):
                    # The zygote died (perhaps a worker killed it): start a new one.
                    ours.close()
                    os.close(out_read)
                    self._shutdown_process()
                    if attempt:
                        raise
                    continue
                finally:
                    theirs.close()
                    os.close(out_write)
                return Worker(self, pid, ours, _OutputTail(out_read))

    def _kill(self, pid: int):
        with self._lock:
            if self._control is not None and self._process is not None and self._process.poll() is None:
                try:
                    self._control.send(json.dumps({"op": "kill", "pid": pid}).encode())
                except OSError:
                    pass

    def _shutdown_process(self):
        if self._process is not None:
            # Its own session: the whole group goes (without bwrap, workers outlive a
            # killed zygote otherwise).
            try:
                os.killpg(self._process.pid, 9)
            except (ProcessLookupError, PermissionError):
                pass
            self._process.kill()
            self._process.wait()
        if self._control is not None:
            self._control.close()
        self._process = self._control = None
        self._ready = False

    def submission_process(self, sources: dict[str, str]) -> "SubmissionProcess | None":
        """The submission's package imported once, ready to fork workers from; None where
        that cannot be done (no seccomp filter or namespaces here, or the import hung or
        died), and the caller imports it in each task's worker instead."""
        process = SubmissionProcess(self, sources)
        try:
            started = process.start()
        except Exception:  # noqa: BLE001 - importing per task always works
            started = False
        if not started:
            process.close()
        self.imported_once = started
        return process if started else None

    def close(self):
        with self._lock:
            self._shutdown_process()
            if self._pids is not None:
                self._pids.close()
                self._pids = None
            if self._door is not None:
                self._door.close()
                self._door = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _drop_to_nobody():
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


# ------------------------------------------------ a submission imported once per grade

NS_GET_PARENT = 0xB702  # ioctl on a namespace file: the namespace that owns it


def _peer_pid(connection: socket.socket) -> int:
    pid, _uid, _gid = struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                               struct.calcsize("3i")))
    return pid


def _pid_namespace(pid: int | str) -> tuple[int, int]:
    info = os.stat(f"/proc/{pid}/ns/pid")
    return info.st_dev, info.st_ino


def _parent_pid_namespace(pid: int) -> tuple[int, int]:
    import fcntl

    own = os.open(f"/proc/{pid}/ns/pid", os.O_RDONLY)
    try:
        parent = fcntl.ioctl(own, NS_GET_PARENT)
    finally:
        os.close(own)
    try:
        info = os.fstat(parent)
        return info.st_dev, info.st_ino
    finally:
        os.close(parent)


def _alive_in(pid: int, namespace: tuple[int, int]) -> bool:
    try:
        return _pid_namespace(pid) == namespace
    except OSError:
        return False


def _sockets_of(pid: int | str) -> set[str]:
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            found.add(target)
    return found


class _DoorFolder:
    """The folder, made once per sandbox, that holds each submission's door (a listening
    socket named by a random token). The sandbox can pass through it but not list it, so
    one upload can neither find nor knock on another's door."""

    def __init__(self):
        import tempfile

        # Not under /tmp: a submission's process covers /tmp (without bubblewrap, the host's).
        base = "/run" if os.access("/run", os.W_OK) else None
        self.dir = tempfile.mkdtemp(prefix="hero-transformer-door-", dir=base)
        os.chmod(self.dir, 0o711)

    def inside(self, kind: str, name: str) -> str:
        return f"{DOOR_INSIDE}/{name}" if kind == "bwrap" else os.path.join(self.dir, name)

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class _Door:
    """One submission's listening socket, through which its process announces itself
    and its forked workers connect, and the checks made on whoever connects before it
    is given a task.

    Who may have a task: the process that called connect() (the kernel says which) is
    pid 1 of a pid namespace whose parent is that of the submission's process S', and
    not one whose worker already has a task. Anything forked from a worker that holds a
    task lives in that worker's namespace or below it, so it can never qualify; and no
    process at S''s level may hold the new worker's socket, so S' cannot have made the
    connection and handed it down to listen in on what the grader sends."""

    # A greeting is one small frame, sent at once; nobody may hold the door longer.
    GREETING_SECONDS, GREETING_BYTES, PENDING = 2.0, 1024, 16

    def __init__(self, folder: _DoorFolder, submission: "SubmissionProcess"):
        import secrets

        self.name = secrets.token_hex(16)
        self.path = os.path.join(folder.dir, self.name)
        self.submission = submission
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        os.chmod(self.path, 0o777)  # the sandbox's user must be able to connect
        self.server.listen(64)
        self.server.setblocking(False)
        self.closed = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        """Never blocked by whoever connects: connections wait for their greeting side
        by side, a bounded number at a time, each for a bounded time."""
        import selectors

        selector = selectors.DefaultSelector()
        selector.register(self.server, selectors.EVENT_READ)
        pending: dict[socket.socket, list] = {}  # connection -> [received, deadline, pid]

        def drop(connection):
            pending.pop(connection, None)
            try:
                selector.unregister(connection)
            except (KeyError, ValueError):
                pass
            connection.close()

        while not self.closed:
            try:
                ready = selector.select(timeout=0.25)
            except (OSError, ValueError):
                break
            for key, _ in ready:
                if key.fileobj is self.server:
                    try:
                        connection, _ = self.server.accept()
                    except BlockingIOError:
                        continue
                    except OSError:
                        break
                    if len(pending) >= self.PENDING:
                        connection.close()
                        continue
                    try:
                        pid = _peer_pid(connection)
                    except OSError:
                        connection.close()
                        continue
                    connection.setblocking(False)
                    pending[connection] = [bytearray(), time.monotonic() + self.GREETING_SECONDS, pid]
                    selector.register(connection, selectors.EVENT_READ)
                    continue
                connection = key.fileobj
                entry = pending[connection]
                try:
                    chunk = connection.recv(self.GREETING_BYTES)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                entry[0] += chunk
                size = int.from_bytes(entry[0][:8], "big") if len(entry[0]) >= 8 else None
                if not chunk or (size is not None and size > self.GREETING_BYTES):
                    drop(connection)
                    continue
                if size is None or len(entry[0]) < 8 + size:
                    continue
                greeting = bytes(entry[0][8:8 + size])
                pending.pop(connection)
                selector.unregister(connection)
                connection.setblocking(True)
                try:
                    self._admit(connection, entry[2], wire.decode(greeting))
                except Exception:  # noqa: BLE001 - whoever knocked, the door stays open for the next
                    connection.close()
            now = time.monotonic()
            for connection in [c for c, entry in pending.items() if entry[1] < now]:
                drop(connection)
        for connection in list(pending):
            drop(connection)
        selector.close()

    def _admit(self, connection: socket.socket, pid: int, hello):
        submission = self.submission
        if not isinstance(hello, dict):
            raise ValueError("not a greeting")
        if hello.get("submission") == self.name and submission.namespace is None:
            submission.announced(pid)
            wire.send(connection, {"ok": True})
            connection.close()
            return
        if hello.get("worker") is not True or submission.namespace is None:
            raise ValueError("not a worker")
        if _parent_pid_namespace(pid) != submission.namespace or not submission.admits(pid):
            raise ValueError("not a fresh worker of this submission")
        submission.arrivals.put((connection, pid))

    def close(self):
        self.closed = True
        try:
            self.server.close()
        finally:
            try:
                os.unlink(self.path)
            except OSError:
                pass


class SubmissionProcess:
    """One submission's package, imported once in a sealed process (S') in the sandbox;
    worker() gives a fresh fork of it, connected and checked, for one task."""

    def __init__(self, sandbox: "Sandbox", sources: dict[str, str]):
        import queue

        self.sandbox, self.sources = sandbox, sources
        self.door: _Door | None = None
        self.arrivals: "queue.Queue[tuple[socket.socket, int]]" = queue.Queue()
        self.namespace: tuple[int, int] | None = None
        self.pid = None  # S, as the zygote counts
        self.control = None
        self.output = None
        self._used: dict[tuple[int, int], int] = {}  # a worker's pid namespace -> its pid 1, as we count
        self._used_lock = threading.Lock()  # the door's thread
        self._lock = threading.Lock()  # one fork at a time, each with its worker

    # -- called by the door, on its thread
    def announced(self, pid: int):
        self.namespace = _pid_namespace(pid)
        _sockets_of(pid)  # the grader must be able to see what S' holds; PermissionError if not

    def admits(self, pid: int) -> bool:
        with open(f"/proc/{pid}/status") as status:
            nspid = next((line.split()[1:] for line in status if line.startswith("NSpid:")), [])
        if not nspid or nspid[-1] != "1":
            return False
        namespace = _pid_namespace(pid)
        with self._used_lock:
            # The kernel reuses a namespace's number once it is gone: only one whose
            # worker (its pid 1) still lives is taken.
            holder = self._used.get(namespace)
            if holder is not None and holder != pid and _alive_in(holder, namespace):
                return False
            if holder == pid:
                return False
            self._used[namespace] = pid
        held = _sockets_of(pid)
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != pid:
                try:
                    if _pid_namespace(entry) == self.namespace and held & _sockets_of(entry):
                        return False
                except OSError:
                    continue
        return True

    # -- called by the engine
    def start(self) -> bool:
        """Import the package once. False when that cannot be done here (the caller then
        imports it per task, as without this)."""
        sandbox, limits = self.sandbox, self.sandbox.limits
        folder = sandbox._door
        if folder is None:
            return False
        with sandbox._lock:
            sandbox._ensure()
            if not sandbox.isolated:
                return False
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            out_read, out_write = os.pipe()
            try:
                socket.send_fds(sandbox._control, [json.dumps({"op": "submission"}).encode()],
                                [theirs.fileno(), out_write])
                self.pid = int(json.loads(sandbox._control.recv(4096) or b"{}")["pid"])
            except (OSError, ValueError, KeyError):
                ours.close()
                os.close(out_read)
                return False
            finally:
                theirs.close()
                os.close(out_write)
        self.control, self.output = ours, _OutputTail(out_read)
        self.door = _Door(folder, self)
        deadline = time.monotonic() + limits.setup_seconds
        try:
            wire.send(ours, {"token": self.door.name, "listener": folder.inside(sandbox.kind, self.door.name),
                             "student": self.sources, "limits": limits.rlimits()})
            reply = wire.recv(ours, deadline=deadline)
        except (OSError, EOFError, TimeoutError, wire.WireError):
            reply = None
        if not (isinstance(reply, dict) and reply.get("imported") is True and self.namespace is not None):
            self.close()
            return False
        return True

    def worker(self) -> Worker:
        import queue

        timeout = self.sandbox.limits.setup_seconds
        with self._lock:
            try:
                self.control.settimeout(timeout)
                wire.send(self.control, {"op": "fork"})
                wire.recv(self.control, deadline=time.monotonic() + timeout)
                connection, pid = self.arrivals.get(timeout=timeout)
            except (OSError, EOFError, TimeoutError, wire.WireError, queue.Empty) as error:
                raise WorkerFailed("crashed", "the submission's process did not start a worker "
                                   f"(it ended, or hung at import): {error!r}", self.output.text(wait=0.0)) from None
        out_read, out_write = os.pipe()
        try:
            socket.send_fds(connection, [b"\0"], [out_write])
        finally:
            os.close(out_write)

        def end():
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

        return Worker(self.sandbox, pid, connection, _OutputTail(out_read), end=end)

    def close(self):
        if self.door is not None:
            self.door.close()
            self.door = None
        if self.pid is not None:
            self.sandbox._kill(self.pid)
            self.pid = None
        if self.control is not None:
            self.control.close()
            self.control = None
