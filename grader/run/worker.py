"""The grader's handle on one worker, whichever runner started it: send it a probe,
read its answer within a time limit, keep the tail of what it printed, end it. A
worker that dies, hangs or answers with garbage raises WorkerFailed with a status and a
reason. It knows nothing of the runner: how to end the process is given to it."""

from __future__ import annotations

import collections
import os
import socket
import threading
import time
from typing import Callable

from grader.run.inside import wire
from grader.run.stopping import moment


class WorkerFailed(Exception):
    """The worker did not answer: it hung, died or sent garbage. `status` is one of
    timeout / crashed / garbage, or busy (it ran out of time waiting for a processor the
    machine gave others: the grader's failure, not the code's); `output` is the tail of
    what it printed."""

    def __init__(self, status: str, reason: str, output: str = ""):
        super().__init__(reason)
        self.status, self.reason, self.output = status, reason, output


class OutputTail:
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
    """`end(clean)` ends the process: clean=False after a failure or a kill (it must
    go), clean=True after the worker was told to exit, when a runner may keep the
    process and its channel for the next task (end returns True then)."""

    # A time limit is the code's to use: where the process spent this share of it runnable
    # but waiting for a processor (other uploads, other work on the machine), it timed out
    # for want of a processor, not for what it computed.
    BUSY_SHARE = 0.5

    def __init__(self, pid: int, channel: socket.socket, output, end: Callable[[bool], bool | None],
                 host_pid: int | None = None):
        self.pid, self.channel, self.output = pid, channel, output
        self.host_pid = host_pid  # its pid as this process sees it, where known: how long it waited is read there
        self.end = end
        self.alive = True
        self.certified: tuple[str, ...] = ()  # the tasks whose reference it holds, as the grader vets them

    def waited(self) -> float | None:
        """Seconds the process has spent runnable, waiting for a processor (the kernel's
        schedstat), or None where that cannot be read."""
        if self.host_pid is None:
            return None
        try:
            with open(f"/proc/{self.host_pid}/schedstat", "rb") as stat:
                return int(stat.read().split()[1]) / 1e9
        except (OSError, ValueError, IndexError):
            return None

    def _exchange(self, message, timeout: float, sending: bool = True):
        waited_before = self.waited()
        try:
            if sending:
                self.channel.settimeout(timeout)
                wire.send(self.channel, message)
                if "probe" in message:
                    moment("probe")  # the worker is at work on it
            return wire.recv(self.channel, deadline=time.monotonic() + timeout)
        except (socket.timeout, TimeoutError):
            waited_after = self.waited()
            self.kill()
            if waited_before is not None and waited_after is not None \
                    and waited_after - waited_before >= self.BUSY_SHARE * timeout:
                raise WorkerFailed("busy", f"the machine was too busy: of its {timeout:g} s the process spent "
                                           f"{waited_after - waited_before:.1f} s waiting for a processor",
                                   self.output.text()) from None
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

    def call(self, module: str, probe: str, inputs: dict, timeout: float, task: str | None = None,
             name_failure: bool = False):
        """One probe's answer; `task` names the task it grades where the worker serves a
        group; `name_failure`: the probe failed before, and runs again to name the operator
        that raised."""
        message = {"module": module, "probe": probe, "inputs": inputs}
        if task is not None:
            message["task"] = task
        if name_failure:
            message["name_failure"] = True
        return self._exchange(message, timeout)

    def kill(self, clean: bool = False):
        if self.alive:
            self.alive = False
            if not self.end(clean):
                try:
                    self.channel.close()
                except OSError:
                    pass

    def close(self):
        if self.alive:
            try:
                self.channel.settimeout(1.0)
                wire.send(self.channel, {"op": "exit"})
                clean = True
            except OSError:
                clean = False
            self.kill(clean)
