"""The portable runner: student code in plain subprocesses, on any platform Python and
torch run on (Windows, macOS, Linux), for a student's own `check`.

A worker process (grader/run/inside/portable_worker.py) is started with `subprocess`,
imports torch and the checks once, and serves one task after another; the student's
package is imported once per process. Every limit that matters is kept from here: each
answer must arrive within the check's time, and a worker that hangs, crashes or sends
garbage is killed, and the next task gets a new process, so one bug costs its own
checks only. What it prints goes to a file of its own, read back per task.

It holds no reference: no certified part and no hidden check is ever sent to it (the
engine refuses such a run, and so does the worker), because nothing here keeps student
code from reading what its process holds. Nothing on its import path is Linux-only: no
fork, no resource limits assumed, no signals beyond killing a child.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from grader.edition import check_py
from grader import KIT_ROOT
from grader.run.inside import wire
from grader.run.inside.messages import WorkerStatus
from grader.run.processes import Limits
from grader.run.stopping import joined
from grader.run.worker import Worker, WorkerFailed

WORKER_SCRIPT = KIT_ROOT / "grader" / "run" / "inside" / "portable_worker.py"
# How much of what a task printed is kept: its first and last characters.
KEEP_OUTPUT = 600


class OutputFile:
    """What one task's worker printed: the part of its process's output file written
    since the task began, cut to its first and last few hundred characters."""

    def __init__(self, path: Path, start: int, keep: int = KEEP_OUTPUT):
        self.path, self.start, self.keep = path, start, keep

    def text(self, wait: float = 0.0) -> str:
        try:
            with open(self.path, "rb") as stream:
                stream.seek(self.start)
                data = stream.read()
        except OSError:
            return ""
        if len(data) <= 2 * self.keep:
            return data.decode("utf-8", "replace")
        skipped = len(data) - 2 * self.keep
        return (data[:self.keep].decode("utf-8", "replace") + f"\n… ({skipped} characters skipped) …\n"
                + data[-self.keep:].decode("utf-8", "replace"))


# How long a new process may take to import torch and the kit before it says hello. On a
# laptop the first import after installing torch reads a few hundred MB from a cold disk,
# often past a virus scanner: minutes, not seconds. The student's own import is timed
# apart from this, with Limits.setup_seconds, once the process is up.
BOOT_SECONDS = 300.0


class _Process:
    """One worker process and the channel it connected back on."""

    def __init__(self, limits: Limits, scratch: Path, closing: threading.Event):
        self.closing = closing  # the runner is closing: a process still booting is ended at once
        self.output_path = scratch / f"worker-{secrets.token_hex(6)}.out"
        token = secrets.token_hex(16)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.bind(("127.0.0.1", 0))
            listener.listen(1)
            port = listener.getsockname()[1]
            env = {key: value for key, value in os.environ.items()
                   if key.upper() in ("PATH", "SYSTEMROOT", "TEMP", "TMP", "HOME", "USERPROFILE", "LANG", "LC_ALL",
                                      "KMP_AFFINITY", "WINEDEBUG", "WINEPREFIX")}
            env.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONIOENCODING": "utf-8",
                        "PYTHONDONTWRITEBYTECODE": "1", "HERO_TRANSFORMER_WORKER_TOKEN": token})
            with open(self.output_path, "wb") as output:
                self.process = subprocess.Popen(
                    [sys.executable, "-I", str(WORKER_SCRIPT), str(KIT_ROOT), str(port)],
                    stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, env=env,
                    cwd=str(scratch), creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0))
            self.channel = self._accept(listener, token, BOOT_SECONDS)
        finally:
            listener.close()
        self.pid = self.process.pid

    def _accept(self, listener: socket.socket, token: str, seconds: float) -> socket.socket:
        """The worker's connection, once it names the token only it was given."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if self.closing.is_set():
                self.kill()
                raise OSError("the check was stopped while its process was loading torch")
            if self.process.poll() is not None:
                self.kill()
                raise OSError("the checking process stopped while loading torch (is torch installed in this Python? "
                              f"`{check_py('doctor')}` says)")
            if left <= 0:
                self.kill()
                raise OSError(f"the checking process did not finish loading torch within {seconds:g} s (a busy or "
                              f"slow machine: close other programs and run the check again)")
            listener.settimeout(min(left, 0.5))
            try:
                channel, _ = listener.accept()
            except socket.timeout:
                continue
            try:
                hello = wire.recv(channel, deadline=time.monotonic() + 5)
            except (OSError, EOFError, TimeoutError, wire.WireError):
                channel.close()
                continue
            if isinstance(hello, dict) and hello.get("token") == token:
                channel.settimeout(None)
                return channel
            channel.close()

    def written(self) -> int:
        try:
            return self.output_path.stat().st_size
        except OSError:
            return 0

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        try:
            self.process.kill()
        except OSError:
            pass
        try:
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        channel = getattr(self, "channel", None)
        if channel is not None:
            try:
                channel.close()
            except OSError:
                pass


