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
from dataclasses import dataclass
from functools import lru_cache
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
from grader.tamper import scan_submission

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
        self._without: dict[str, dict[str, str]] = {}

    @classmethod
    @lru_cache(maxsize=1)
    def available(cls) -> "Reference | None":
        """The one reference a grading process uses (a class of uploads shares it), or
        None where solutions/ is absent, as in a student's copy of the course."""
        return cls() if (REFERENCE_PACKAGE / "__init__.py").exists() else None

    def without(self, task: str) -> dict[str, str]:
        """The certified parts for grading `task`: every region but its own."""
        if task not in self._without:
            self._without[task] = {rel: strip(source, {task}) for rel, source in self.sources.items()}
        return self._without[task]

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


def _text(value, limit: int = 600) -> str:
    return (value if isinstance(value, str) else repr(value))[:limit]


def _remote_failure(task: Task, error: dict) -> tuple[str, str]:
    kind, message, where, line = (_text(error.get(k, "")) for k in ("type", "message", "where", "line"))
    at = f" ({where}: {line})" if where and line else (f" ({where})" if where else "")
    if error.get("not_implemented") is True:
        if message.strip("'\"") == task.name:
            return NOT_IMPLEMENTED, f"{task.qualname} still raises NotImplementedError"
        return ERROR, (f"it needs '{message.strip(chr(39) + chr(34))}', which is not implemented yet"
                       if message else f"NotImplementedError{at}")
    if kind == "ForbiddenCall":
        return FORBIDDEN, message
    return ERROR, f"{kind}: {message}{at}"


def _check_reply(reply) -> dict:
    """Replies are data the submission could have written itself: take only their shape."""
    if not isinstance(reply, dict) or not ({"result", "error"} & reply.keys()):
        raise WorkerFailed("garbage", "the process answered with something that is not a probe result")
    calls = reply.get("forbidden_calls", [])
    if not isinstance(calls, list) or not all(isinstance(c, str) for c in calls):
        raise WorkerFailed("garbage", "the process answered with a malformed list of forbidden calls")
    if "error" in reply and not isinstance(reply["error"], dict):
        raise WorkerFailed("garbage", "the process answered with a malformed error")
    if reply.get("tampered"):
        raise WorkerFailed("tampered", f"the grader's probe code was changed while the submission ran "
                                       f"({_text(reply['tampered'], 200)})")
    return reply


def _judge(check: Check, task: Task, reply: dict, inputs: dict, expected) -> tuple[str, str]:
    if reply.get("forbidden_calls"):
        return FORBIDDEN, f"calls {reply['forbidden_calls'][0][:200]}, the library function this task asks you to write"
    if "error" in reply:
        return _remote_failure(task, reply["error"])
    result = reply.get("result")
    if isinstance(result, (RemoteError, Opaque)):
        return FAILED, f"the output does not have the expected form: {_text(result, 300)}"
    try:
        diagnosis = check.judge(result, inputs, expected)
    except Exception as error:  # noqa: BLE001 - whatever came back, it is the submission's answer
        return FAILED, f"the output does not have the expected form ({type(error).__name__}: {_text(error, 300)})"
    return (PASSED, "") if diagnosis is None else (FAILED, str(diagnosis))


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
        "op_rules": {"ops": list(task.forbidden_ops), "no_autograd": task.no_autograd},
    }


def _start_worker(task, submission, reference, sandbox):
    """A ready worker, or (None, failure) when the submission or the sandbox can't load."""
    try:
        worker = sandbox.worker()
    except Exception as broken:  # noqa: BLE001 - whatever stops the sandbox costs this task only
        return None, (ERROR, f"the grader could not start a sandboxed process: {broken!r}", "")
    try:
        ready = worker.start(_worker_request(task, submission, reference, sandbox.limits),
                             sandbox.limits.setup_seconds)
    except WorkerFailed as failure:
        # A module that hangs or dies at import does so for every check: say it once.
        status = TIMEOUT if failure.status == "timeout" else ERROR
        return None, (status, f"loading the submission failed: {failure.reason}", failure.output)
    if isinstance(ready, dict) and isinstance(ready.get("setup_error"), dict):
        status, reason = _remote_failure(task, ready["setup_error"])
        worker.close()
        return None, (ERROR if status == NOT_IMPLEMENTED else status,
                      f"the submission could not be loaded: {reason}", worker.output.text())
    if not isinstance(ready, dict) or ready.get("ready") is not True:
        worker.kill()
        return None, (ERROR, "the process running the submission answered its start-up with garbage",
                      worker.output.text())
    # Only names the grader knows: the worker's list is a hint, never text to echo.
    known = catalogue.tasks()
    claimed = ready.get("certified") if isinstance(ready.get("certified"), list) else []
    worker.certified = tuple(sorted({t for t in claimed if isinstance(t, str) and t in known and t != task.name}))
    return worker, None


class _SetupFailed(Exception):
    """The task's worker could not be started; run.setup_failure says why."""


