"""The process layer: what the engine needs from whatever runs student code.

A runner starts workers. A worker (grader.run.worker.Worker) is one process holding
the student's package, and, where the runner may hold it, the task's certified parts:
the engine sends it the task's request, then one probe at a time, reads each answer
or the failure (WorkerFailed: timeout, crashed, garbage), and ends it. That is all the
engine asks of a runner:

    runner.limits             the time and resource limits its workers keep
    runner.holds_reference    whether its workers may receive certified parts
    runner.threads            how many tasks the engine should grade at once on it
    runner.start()            begin booting (torch imports while the grader starts)
    runner.worker()           a fresh worker, ready for a task's request
    runner.parts_process()    where it holds the reference: a fresh process for the
                              certified parts that run apart (grader.run.inside.parts)
    runner.package(sources)   the package imported once, to fork workers from; or None
    runner.describe(...)      the report's sandbox line
    runner.close()

Two runners implement it: the Linux sandbox (grader.run.sandbox: bubblewrap, a
zygote, namespaces, seccomp), for grading; and the portable runner
(grader.run.portable: plain subprocesses), for a student's `check` on any platform,
which never receives the reference. grader.run.runners picks one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

GIB = 1024**3


@dataclass
class Limits:
    memory_bytes: int = 4 * GIB  # address space; torch alone maps ~0.7 GB
    cpu_seconds: int = 120  # per worker, a backstop behind the wall-clock timeouts
    file_bytes: int = 16 * 1024 * 1024
    open_files: int = 256
    check_seconds: float = 10.0
    setup_seconds: float = 30.0
    # Processes and threads of one submission's import-once process (the zygote's too):
    # an import that starts threads until it can start no more holds at most these, and
    # every other upload's import and workers are counted apart. Kept by a pids group of
    # its own where the sandbox has one (root), and by RLIMIT_NPROC in its user namespace
    # where the grader is not root.
    processes: int = 48
    # Processes and threads of one worker, kept the same two ways: a task that starts
    # threads without end holds at most these, and its siblings can still start.
    worker_processes: int = 16
    # Processor time for one submission, all its checks: past it the rest are 'timeout'.
    submission_seconds: float = 600.0
    # Wall clock for one submission, however busy the machine or idle the code: None gives
    # the last cap behind its processor time (worker_session.wall_cap). Where a platform kills the
    # grader at a wall-clock timeout (Gradescope, PrairieLearn, Autolab), the budget is
    # that promise: its checks end by then, and the results are written before the kill.
    submission_wall_seconds: float | None = None

    def rlimits(self, worker: bool = False, count_processes: bool = False) -> dict:
        """The resource limits of the process that imports a submission, or (worker=True)
        of a task's worker. A worker's processes are always capped here too; the importing
        process's where no pids group counts them (count_processes=True)."""
        nproc = self.worker_processes if worker else (self.processes if count_processes else None)
        return {
            "RLIMIT_AS": self.memory_bytes,
            "RLIMIT_CPU": self.cpu_seconds,
            "RLIMIT_FSIZE": self.file_bytes,
            "RLIMIT_NOFILE": self.open_files,
            "RLIMIT_CORE": 0,
            **({"RLIMIT_NPROC": nproc} if nproc is not None else {}),
        }


class RunnerRefused(RuntimeError):
    """A run this runner must not do (certified parts or hidden checks on a runner
    without isolation); the message says where such a run belongs."""


class ImportedPackage(Protocol):
    def worker(self): ...

    def close(self) -> None: ...


class Runner(Protocol):
    kind: str
    limits: Limits
    holds_reference: bool
    threads: int

    def start(self) -> "Runner": ...

    def worker(self): ...

    def package(self, sources: dict[str, str]) -> ImportedPackage | None: ...

    def describe(self, imported_once: bool | None = None) -> str: ...

    def close(self) -> None: ...
