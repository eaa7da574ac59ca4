"""Where a grading's time goes, phase by phase, timed as it runs.

The engine and the runners wrap each phase in `PHASES.phase(name)`; `grade --profile`
and `make bench` print the totals beside the wall time. Phases run in the grader's
process; where two grading threads run at once their phases overlap, so a profile that
should add up to the wall time is taken with one thread (`grade --profile` does that).
What happens before the grader's code runs (the interpreter starting, torch and the kit
imported) is read from the process's own start time.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

# The phases, in the order a grading meets them, each with what it covers.
ORDER = {
    "interpreter and imports": "the interpreter starting and the grader's first modules imported",
    "torch and the checks imported": "torch, the check modules and the engine imported by the grader",
    "reference and plan": "the upload read, the reference imported, the checks chosen, the upload scanned",
    "sandbox boot": "the sandbox started, and any wait for its zygote (an interpreter with torch imported) to be "
                    "ready",
    "package import": "the upload's package imported once, in its sealed process",
    "worker starts": "each task's worker forked, connected and given its certified parts",
    "task scans": "each task's function read for the calls it may not make",
    "inputs": "each check's inputs drawn",
    "expected values": "the reference's answers computed in the grader",
    "probes": "each probe's round trip: the student's code running in its worker, the answer sent back",
    "probes under operator rules": "the same, for tasks whose worker records every torch operator the code runs",
    "facts and forms loaded": "the kit's computed facts and the answers' expected forms read from the checks' files",
    "judges": "each answer judged and worded",
    "worker ends": "each worker told to exit (or killed), and the last of what it printed read",
    "shutdown": "the sandbox and its processes ended",
    "report": "the report rendered and its files written",
}


class Phases:
    def __init__(self):
        self._lock = threading.Lock()
        self._open = threading.local()  # per thread: the time spent in phases nested in each open one
        self.seconds: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        # Times of what runs beside the grader, in processes of its own (the zygote's boot):
        # not phases of this process, so not in its sum.
        self.beside: dict[str, float] = {}

    def add(self, name: str, seconds: float) -> None:
        with self._lock:
            self.seconds[name] = self.seconds.get(name, 0.0) + seconds
            self.counts[name] = self.counts.get(name, 0) + 1

    @contextlib.contextmanager
    def phase(self, name: str):
        """Time what runs inside. A phase opened inside another on the same thread (a
        worker's end within its probes, the zygote awaited within a worker's start) counts
        as itself only: the outer one's time excludes it, so the phases add up to the wall."""
        nested = self._open.__dict__.setdefault("stack", [])
        nested.append(0.0)
        began = time.perf_counter()
        try:
            yield
        finally:
            spent = time.perf_counter() - began
            inner = nested.pop()
            if nested:
                nested[-1] += spent
            self.add(name, spent - inner)

    def note(self, name: str, seconds: float) -> None:
        with self._lock:
            self.beside[name] = seconds

    def reset(self) -> None:
        with self._lock:
            self.seconds.clear()
            self.counts.clear()
            self.beside.clear()

    def rows(self) -> list[tuple[str, float, int]]:
        """(phase, seconds, times) in ORDER, then any other phase."""
        names = [n for n in ORDER if n in self.seconds] + sorted(set(self.seconds) - set(ORDER))
        return [(n, self.seconds[n], self.counts[n]) for n in names]


PHASES = Phases()


def seconds_since_process_start() -> float | None:
    """How long ago this process started (Linux: /proc), or None where that is unknown."""
    if not hasattr(os, "sysconf"):  # Windows (where Wine shows a /proc all the same)
        return None
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        started_ticks = int(fields[19])  # field 22 of the line, counted after the command name
        with open("/proc/uptime", "rb") as uptime:
            up = float(uptime.read().split()[0])
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return up - started_ticks / os.sysconf("SC_CLK_TCK")
