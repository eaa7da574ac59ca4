"""The check engine shared by `make check` (public checks) and `make grade` (all).

For each task: scan the student's function for forbidden calls, fork a sandboxed
worker holding the student's package plus the certified parts minus this task, send
it one probe at a time, and judge each answer here, where the reference and the
expected values live. Nothing the worker does can stop the run: every failure turns
into a check status with a reason.
"""

from __future__ import annotations

import os
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import torch

from grader import catalogue
from grader.checks._api import Check, Task
from grader.forbidden import scan
from grader.inside.wire import Opaque, RemoteError
from grader.regions import package_sources, strip
from grader.sandbox import Limits, Sandbox, WorkerFailed
from grader.submission import Submission

ROOT = Path(__file__).resolve().parent.parent
REFERENCE_PACKAGE = ROOT / "solutions" / "hero_transformer"

PASSED, FAILED, ERROR, TIMEOUT, NOT_IMPLEMENTED, FORBIDDEN = (
    "passed", "failed", "error", "timeout", "not implemented", "forbidden")


@dataclass
class CheckResult:
    check: Check
    status: str
    diagnosis: str = ""
    output: str = ""  # an excerpt of what the student's code printed
    certified: tuple[str, ...] = ()  # the tasks whose reference stood in while this ran

    @property
    def score(self) -> float:
        return self.check.points if self.status == PASSED else 0.0


@dataclass
class GradeReport:
    submission: str
    results: list[CheckResult]
    sandbox: str
    certified: str
    elapsed: float = 0.0
    problem: str = ""  # a submission-level problem (no package found, ...)
    chapters: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        return sum(r.score for r in self.results)

    @property
    def max_score(self) -> float:
        return sum(r.check.points for r in self.results)


# ------------------------------------------------------------------ the reference


class Reference:
    """The reference package, imported in the grader's process only."""

    def __init__(self, root: Path = REFERENCE_PACKAGE):
        self.root = root
        self.sources = package_sources(root)
        self._modules = None

    @classmethod
    def available(cls) -> "Reference | None":
        return cls() if (REFERENCE_PACKAGE / "__init__.py").exists() else None

    def without(self, task: str) -> dict[str, str]:
        """The certified parts for grading `task`: every region but its own."""
        return {rel: strip(source, {task}) for rel, source in self.sources.items()}

    @property
    def modules(self) -> SimpleNamespace:
        if self._modules is None:
            import importlib.util
            import sys

            name = "_reference_hero_transformer"
            spec = importlib.util.spec_from_file_location(name, self.root / "__init__.py",
                                                          submodule_search_locations=[str(self.root)])
            package = importlib.util.module_from_spec(spec)
            sys.modules[name] = package
            spec.loader.exec_module(package)
            loaded = {}
            for rel in self.sources:
                if rel != "__init__.py" and "/" not in rel:
                    loaded[rel[:-3]] = importlib.import_module(f"{name}.{rel[:-3]}")
            self._modules = SimpleNamespace(**loaded)
        return self._modules


# ---------------------------------------------------------------------- grading


def _remote_failure(task: Task, error: dict) -> tuple[str, str]:
    kind, message, where = error.get("type"), error.get("message", ""), error.get("where")
    at = f" ({where}: {error['line']})" if where and error.get("line") else (f" ({where})" if where else "")
    if error.get("not_implemented"):
        if message.strip("'\"") == task.name:
            return NOT_IMPLEMENTED, f"{task.qualname} still raises NotImplementedError"
        return ERROR, (f"it needs '{message.strip(chr(39) + chr(34))}', which is not implemented yet"
                       if message else f"NotImplementedError{at}")
    if kind == "ForbiddenCall":
        return FORBIDDEN, message
    return ERROR, f"{kind}: {message}{at}"


def _judge(check: Check, task: Task, reply: dict, inputs: dict, expected) -> tuple[str, str]:
    if reply.get("forbidden_calls"):
        return FORBIDDEN, f"calls {reply['forbidden_calls'][0]}, the library function this task asks you to write"
    if "error" in reply:
        return _remote_failure(task, reply["error"])
    result = reply.get("result")
    try:
        diagnosis = check.judge(result, inputs, expected)
    except (TypeError, KeyError, IndexError, AttributeError, ValueError, RuntimeError) as error:
        return FAILED, f"the output does not have the expected form ({type(error).__name__}: {error})"
    if isinstance(result, (RemoteError, Opaque)):
        return FAILED, f"the output does not have the expected form: {result!r}"
    return (PASSED, "") if diagnosis is None else (FAILED, diagnosis)


