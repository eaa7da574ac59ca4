"""The grader's handle on one worker, whichever runner started it: send it a probe,
read its answer within a time limit, keep the tail of what it printed, end it. A
worker that dies, hangs or answers with garbage raises WorkerFailed with a status and a
reason. It knows nothing of the runner: how to end the process is given to it."""

from __future__ import annotations

import collections
import json
import os
import select
import socket
import threading
import time
from typing import Callable

from grader.run import cpu_clock
from grader.run.inside import wire
from grader.run.inside.parts import NOT_HELD
from grader.run.inside.messages import (Exit, Failure, PartCall, PartReply, ProbeCall, ProbeReply, Ready, SetupFailed,
                                        TaskRequest, WorkerStatus, from_data, to_data)
from grader.run.stopping import moment


class WorkerFailed(Exception):
    """The worker did not answer: it hung, died, sent garbage or changed the grader's code
    (`status`, a WorkerStatus), or ran out of time waiting for a processor the machine gave
    others (BUSY: the grader's failure, not the code's); `output` is the tail of what it
    printed."""

    def __init__(self, status: WorkerStatus, reason: str, output: str = ""):
        super().__init__(reason)
        self.status, self.reason, self.output = WorkerStatus(status), reason, output


class Late(Exception):
    """An answer out of time: its WorkerFailed status (TIMEOUT or BUSY) and reason."""

    def __init__(self, status: WorkerStatus, reason: str):
        super().__init__(reason)
        self.status, self.reason = WorkerStatus(status), reason


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


# How a call across begins on the wire (messages.to_data puts the kind first).
_PART_CALL = b'{"message": "part", '