class PortableRunner:
    """Workers as plain subprocesses, kept between tasks while they stay healthy."""

    kind = "portable"
    holds_reference = False
    # One task at a time: a second process would import torch beside the first and the
    # grader on a laptop's few cores, which costs more than the probes it would share.
    threads = 1

    def __init__(self, limits: Limits | None = None, reason: str = "chosen instead of the Linux sandbox"):
        self.limits = limits or Limits()
        self.reason = reason  # why this runner and not the sandbox, for the report
        self.scratch = Path(tempfile.mkdtemp(prefix="hero-transformer-check-"))
        self.idle: list[_Process] = []
        self.busy: set[_Process] = set()
        self.lock = threading.Lock()
        self.started = 0  # processes started, for the report and the tests
        self._booting: threading.Thread | None = None  # start()'s first process, while it boots
        self.closing = threading.Event()
        self.imported_once = False

    def start(self) -> "PortableRunner":
        """Start one process now, so torch imports while the grader gets ready."""
        with self.lock:
            if not self.idle and not self.busy:
                booting = threading.Thread(target=self._boot_one, daemon=True)
                booting.start()
                self._booting = booting
        return self

    def _boot_one(self) -> None:
        try:
            process = self._new_process()
        except OSError:
            return
        with self.lock:
            self.idle.append(process)

    def _new_process(self) -> _Process:
        process = _Process(self.limits, self.scratch, self.closing)
        self.started += 1
        return process

    def worker(self) -> Worker:
        if self._booting is not None:
            joined(self._booting)
            self._booting = None
        process = None
        with self.lock:
            while self.idle:
                candidate = self.idle.pop()
                if candidate.alive():
                    process = candidate
                    break
                candidate.kill()
        if process is None:
            try:
                process = self._new_process()
            except OSError as error:
                raise WorkerFailed(WorkerStatus.CRASHED, str(error)) from None
        with self.lock:
            self.busy.add(process)

        def end(clean: bool) -> bool:
            with self.lock:
                self.busy.discard(process)
                if clean and process.alive():
                    self.idle.append(process)
                    return True
            process.kill()
            return False

        return Worker(process.pid, process.channel, OutputFile(process.output_path, process.written()), end=end,
                      host_pid=process.pid)

    def package(self, sources: dict[str, str]):
        """Each process imports the package once, on its first task: nothing to fork from."""
        return None

    def describe(self, imported_once: bool | None = None) -> str:
        # Read by the student only (no graded run comes here): how their code ran, and why
        # not in the Linux sandbox, which their check does not need.
        return (f"separate processes, each check within its time limit (at most {self.limits.check_seconds:g} s); "
                f"{self.reason}")

    def close(self) -> None:
        self.closing.set()  # within half a second, a process still booting is ended
        if self._booting is not None:
            joined(self._booting)
        with self.lock:
            processes = [*self.idle, *self.busy]
            self.idle, self.busy = [], set()
        for process in processes:
            process.kill()
        import shutil

        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
