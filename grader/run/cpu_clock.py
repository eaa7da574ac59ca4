"""The clock a worker's time limits are kept in: the processor time its code used.

A limit in wall-clock seconds blames the code for the machine's load: a loop that spins
beside six other busy programs gets a seventh of a core, and a right answer that needs
one second of computing takes seven. So a check's budget is processor time (user +
system, every thread, every process the worker started), as contest sandboxes keep it,
and the wall clock is only a hard cap, several times larger, against code that sleeps or
blocks. Where the cap is reached without the budget used, the kernel's count of the time
the process spent runnable but waiting for a processor says whose failure it was.

Linux is read from /proc; elsewhere (the portable runner on Windows or macOS) from
psutil where it is installed; where neither can be read, `clock_of` gives None and the
limits fall back to the wall clock.
"""

from __future__ import annotations

import os
from pathlib import Path

_PROC = Path("/proc")
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") and "SC_CLK_TCK" in getattr(os, "sysconf_names", {}) \
    else 100


def _children(pid: int) -> list[int]:
    """The direct children of `pid`, from each of its threads' list."""
    found: list[int] = []
    try:
        threads = list((_PROC / str(pid) / "task").iterdir())
    except OSError:
        return found
    for thread in threads:
        try:
            found += [int(child) for child in (thread / "children").read_text().split()]
        except (OSError, ValueError):
            pass
    return found


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it, as this process numbers them."""
    seen, todo = [], [pid]
    while todo and len(seen) < 4096:
        current = todo.pop()
        if current in seen:
            continue
        seen.append(current)
        todo += _children(current)
    return seen


def namespace_pids(pid: int) -> list[int]:
    """The pid of `pid` in each pid namespace it is in, outermost first (NSpid)."""
    try:
        for line in (_PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return [int(part) for part in line.split()[1:]]
    except (OSError, ValueError):
        pass
    return []


def numbered(inner_pid: int, root: int) -> int | None:
    """The process at or below `root` whose innermost pid namespace numbers it
    `inner_pid` (the sandbox's zygote names itself so), as this process numbers it."""
    for candidate in descendants(root):
        levels = namespace_pids(candidate)
        if levels and levels[-1] == inner_pid:
            return candidate
    return None


def child_numbered(parent: int, inner_pid: int) -> int | None:
    """The child of `parent` that `parent`'s own pid namespace numbers `inner_pid` (what
    the zygote says of a worker it forked), as this process numbers it."""
    level = len(namespace_pids(parent)) - 1
    if level < 0:
        return None
    for child in _children(parent):
        levels = namespace_pids(child)
        if len(levels) > level and levels[level] == inner_pid:
            return child
    return None


class _ProcClock:
    """A Linux process and its descendants, read from /proc."""

    def __init__(self, pid: int):
        self.pid = pid

    def cpu(self) -> float | None:
        total, any_read = 0, False
        for pid in descendants(self.pid):
            try:
                fields = (_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            # After the name: state is fields[0]; utime, stime, cutime, cstime are fields 11-14.
            total += sum(int(value) for value in fields[11:15])
            any_read = True
        return total / _TICKS if any_read else None

    def waited(self) -> float | None:
        total, any_read = 0, False
        for pid in descendants(self.pid):
            try:
                threads = list((_PROC / str(pid) / "task").iterdir())
            except OSError:
                continue
            for thread in threads:
                try:
                    total += int((thread / "schedstat").read_text().split()[1])
                    any_read = True
                except (OSError, ValueError, IndexError):
                    pass
        return total / 1e9 if any_read else None


class _PsutilClock:
    """Windows and macOS: the process's own times, and its children's, from psutil."""

    def __init__(self, process):
        self.process = process

    def cpu(self) -> float | None:
        import psutil

        total = 0.0
        try:
            processes = [self.process, *self.process.children(recursive=True)]
        except psutil.Error:
            return None
        for process in processes:
            try:
                times = process.cpu_times()
            except psutil.Error:
                continue
            total += times.user + times.system
        return total

    def waited(self) -> float | None:
        return None  # no portable count of time spent waiting for a processor


def clock_of(pid: int | None):
    """A clock for the process `pid` (as this process numbers it), or None where its
    processor time cannot be read here."""
    if pid is None:
        return None
    if (_PROC / str(pid) / "stat").exists():
        clock = _ProcClock(pid)
        return clock if clock.cpu() is not None else None
    try:
        import psutil

        return _PsutilClock(psutil.Process(pid))
    except Exception:  # noqa: BLE001 - no psutil, or the process is gone: the wall clock stands in
        return None