class TimeLimit:
    """One exchange's limit, in the processor time of the process that answers
    (grader.run.cpu_clock): the answer is late once that process has used `seconds`,
    whatever the machine's load. The wall clock only asks, each time it passes a cap,
    whether the process is starved (runnable but waiting for a processor for at least
    STARVED_SHARE of the time) or blocked (neither starved nor computing): a blocked
    process — it sleeps, or waits for something that never comes — is late at the first
    cap, `seconds` of wall clock, as on a quiet machine; one that computes or is starved
    is given the next cap (CAPS: multiples of `seconds`), and a starved one past the last
    is the grader's failure ("busy"). Without a clock the
    limit is wall-clock seconds. `used` is what the process computed meanwhile: the
    upload's own, charged to its budget."""

    CAPS = (1.0, 5.0, 20.0)
    STARVED_SHARE = 0.5
    # Without the kernel's count of waiting (no schedstat): a process that got at least
    # this share of a processor was computing, not blocked.
    COMPUTING_SHARE = 0.02
    # A process that was not starved and computed for less than this share of the time
    # is blocked (it sleeps, or waits on input, a lock or a queue), not slow.
    BLOCKED_SHARE = 0.1
    # How often the clock is read while an answer is awaited.
    LOOK_SECONDS = 0.1

    def __init__(self, seconds: float, clock, end: "float | None" = None, cpu_seconds: "float | None" = None):
        self.seconds = seconds
        # The processor time allowed, where less than `seconds` is left of a larger limit
        # (a conversation of calls across, within its probe's): the wall-clock caps stay
        # those of `seconds`, so a process starved by a busy machine is not "busy" sooner.
        self.cpu_seconds = seconds if cpu_seconds is None else cpu_seconds
        self.end = end  # time.monotonic() of the upload's own end: no cap goes past it
        self.cpu_before = clock.cpu() if clock is not None else None
        self.clock = clock if self.cpu_before is not None else None
        self.waited_before = self.clock.waited() if self.clock is not None else None
        self.started = time.monotonic()
        self.caps = list(self.CAPS) if self.clock is not None else [1.0]
        self.cap = self._capped(self.started + seconds * self.caps.pop(0))
        self.used = 0.0

    def pause(self, seconds: float, computed: float = 0.0) -> None:
        """The process waited `seconds` for an answer of the grader's (a certified part's,
        computed apart): no time it could have computed, so the caps move on by as much;
        what was `computed` for it there counts as its own (a loop of calls across is as
        late as a loop of its own)."""
        self.started += seconds
        self.cap = self._capped(self.cap + seconds)
        if self.cpu_before is not None:
            self.cpu_before -= computed
        else:
            self.used += computed

    def left(self, computed: float = 0.0) -> float:
        """The processor seconds the process has left, with `computed` more counted as its
        own (a conversation's, so far); Late once none are left. Without a clock, wall
        seconds since the limit began."""
        used = (self._computed() if self.clock is not None else time.monotonic() - self.started) + computed
        if used >= self.seconds:
            raise Late(WorkerStatus.TIMEOUT, f"it used its {self.seconds:g} s of processor time without answering "
                                             f"(an endless loop, or far too slow)")
        return self.seconds - used

    def _capped(self, cap: float) -> float:
        return cap if self.end is None else min(cap, self.end)

    @property
    def extended(self) -> bool:
        """Whether a starved process was given a later cap."""
        return len(self.caps) < (len(self.CAPS) - 1 if self.clock is not None else 0)

    def _computed(self) -> float:
        now = self.clock.cpu() if self.clock is not None else None
        if now is not None:
            self.used = max(self.used, now - self.cpu_before)
        return self.used

    def receive(self, channel: socket.socket, raw: bool = False):
        """The next message on `channel` (`raw`: its frame's body, unread); Late once the
        limit is passed."""
        try:
            while True:
                readable, _, _ = select.select([channel], [], [],
                                               max(0.0, min(self.cap - time.monotonic(), self.LOOK_SECONDS)))
                if readable:
                    # Its answer is written whole once encoded: reading it is the grader's own time.
                    body = wire.recv_frame(channel, deadline=max(self.cap, time.monotonic() + self.seconds))
                    return body if raw else wire.decode(body)
                self._late_yet()
        finally:
            self._computed()

    def _late_yet(self) -> None:
        seconds = self.seconds
        if self.clock is not None and self._computed() >= self.cpu_seconds:
            raise Late(WorkerStatus.TIMEOUT, f"it used its {seconds:g} s of processor time without answering "
                                             f"(an endless loop, or far too slow)")
        now = time.monotonic()
        if now < self.cap:
            return
        if self.end is not None and now >= self.end:
            raise Late(WorkerStatus.TIMEOUT, f"the grading time for this upload ran out while this check ran "
                                             f"(after {now - self.started:.0f} s, in which it computed for "
                                             f"{self.used:.1f} s)")
        if self.clock is None:
            raise Late(WorkerStatus.TIMEOUT, f"no answer within {seconds:g} s (an endless loop, or far too slow)")
        elapsed, computed, waited = now - self.started, self.used, self.clock.waited()
        if waited is not None and self.waited_before is not None:
            waited -= self.waited_before
            starved = waited >= self.STARVED_SHARE * elapsed
        else:
            waited, starved = None, computed >= self.COMPUTING_SHARE * elapsed
        if not starved and computed < self.BLOCKED_SHARE * elapsed:
            raise Late(WorkerStatus.TIMEOUT, f"no answer within {elapsed:.0f} s, in which it computed for only "
                                             f"{computed:.1f} s: it waits for something that never comes (a sleep, "
                                             f"input(), a lock, a queue)")
        if self.caps:  # computing, slowed by the machine's load, or starved: it is given more time
            self.cap = self._capped(self.started + seconds * self.caps.pop(0))
            return
        if not starved:
            raise Late(WorkerStatus.TIMEOUT, f"no answer within {elapsed:.0f} s, in which it computed for "
                                             f"{computed:.1f} s (far too slow, or it waits on something between "
                                             f"bursts of work)")
        detail = f"; it spent {waited:.1f} s waiting for a processor" if waited is not None else ""
        raise Late(WorkerStatus.BUSY, f"the machine was too busy: in {elapsed:.0f} s the process got "
                                      f"{computed:.1f} s of the {seconds:g} s of processor time it may use{detail}")


