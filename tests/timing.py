"""Time limits for the tests, taken from the machine as it is when a test starts rather
than from constants: a limit that an idle laptop meets fails on a CI machine that runs
two test processes beside other work.

slowdown() is how many times longer than on an idle core things take right now: the
larger of the runnable processes per core over the last minute (the load average) and,
measured on the spot, the wall time a short busy loop takes per second of CPU it gets.
limit(seconds) scales a time an idle machine needs by it."""

from __future__ import annotations

import os
import time


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:
        return os.cpu_count() or 1


def starved(cpu_seconds: float = 0.05) -> float:
    """Wall seconds per CPU second this process gets now (1.0 on an idle core)."""
    wall, cpu = time.perf_counter(), time.process_time()
    while time.process_time() - cpu < cpu_seconds:
        pass
    return (time.perf_counter() - wall) / max(time.process_time() - cpu, 1e-9)


def slowdown() -> float:
    try:
        load = os.getloadavg()[0] / _cores()
    except (AttributeError, OSError):
        load = 1.0
    return max(1.0, load, starved())


def limit(seconds: float) -> float:
    """`seconds`, what the thing takes with room to spare on an idle machine, scaled to
    this machine's load now."""
    return seconds * slowdown()