class _TaskRun:
    """One task's checks, run one at a time on a worker; after any failure the next
    check gets a fresh worker."""

    def __init__(self, task, submission, reference, sandbox, seed):
        self.task, self.submission, self.reference, self.sandbox, self.seed = task, submission, reference, sandbox, seed
        self.worker = None
        self.setup_failure = None
        self.timeout_cap = sandbox.limits.check_seconds
        self.last_certified: tuple[str, ...] = ()

    def run(self, check: Check) -> CheckResult:
        generator = torch.Generator().manual_seed(self.seed + sum(map(ord, check.name)))
        inputs = check.make_inputs(generator)
        expected = check.expect(self.reference.modules, inputs) if (check.expect and self.reference) else None
        sent = {key: value for key, value in inputs.items() if not key.startswith("_")}
        try:
            if check.separately:
                reply = self.call_separately(check, sent)
            else:
                reply = self.call(check, sent)
        except _SetupFailed:
            return CheckResult(check, *self.setup_failure)
        except WorkerFailed as failure:
            self.drop_worker()
            if failure.status == "timeout":
                # Code that hung once will most likely hang again: don't wait as long twice.
                self.timeout_cap = min(self.timeout_cap, 2.0)
            status = {"timeout": TIMEOUT, "tampered": FORBIDDEN}.get(failure.status, ERROR)
            return CheckResult(check, status, failure.reason, failure.output)
        status, diagnosis = _judge(check, self.task, reply, inputs, expected)
        certified = self.worker.certified if self.worker is not None else self.last_certified
        return CheckResult(check, status, diagnosis, certified=certified)

    def call(self, check: Check, sent: dict) -> dict:
        if self.worker is None and self.setup_failure is None:
            self.worker, self.setup_failure = _start_worker(self.task, self.submission, self.reference, self.sandbox)
        if self.setup_failure:
            raise _SetupFailed()
        return _check_reply(self.worker.call(check.probe.__module__.rsplit(".", 1)[-1], check.probe.__name__,
                                             sent, min(check.timeout, self.timeout_cap)))

    def call_separately(self, check: Check, sent: dict) -> dict:
        """One fresh worker per input in check.separately; the results gathered by name."""
        gathered, certified = {}, ()
        first = check.separately[0]
        for name in check.separately:
            self.drop_worker()
            one = {k: v for k, v in sent.items() if k not in check.separately}
            one[first] = sent[name]
            reply = self.call(check, one)
            if "result" not in reply or reply.get("forbidden_calls"):
                return reply
            gathered[name] = reply["result"]
            certified = self.worker.certified
        self.drop_worker()
        self.last_certified = certified
        return {"result": gathered, "forbidden_calls": []}

    def drop_worker(self):
        if self.worker is not None:
            self.worker.kill()
        self.worker = None

    def finish(self, results: list[CheckResult]):
        if self.worker is not None:
            output = self.worker.output.text(wait=0.0)
            self.worker.close()
            if output and results:
                results[-1].output = results[-1].output or output


def grade_task(task: Task, checks: list[Check], submission: Submission, reference: Reference | None,
               sandbox: Sandbox, seed: int, scan_for_tampering: bool = True) -> list[CheckResult]:
    """Grade one task's checks. Never raises: every failure is a check status.
    (scan_for_tampering=False lets tests reach the layers behind the static scan.)"""
    tampering = scan_submission(submission.sources) if scan_for_tampering else []
    if tampering:
        reason = (f"the submission reaches into the grader or the interpreter's machinery ({tampering[0]}); "
                  f"no task may do that — remove it")
        return [CheckResult(c, FORBIDDEN, reason) for c in checks]
    hits = scan(submission.sources.get(f"{task.module}.py", ""), task.qualname, task.forbidden, task.forbidden_methods)
    if hits:
        reason = f"{task.qualname} uses {hits[0]} — the point of this task is to write it yourself"
        return [CheckResult(c, FORBIDDEN, reason) for c in checks]
    run, results = _TaskRun(task, submission, reference, sandbox, seed), []
    for check in checks:
        try:
            results.append(run.run(check))
        except Exception as error:  # noqa: BLE001 - a grader bug must cost one check, not the run
            run.drop_worker()
            results.append(CheckResult(check, ERROR, f"the grader failed on this check; please report it "
                                                     f"({type(error).__name__}: {_text(error, 300)})"))
    run.finish(results)
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
          use_reference: bool = True) -> GradeReport:
    started = time.perf_counter()
    reference = Reference.available() if use_reference else None
    seed = secrets.randbelow(2**31) if seed is None else seed
    plan = select_checks(chapters, public_only)
    own_sandbox = sandbox is None
    sandbox = sandbox or Sandbox(Limits())
    parallel = parallel or max(1, min(2, os.cpu_count() or 1))
    if reference is not None:
        reference.modules  # import it once here, not from two grading threads at once
    pool = ThreadPoolExecutor(max_workers=parallel)
    try:
        futures = [pool.submit(grade_task, task, checks, submission, reference, sandbox, seed)
                   for task, checks in plan]
        results = []
        for future in futures:
            results.extend(future.result())
        pool.shutdown()
    except BaseException:
        # Ctrl-C (or anything else): drop what has not started; closing the sandbox ends the rest.
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        described = sandbox.describe()
        if own_sandbox:
            sandbox.close()
    certified = ("the reference, for every task but the one graded" if reference
                 else "none available: each task uses your own code for the parts it builds on")
    return GradeReport(submission.label, results, described, certified, time.perf_counter() - started)
