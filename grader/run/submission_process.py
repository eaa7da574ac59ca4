"""A submission imported once per grade: one sealed process S' imports the package,
and every task's worker is forked from it and connects back to the grader through a
per-submission door. The door admits only a fresh worker (pid 1 of a namespace whose
parent is S''s, holding a socket no S'-level process holds), and only then does the
grader send it the task's certified parts."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import socket
import struct
import threading
import time
import shutil

from grader.run import cpu_clock
from grader.run.inside import wire
from grader.run.inside.messages import WorkerStatus
from grader.run.worker import Late, OutputTail, TimeLimit, Worker, WorkerFailed

DOOR_INSIDE = "/sandbox/door"  # where the door folder appears inside bubblewrap


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




class DoorFolder:
    """The folder, made once per sandbox, that holds each submission's door (a listening
    socket named by a random token). The sandbox can pass through it but not list it, so
    one upload can neither find nor knock on another's door."""

    # Write and search, no read, for its owner too: inside the sandbox the grader's user is
    # mapped to the sandbox's own, so the owner's bits are the ones a submission gets, and
    # 0711 let it list every door. The grader names each door itself and never lists.
    MODE = 0o311

    def __init__(self):
        import tempfile

        # Not under /tmp: a submission's process covers /tmp (without bubblewrap, the host's).
        base = "/run" if os.access("/run", os.W_OK) else None
        self.dir = tempfile.mkdtemp(prefix="hero-transformer-door-", dir=base)
        os.chmod(self.dir, self.MODE)

    def inside(self, kind: str, name: str) -> str:
        """The door's path as the submission's process sees it."""
        return f"{DOOR_INSIDE}/{name}" if kind == "bwrap" else os.path.join(self.dir, name)

    def close(self):
        try:
            os.chmod(self.dir, 0o700)  # listed once more, to be removed
        except OSError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


class Door:
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

    def __init__(self, folder: DoorFolder, submission):
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
        try:
            selector.register(self.server, selectors.EVENT_READ)
        except (OSError, ValueError):
            return  # the door was closed before this thread began: nobody is let in
        pending: dict[socket.socket, list] = {}  # connection -> [received, deadline, pid]
        while not self.closed:
            try:
                ready = selector.select(timeout=0.25)
            except (OSError, ValueError):
                break
            for key, _ in ready:
                if key.fileobj is not self.server:
                    self._read_greeting(key.fileobj, selector, pending)
                elif not self._accept(selector, pending):
                    break
            now = time.monotonic()
            for connection in [c for c, entry in pending.items() if entry[1] < now]:
                _drop(connection, selector, pending)
        for connection in list(pending):
            _drop(connection, selector, pending)
        selector.close()

    def _accept(self, selector, pending: dict) -> bool:
        """A new connection, left waiting for its greeting unless PENDING already wait;
        False where the door's socket fails."""
        import selectors

        try:
            connection, _ = self.server.accept()
        except BlockingIOError:
            return True
        except OSError:
            return False
        if len(pending) >= self.PENDING:
            connection.close()
            return True
        try:
            pid = _peer_pid(connection)
        except OSError:
            connection.close()
            return True
        connection.setblocking(False)
        pending[connection] = [bytearray(), time.monotonic() + self.GREETING_SECONDS, pid]
        selector.register(connection, selectors.EVENT_READ)
        return True

    def _read_greeting(self, connection: socket.socket, selector, pending: dict) -> None:
        """What has arrived of a waiting connection's greeting (a size, then that many
        bytes); a whole one is admitted or refused, a closed or oversized one dropped."""
        entry = pending[connection]
        try:
            chunk = connection.recv(self.GREETING_BYTES)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        entry[0] += chunk
        size = int.from_bytes(entry[0][:8], "big") if len(entry[0]) >= 8 else None
        if not chunk or (size is not None and size > self.GREETING_BYTES):
            _drop(connection, selector, pending)
            return
        if size is None or len(entry[0]) < 8 + size:
            return
        greeting = bytes(entry[0][8:8 + size])
        pending.pop(connection)
        selector.unregister(connection)
        connection.setblocking(True)
        try:
            self._admit(connection, entry[2], wire.decode(greeting))
        except Exception:  # noqa: BLE001 - whoever knocked, the door stays open for the next
            connection.close()

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


def _drop(connection: socket.socket, selector, pending: dict) -> None:
    """A connection that waits for its greeting no more: forgotten and closed."""
    pending.pop(connection, None)
    try:
        selector.unregister(connection)
    except (KeyError, ValueError):
        pass
    connection.close()


def _end_spare(future) -> None:
    if not future.cancelled() and future.exception() is None:
        future.result().kill()