def _worker_request(task: Task, submission: Submission, reference: Reference | None, limits: Limits) -> dict:
    regions = [{"task": t.name, "module": t.module, "qualname": t.qualname} for t in catalogue.tasks().values()]
    return {
        "task": task.name,
        "student": submission.sources,
        "certified": reference.without(task.name) if reference else None,
        "regions": regions,
        "needs": [task.module],
        "limits": limits.rlimits(),
        "tripwires": list(task.forbidden),
    }


def _start_worker(task, submission, reference, sandbox):
    """A ready worker, or (None, failure) when the submission or the sandbox can't load."""
    try:
        worker = sandbox.worker()
    except (RuntimeError, OSError) as broken:
        return None, (ERROR, f"the grader could not start a sandboxed process: {broken}", "")
    ready = worker.start(_worker_request(task, submission, reference, sandbox.limits), sandbox.limits.setup_seconds)
    if "setup_error" in ready:
        status, reason = _remote_failure(task, ready["setup_error"])
        worker.close()
        return None, (ERROR if status == NOT_IMPLEMENTED else status,
                      f"the submission could not be loaded: {reason}", worker.output.text())
    worker.certified = tuple(ready.get("certified") or ())
    return worker, None


def grade_task(task: Task, checks: list[Check], submission: Submission, reference: Reference | None,
               sandbox: Sandbox, seed: int) -> list[CheckResult]:
    source = submission.sources.get(f"{task.module}.py", "")
    hits = scan(source, task.qualname, task.forbidden, task.forbidden_methods)
    if hits:
        reason = f"{task.qualname} uses {hits[0]} — the point of this task is to write it yourself"
        return [CheckResult(c, FORBIDDEN, reason) for c in checks]
    results: list[CheckResult] = []
    worker, setup_failure = None, None
    timeout_cap = sandbox.limits.check_seconds
    for check in checks:
        generator = torch.Generator().manual_seed(seed + sum(map(ord, check.name)))
        inputs = check.make_inputs(generator)
        expected = check.expect(reference.modules, inputs) if (check.expect and reference) else None
        sent = {key: value for key, value in inputs.items() if not key.startswith("_")}
        try:
            if worker is None and setup_failure is None:
                worker, setup_failure = _start_worker(task, submission, reference, sandbox)
            if setup_failure:
                results.append(CheckResult(check, *setup_failure))
                continue
            reply = worker.call(check.probe.__module__.rsplit(".", 1)[-1], check.probe.__name__, sent,
                                min(check.timeout, timeout_cap))
        except WorkerFailed as failure:
            worker = None  # it was killed; the next check gets a fresh one
            status = TIMEOUT if failure.status == "timeout" else ERROR
            if status == TIMEOUT:
                # Code that hung once will most likely hang again: don't wait as long twice.
                timeout_cap = min(timeout_cap, 2.0)
            results.append(CheckResult(check, status, failure.reason, failure.output))
            continue
        status, diagnosis = _judge(check, task, reply, inputs, expected)
        results.append(CheckResult(check, status, diagnosis, certified=getattr(worker, "certified", ())))
    if worker is not None:
        output = worker.output.text(wait=0.0)
        worker.close()
        if output and results:
            results[-1].output = results[-1].output or output
    return results


def select_checks(chapters: list[str] | None, public_only: bool) -> list[tuple[Task, list[Check]]]:
    plan = []
    for chapter in catalogue.chapters():
        if chapters and chapter.number not in chapters:
            continue
        for task in chapter.tasks:
            checks = [c for c in chapter.checks if c.task == task.name and not (public_only and c.hidden)]
            if checks:
                plan.append((task, checks))
    return plan


def possible_points(chapters: list[str] | None = None, public_only: bool = False) -> float:
    return sum(c.points for _, checks in select_checks(chapters, public_only) for c in checks)


def grade(submission: Submission, chapters: list[str] | None = None, public_only: bool = False,
          sandbox: Sandbox | None = None, seed: int | None = None, parallel: int | None = None,
          use_reference: bool = True, progress=None) -> GradeReport:
    started = time.perf_counter()
    reference = Reference.available() if use_reference else None
    seed = secrets.randbelow(2**31) if seed is None else seed
    plan = select_checks(chapters, public_only)
    own_sandbox = sandbox is None
    sandbox = sandbox or Sandbox(Limits())
    parallel = parallel or max(1, min(2, os.cpu_count() or 1))
    try:
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            futures = [pool.submit(grade_task, task, checks, submission, reference, sandbox, seed)
                       for task, checks in plan]
            results = []
            for future in futures:
                results.extend(future.result())
                if progress:
                    progress()
    finally:
        if own_sandbox:
            sandbox.close()
    certified = ("the reference, for every task but the one graded" if reference
                 else "none available: each task uses your own code for the parts it builds on")
    return GradeReport(submission.label, results, sandbox.describe(), certified,
                       time.perf_counter() - started, chapters=[c.number for c in catalogue.chapters()
                                                                if not chapters or c.number in chapters])