class Worker:
    """`end(clean)` ends the process: clean=False after a failure or a kill (it must
    go), clean=True after the worker was told to exit, when a runner may keep the
    process and its channel for the next task (end returns True then). Its limits are
    TimeLimits on its own processor time, where its clock can be read."""

    def __init__(self, pid: int, channel: socket.socket, output, end: Callable[[bool], bool | None],
                 host_pid: int | None = None):
        self.pid, self.channel, self.output = pid, channel, output
        self.host_pid = host_pid  # its pid as this process sees it, where known: its clock is read there
        self.clock = cpu_clock.clock_of(host_pid)
        self.end = end
        self.grading_ends: float | None = None  # time.monotonic() of its upload's end, set by the engine
        self.alive = True
        self.certified: tuple[str, ...] = ()  # the tasks whose reference it holds, as the grader vets them
        self.spent = 0.0  # processor seconds its exchanges used: charged to the upload's own budget
        # The certified parts its probes may call across (grader/run/inside/parts.py), and
        # the process that runs them, started at the first call.
        self.apart: "PartsApart | None" = None
        self.serves_parts = False  # a parts' process (PartsApart.process), not a task's worker

    def _exchange(self, message, timeout: float, *answers: type):
        """Send `message` and read the answer, which must be a message of one of `answers`;
        a probe's calls of certified parts that run apart are answered meanwhile."""
        limit = TimeLimit(timeout, self.clock, self.grading_ends)
        across = (PartCall,) if self.apart is not None and isinstance(message, ProbeCall) else ()
        try:
            self.channel.settimeout(timeout)
            wire.send(self.channel, to_data(message))
            if isinstance(message, ProbeCall):
                moment("probe")  # the worker is at work on it
            while True:
                body = limit.receive(self.channel, raw=True)
                if not (across and body.startswith(_PART_CALL)):
                    return from_data(wire.decode(body), *answers)
                # A call across, checked as JSON and passed on as it came: its tensors are
                # the parts' process's to read, not the grader's.
                waited, spent = time.monotonic(), self.spent
                reply = self._across(from_data(wire.decode(body, tensors=False), PartCall), body, limit, message)
                limit.pause(time.monotonic() - waited, computed=self.spent - spent)
                self.spent = spent  # counted once, as the worker's own (limit.used)
                wire.send_frame(self.channel, reply)
        except WorkerFailed:  # the parts' process failed on what this worker's code gave a part
            self.kill()
            raise
        except Late as late:
            self.kill()
            raise WorkerFailed(late.status, late.reason, self.output.text()) from None
        except (socket.timeout, TimeoutError):
            self.kill()
            raise WorkerFailed(WorkerStatus.TIMEOUT, f"no answer within {timeout:g} s (an endless loop, or far "
                                                     f"too slow)", self.output.text()) from None
        except (EOFError, ConnectionError, BrokenPipeError, OSError, ValueError):
            self.kill()
            raise WorkerFailed(WorkerStatus.CRASHED, "the process running the code ended without answering "
                                                     "(a crash, os._exit/sys.exit at import, or the memory limit)",
                               self.output.text()) from None
        except wire.WireError as error:  # MessageError too: a message not of the kind or shape expected
            self.kill()
            raise WorkerFailed(WorkerStatus.GARBAGE, f"the process sent a malformed answer: {error}",
                               self.output.text()) from None
        finally:
            self.spent += limit.used

    def _heard(self, timeout: float, *kinds: type, charged: bool = True, cpu_seconds: "float | None" = None):
        """The next message of a conversation of calls across (its frame's body, and what
        it says, read as JSON only: its tensors are the other side's to read), which must
        be of one of `kinds`, within this process's own limit. `charged`: what the process
        computed meanwhile is added to `spent` (not for the worker answering a call back:
        its own clock counts that time against its probe already). `cpu_seconds`: what is
        left of the processor time, where less than `timeout`."""
        limit = TimeLimit(timeout, self.clock, self.grading_ends, cpu_seconds)
        try:
            self.channel.settimeout(timeout)
            body = limit.receive(self.channel, raw=True)
            return body, from_data(wire.decode(body, tensors=False), *kinds)
        except Late as late:
            self.kill()
            raise WorkerFailed(late.status, late.reason, self.output.text()) from None
        except (socket.timeout, TimeoutError, EOFError, ConnectionError, OSError, ValueError):
            self.kill()
            raise WorkerFailed(WorkerStatus.CRASHED, f"{self._role()} ended without answering",
                               self.output.text()) from None
        except wire.WireError as error:
            self.kill()
            raise WorkerFailed(WorkerStatus.GARBAGE, f"{self._role()} sent a malformed answer: {error}",
                               self.output.text()) from None
        finally:
            self.spent += limit.used if charged else 0.0

    def _role(self) -> str:
        return "the process of the certified parts" if self.serves_parts else "the process running the code"

    def start(self, request: TaskRequest, timeout: float) -> "Ready | SetupFailed":
        return self._exchange(request, timeout, Ready, SetupFailed)

    def call(self, call: ProbeCall, timeout: float) -> ProbeReply:
        """One probe's reply (messages.ProbeCall says what each field asks)."""
        return self._exchange(call, timeout, ProbeReply)

    def _across(self, call: PartCall, body: bytes, limit: "TimeLimit", probe: ProbeCall) -> bytes:
        """A certified part's answer (a frame's body), from the parts' process, to a call the
        worker's code made: only of a part the probed task builds on. What the part
        computed is charged to the upload, as the worker's own computing would be, within
        the probe's `limit`."""
        if not self.apart.may_call(call.part, probe.task):
            return self._refused(call)
        try:
            process = self.apart.process()
        except (OSError, WorkerFailed) as error:  # the machine had no process for it: the grader's failure
            raise WorkerFailed(WorkerStatus.BUSY, f"no process could run the course's {call.part}: {error}") from None
        before = process.spent
        try:
            return self._conversation(process, body, limit, probe)
        except WorkerFailed as failure:
            self.apart.drop()
            if not self.alive:  # the worker's own failure, answering a call back: said as it is
                raise
            raise WorkerFailed(failure.status, f"the course's {call.part}, on what the code gave it: "
                                               f"{failure.reason}", failure.output) from None
        finally:
            self.spent += max(0.0, process.spent - before)

    def _conversation(self, process: "Worker", body: bytes, limit: "TimeLimit", probe: ProbeCall) -> bytes:
        """The worker's call across, passed on, and every message until its answer: a
        certified part may call back a task the worker holds no part of (its code is the
        student's), whose code may call across in turn, and so on; each message passed on
        as it came, checked first. `waiting` holds who made each call still unanswered:
        the other side of the innermost one talks next. The whole of it is within the
        probe's limit: what both processes compute counts, and each wait gets what is left."""
        wire.send_frame(process.channel, body)
        waiting = ["worker"]
        before = process.spent

        def left() -> float:
            return limit.left(computed=process.spent - before)

        while True:
            if waiting[-1] == "worker":  # the parts' process answers, or calls back
                said, message = process._heard(limit.seconds, PartReply, PartCall, cpu_seconds=left())
                if isinstance(message, PartCall):
                    if message.part not in self.apart.back:
                        raise WorkerFailed(WorkerStatus.BUSY, f"the parts' process called back "
                                                              f"{message.part[:40]!r}, which the worker does not "
                                                              f"run as the student's own")
                    waiting.append("parts")
                else:
                    if message.error is not None and message.error.type == NOT_HELD:
                        # A part reached a task neither process holds: the kit's routing, never the student's.
                        raise WorkerFailed(WorkerStatus.BUSY, f"the parts' process holds no "
                                                              f"{message.error.message[:60]}")
                    waiting.pop()
                    if not waiting:
                        return said
                wire.send_frame(self.channel, said)
            else:  # the worker answers a call back, or calls across from within it
                said, message = self._heard(limit.seconds, PartReply, PartCall, charged=False, cpu_seconds=left())
                if isinstance(message, PartCall):
                    if not self.apart.may_call(message.part, probe.task):
                        wire.send_frame(self.channel, self._refused(message))
                        continue
                    waiting.append("worker")
                else:
                    waiting.pop()
                wire.send_frame(process.channel, said)

    @staticmethod
    def _refused(call: PartCall) -> bytes:
        refused = PartReply(error=Failure(type="RuntimeError", message=f"no part {call.part[:40]!r} runs "
                                                                       f"apart for this task"))
        return json.dumps(to_data(refused)).encode("utf-8")

    def kill(self, clean: bool = False):
        if self.apart is not None:
            self.apart.drop()
        if self.alive:
            self.alive = False
            if not self.end(clean):
                try:
                    self.channel.close()
                except OSError:
                    pass

    def close(self):
        if self.apart is not None:
            self.apart.drop(clean=True)
        if self.alive:
            try:
                self.channel.settimeout(1.0)
                wire.send(self.channel, to_data(Exit()))
                clean = True
            except OSError:
                clean = False
            self.kill(clean)


class PartsApart:
    """The certified parts a worker's probes call across (grader/run/inside/parts.py): which
    they are, for which task (None: the worker's one task), and the process that runs them,
    started by `start` (a ready Worker) at the first call and ended with the worker."""

    def __init__(self, parts: dict[str, frozenset], start: Callable[[], "Worker"], back: frozenset = frozenset()):
        self.parts = parts  # part -> the tasks whose probes may call it
        self.back = back  # the tasks a part may call back: the worker's own code of them answers
        self.start = start
        self.running: "Worker | None" = None

    def may_call(self, part: str, task: "str | None") -> bool:
        users = self.parts.get(part)
        return users is not None and (task is None or task in users)

    def process(self) -> "Worker":
        if self.running is None or not self.running.alive:
            self.running = self.start()
            self.running.serves_parts = True
        return self.running

    def drop(self, clean: bool = False) -> None:
        running, self.running = self.running, None
        if running is not None:
            if clean:
                running.close()
            else:
                running.kill()