class SubmissionProcess:
    """One submission's package, imported once in a sealed process (S') in the sandbox;
    worker() gives a fresh fork of it, connected and checked, for one task. `sandbox`
    is the grader.run.sandbox.Sandbox it runs in: its limits, door_folder, kind,
    fork(), kill(), counts_processes() and confine_worker() are what this uses."""

    def __init__(self, sandbox, sources: dict[str, str]):
        import queue

        self.sandbox, self.sources = sandbox, sources
        self.door: Door | None = None
        self.arrivals: "queue.Queue[tuple[socket.socket, int]]" = queue.Queue()
        self.namespace: tuple[int, int] | None = None
        self.pid = None  # S, as the zygote counts
        self.control = None
        self.output = None
        self._used: dict[tuple[int, int], int] = {}  # a worker's pid namespace -> its pid 1, as we count
        self._used_lock = threading.Lock()  # the door's thread
        self._lock = threading.Lock()  # one fork at a time, each with its worker
        self._spare = None  # a Future: the next worker, forked before it is asked for
        self._spares = None  # the one thread that forks it
        self._spare_lock = threading.Lock()
        # Set when a fork gave no worker: what broke it (an at-fork hook the package
        # registered, say) breaks every later fork too, so no task waits for one again.
        self.broken: str | None = None

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
        folder = sandbox.door_folder
        if folder is None or not sandbox.isolates_workers():
            return False
        try:
            self.pid, ours, out_read = sandbox.fork("submission")
        except OSError:
            return False
        self.control, self.output = ours, OutputTail(out_read)
        self.door = Door(folder, self)
        # The import's limit is the upload's own processor time (that of S and S' below it).
        # Where the upload has a wall-clock limit of its own (a platform's timeout), no cap passes it.
        end = time.monotonic() + limits.submission_wall_seconds if limits.submission_wall_seconds else None
        limit = TimeLimit(limits.setup_seconds, cpu_clock.clock_of(sandbox.host_pid(self.pid)), end)
        try:
            wire.send(ours, {"token": self.door.name, "listener": folder.inside(sandbox.kind, self.door.name),
                             "student": self.sources,
                             "limits": limits.rlimits(count_processes=not sandbox.counts_processes())})
            reply = limit.receive(ours)
        except (OSError, EOFError, TimeoutError, ValueError, wire.WireError, Late):
            reply = None
        if not (isinstance(reply, dict) and reply.get("imported") is True and self.namespace is not None):
            self.close()
            return False
        return True

    def worker(self) -> Worker:
        """A fresh fork, connected and checked: the spare forked while the last one worked
        (a fork of S', its namespaces made and its connection checked, took a third of a
        worker's start), and the next spare set going."""
        with self._spare_lock:
            spare, self._spare = self._spare, None
        worker = spare.result() if spare is not None else self._fork_worker()
        self._fork_spare()
        return worker

    def _fork_spare(self) -> None:
        with self._spare_lock:
            if self._spare is not None or self.broken is not None or self.control is None:
                return
            if self._spares is None:
                self._spares = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="spare-worker")
            self._spare = self._spares.submit(self._fork_worker)

    def _drop_spare(self) -> None:
        with self._spare_lock:
            spare, self._spare = self._spare, None
            spares, self._spares = self._spares, None
        if spare is not None:  # ended once it is up (closing S' makes a fork under way fail at once)
            spare.add_done_callback(_end_spare)
        if spares is not None:
            spares.shutdown(wait=False)

    def _fork_worker(self) -> Worker:
        import queue

        timeout = self.sandbox.limits.setup_seconds
        with self._lock:
            if self.broken is not None:
                raise WorkerFailed(WorkerStatus.CRASHED, self.broken, "")
            try:
                self.control.settimeout(timeout)
                wire.send(self.control, {"op": "fork"})
                forked = wire.recv(self.control, deadline=time.monotonic() + timeout)
                if isinstance(forked, dict) and forked.get("forked") is False:
                    raise OSError("no room for another process in the submission's process limit")
                connection, pid = self.arrivals.get(timeout=timeout)
            except (OSError, EOFError, TimeoutError, wire.WireError, queue.Empty) as error:
                self.broken = ("the submission's process did not start a worker (it ended, hung at import, or its "
                               f"forks die): {error!r}")
                raise WorkerFailed(WorkerStatus.CRASHED, self.broken, self.output.text(wait=0.0)) from None
        self.sandbox.confine_worker(pid)  # it waits for its output pipe before it runs anything
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

        return Worker(pid, connection, OutputTail(out_read), end=lambda clean: end(), host_pid=pid)

    def close(self):
        self._drop_spare()
        if self.door is not None:
            self.door.close()
            self.door = None
        if self.pid is not None:
            self.sandbox.kill(self.pid)
            self.pid = None
        if self.control is not None:
            self.control.close()
            self.control = None
