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

from grader import KIT_ROOT
from grader.checks import catalogue
from grader.checks._api import Check, Task
from grader.run.feedback import (  # noqa: F401 - the statuses are the engine's vocabulary too
    ERROR, FAILED, FORBIDDEN, NOT_IMPLEMENTED, PASSED, TIMEOUT, Audience, checked_reply, failure_texts, judge_answer,
    remote_failure, as_text,
)
from grader.run.inside import wire
from grader.run.regions import find_regions, package_sources, strip
from grader.run.sandbox import Limits, Sandbox
from grader.run.scan_calls import scan
from grader.run.scan_tampering import scan_submission
from grader.run.submission import Submission
from grader.run.worker import WorkerFailed

ROOT = KIT_ROOT
REFERENCE_PACKAGE = ROOT / "solutions" / "hero_transformer"



@dataclass
class CheckResult:
    check: Check
    status: str
    diagnosis: str = ""  # what the student is shown
    output: str = ""  # what the student's code printed, shown only where no certified part ran beside it
    certified: tuple[str, ...] = ()  # the tasks whose reference stood in while this ran
    # Course staff only: the diagnosis with everything the student's code said in it
    # (exception messages, reprs, the line its traceback named) and all it printed.
    # Where certified parts ran beside the student's code, that code could read them, so
    # none of its words may reach the student; these fields keep them for staff.
    staff_diagnosis: str = ""
    staff_output: str = ""
    seconds: float = 0.0  # wall time of this check, its worker's start included (`grade --profile`)

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
        self._tasks_in = {rel: frozenset(region.task for region in find_regions(source, rel))
                          for rel, source in self.sources.items()}
        # Compiled once each: a module with every region kept, which most tasks' workers get,
        # and per task the certified parts as its workers get them.
        self._kept_code: dict[str, str] = {}
        self._certified: dict[str, dict[str, str]] = {}

    @classmethod
    @lru_cache(maxsize=1)
    def available(cls) -> "Reference | None":
        """The one reference a grading process uses (a class of uploads shares it), or
        None where solutions/ is absent, as in a student's copy of the course."""
        return cls() if (REFERENCE_PACKAGE / "__init__.py").exists() else None

    def without(self, task: str) -> dict[str, str]:
        """The certified parts' text for grading `task`: every region but its own."""
        return {rel: self._text(rel, task) for rel in self.sources}

    def _text(self, rel: str, task: str) -> str:
        return strip(self.sources[rel], {task} if task in self._tasks_in[rel] else set())

    def compiled_without(self, task: str) -> dict[str, str]:
        """without(task), each module compiled here and sent as marshalled code (the
        worker's interpreter is this one), so no worker spends its start compiling."""
        if task not in self._certified:
            self._certified[task] = {rel: self._compile(rel, task) if task in self._tasks_in[rel] else self._kept(rel)
                                     for rel in self.sources}
        return self._certified[task]

    def _kept(self, rel: str) -> str:
        if rel not in self._kept_code:
            self._kept_code[rel] = self._compile(rel, "")
        return self._kept_code[rel]

    def _compile(self, rel: str, task: str) -> str:
        return wire.pack_code(self._text(rel, task), f"certified/{rel}")

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




def _worker_request(task: Task, submission: Submission, reference: Reference | None, limits: Limits,
                    imported: bool = False) -> dict:
    regions = [{"task": t.name, "module": t.module, "qualname": t.qualname} for t in catalogue.tasks().values()]
    return {
        "task": task.name,
        "student": {} if imported else submission.sources,
        "certified": reference.compiled_without(task.name) if reference else None,
        "regions": regions,
        "needs": [task.module],
        "limits": limits.rlimits(worker=True),
        "tripwires": list(task.forbidden),
        "op_rules": {"ops": list(task.forbidden_ops), "no_autograd": task.no_autograd},
    }


def _start_worker(task, submission, reference, sandbox, deadline: float, audience: Audience,
                  imported=None):
    """A ready worker, or (None, failure) when the submission or the sandbox can't load;
    the failure is CheckResult's fields."""
    try:
        # A fork of the package imported once where there is one (the process may have
        # died since: then this task imports it itself, like any other without one).
        worker = None
        if imported is not None:
            try:
                worker = imported.worker()
            except WorkerFailed:
                imported = None
        worker = worker or sandbox.worker()
    except Exception as broken:  # noqa: BLE001 - whatever stops the sandbox costs this task only
        return None, {"status": ERROR, "diagnosis": f"the grader could not start a sandboxed process: {broken!r}"}
    try:
        ready = worker.start(_worker_request(task, submission, reference, sandbox.limits,
                                             imported=imported is not None),
                             max(0.5, min(sandbox.limits.setup_seconds, deadline - time.monotonic())))
    except WorkerFailed as failure:
        # A module that hangs or dies at import does so for every check: say it once.
        status = TIMEOUT if failure.status == "timeout" else ERROR
        texts = failure_texts(failure, audience, "loading the submission failed: ")
        if status == TIMEOUT:
            texts["diagnosis"] = (f"importing the package took longer than {sandbox.limits.setup_seconds:g} s: code "
                                  f"at module level runs every time the package is imported; an experiment or a "
                                  f"training run left there belongs under `if __name__ == \"__main__\":`")
        return None, {"status": status, **texts}
    if isinstance(ready, dict) and isinstance(ready.get("setup_error"), dict):
        status, shown, staff = remote_failure(task, ready["setup_error"], audience, loading=True)
        worker.close()
        output, staff_output = audience.output(worker.output.text())
        return None, {"status": ERROR if status == NOT_IMPLEMENTED else status,
                      "diagnosis": f"the submission could not be loaded: {shown}", "output": output,
                      "staff_diagnosis": f"the submission could not be loaded: {staff}", "staff_output": staff_output}
    if not isinstance(ready, dict) or ready.get("ready") is not True:
        worker.kill()
        output, staff_output = audience.output(worker.output.text())
        return None, {"status": ERROR, "diagnosis": "the process running the submission answered its start-up "
                      "with garbage", "output": output, "staff_output": staff_output}
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

    def __init__(self, task, submission, reference, sandbox, seed, deadline, imported=None, audience=None):
        self.task, self.submission, self.reference, self.sandbox, self.seed = task, submission, reference, sandbox, seed
        self.deadline, self.imported, self._audience = deadline, imported, audience
        self.worker = None
        self.setup_failure = None
        self.timeout_cap = sandbox.limits.check_seconds
        self.last_certified: tuple[str, ...] = ()

    def run(self, check: Check) -> CheckResult:
        if time.monotonic() >= self.deadline:
            self.drop_worker()
            return CheckResult(check, TIMEOUT, (
                f"the grading time for one submission ({self.sandbox.limits.submission_seconds:g} s) ran out before "
                f"this check ran: something is far too slow — often an experiment left at module level, which "
                f"runs every time the package is imported; put it under `if __name__ == \"__main__\":`"))
        generator = torch.Generator().manual_seed(self.seed + sum(map(ord, check.name)))
        inputs = check.make_inputs(generator)
        expected = check.expect(self.reference.modules, inputs) if (check.expect and self.reference) else None
        sent = {key: value for key, value in inputs.items() if not key.startswith("_")}
        try:
            if check.separately:
                first = check.separately[0]
                runs = [(name, {**{k: v for k, v in sent.items() if k not in check.separately}, first: sent[name]})
                        for name in check.separately]
                reply = self.call_separately(check, runs)
            elif check.parts:
                reply = self.call_separately(check, [(part, {**sent, "part": part}) for part in check.parts],
                                             merge=True)
            else:
                reply = self.call(check, sent)
        except _SetupFailed:
            return CheckResult(check, **self.setup_failure)
        except WorkerFailed as failure:
            self.drop_worker()
            if failure.status == "timeout":
                # Code that hung once will most likely hang again: don't wait as long twice.
                self.timeout_cap = min(self.timeout_cap, 2.0)
            status = {"timeout": TIMEOUT, "tampered": FORBIDDEN}.get(failure.status, ERROR)
            return CheckResult(check, status, **failure_texts(failure, self.audience))
        status, diagnosis, staff = judge_answer(check, self.task, reply, inputs, expected, self.audience)
        certified = self.worker.certified if self.worker is not None else self.last_certified
        return CheckResult(check, status, diagnosis, certified=certified, staff_diagnosis=staff)

    @property
    def audience(self) -> Audience:
        if self._audience is None:
            self._audience = Audience(self.submission, self.reference)
        return self._audience

    def call(self, check: Check, sent: dict) -> dict:
        if self.worker is None and self.setup_failure is None:
            self.worker, self.setup_failure = _start_worker(self.task, self.submission, self.reference, self.sandbox,
                                                            self.deadline, self.audience, self.imported)
        if self.setup_failure:
            raise _SetupFailed()
        return checked_reply(self.worker.call(check.probe.__module__.removeprefix("grader.checks."), check.probe.__name__,
                                             sent, max(0.5, min(check.timeout, self.timeout_cap,
                                                                self.deadline - time.monotonic()))))

    def call_separately(self, check: Check, runs: list[tuple[str, dict]], merge: bool = False) -> dict:
        """Each run in a fresh worker; the results gathered by name (merge=True: the parts'
        dict results merged into one, each later part told the earlier results)."""
        gathered, merged, certified = {}, {}, ()
        for name, inputs in runs:
            self.drop_worker()
            if merge:
                inputs = {**inputs, "earlier": dict(gathered)}
            reply = self.call(check, inputs)
            if "result" not in reply or reply.get("forbidden_calls"):
                return reply
            gathered[name] = reply["result"]
            if merge:
                if not isinstance(reply["result"], dict):
                    return {"result": reply["result"], "forbidden_calls": []}
                merged.update(reply["result"])
            certified = self.worker.certified
        self.drop_worker()
        self.last_certified = certified
        return {"result": merged if merge else gathered, "forbidden_calls": []}

    def drop_worker(self):
        if self.worker is not None:
            self.worker.kill()
        self.worker = None

    def finish(self, ran: list[CheckResult]):
        """Ends the last worker and gives what it printed to the last check it ran."""
        if self.worker is not None:
            # Ended first, so its output pipe reaches end-of-file and the tail holds all it
            # printed: reading before that raced the thread that drains the pipe.
            self.worker.close()
            output = self.worker.output.text(wait=2.0)
            if output and ran:
                shown, staff = self.audience.output(output)
                ran[-1].output = ran[-1].output or shown
                ran[-1].staff_output = ran[-1].staff_output or staff


def grade_task(task: Task, checks: list[Check], submission: Submission, reference: Reference | None,
               sandbox: Sandbox, seed: int, scan_for_tampering: bool = True,
               deadline: float | None = None, imported=None, audience: Audience | None = None) -> list[CheckResult]:
    """Grade one task's checks. Never raises: every failure is a check status.
    (scan_for_tampering=False lets tests reach the layers behind the static scan.)"""
    try:
        tampering = scan_submission(submission.sources) if scan_for_tampering else []
        hits = scan(submission.sources.get(f"{task.module}.py", ""), task.qualname, task.forbidden,
                    task.forbidden_methods)
    except Exception as error:  # noqa: BLE001 - a scan that breaks costs this task, never the submission
        return [CheckResult(c, ERROR, f"the grader failed while reading the submission; please report it "
                                      f"({type(error).__name__})") for c in checks]
    if tampering:
        reason = (f"the submission reaches into the grader or the interpreter's machinery ({tampering[0]}); "
                  f"no task may do that — remove it")
        return [CheckResult(c, FORBIDDEN, reason) for c in checks]
    if hits:
        reason = f"{task.qualname} uses {hits[0]} — the point of this task is to write it yourself"
        return [CheckResult(c, FORBIDDEN, reason) for c in checks]
    deadline = time.monotonic() + sandbox.limits.submission_seconds if deadline is None else deadline
    run, ran = _TaskRun(task, submission, reference, sandbox, seed, deadline, imported, audience), []
    # Checks that run in workers of their own go first: the rest then share one worker,
    # where after them a check would need a new one. The report keeps the catalogue's order.
    for check in sorted(checks, key=lambda c: not (c.separately or c.parts)):
        try:
            started = time.perf_counter()
            ran.append(run.run(check))
            ran[-1].seconds = time.perf_counter() - started
        except Exception as error:  # noqa: BLE001 - a grader bug must cost one check, not the run
            run.drop_worker()
            ran.append(CheckResult(check, ERROR, f"the grader failed on this check; please report it "
                                                 f"({type(error).__name__}: {as_text(error, 300)})"))
    run.finish(ran)
    by_check = {id(result.check): result for result in ran}
    return [by_check[id(check)] for check in checks]


def _workers_needed(checks: list[Check]) -> int:
    """How many workers a task's checks start: one, plus one per side of each comparison."""
    return 1 + sum(len(c.separately) + len(c.parts) for c in checks)


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
    # The grading threads are the parallelism here: torch's own helper threads beside them
    # only contend for the same cores (and spin while they wait). One thread per op also
    # computes the expected values as the sandbox computes the answers.
    torch.set_num_threads(1)
    if reference is not None:
        reference.modules  # import it once here, not from two grading threads at once
    deadline = time.monotonic() + sandbox.limits.submission_seconds
    # Scanned once, before the threads (the scan caches what it finds per upload).
    try:
        scan_submission(submission.sources)
    except Exception:  # noqa: BLE001 - each task reports a failing scan itself
        pass
    # The package imported once for all tasks, where the sandbox can seal that process.
    imported = sandbox.submission_process(submission.sources) if plan and submission.sources else None
    pool = ThreadPoolExecutor(max_workers=parallel)
    try:
        # The costliest tasks (most workers to start) first, so two threads finish together;
        # the report keeps the catalogue's order.
        order = sorted(range(len(plan)), key=lambda i: -_workers_needed(plan[i][1]))
        # One audience for the upload: what of the reference it does not hold is worked out once.
        audience = Audience(submission, reference)
        futures = {i: pool.submit(grade_task, *plan[i], submission, reference, sandbox, seed, deadline=deadline,
                                  imported=imported, audience=audience) for i in order}
        results = []
        for i in range(len(plan)):
            results.extend(futures[i].result())
        pool.shutdown()
    except BaseException:
        # Ctrl-C (or anything else): drop what has not started; closing the sandbox ends the rest.
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        described = sandbox.describe(imported_once=imported is not None)
        if imported is not None:
            imported.close()
        if own_sandbox:
            sandbox.close()
    certified = ("the reference, for every task but the one graded" if reference
                 else "none available: each task uses your own code for the parts it builds on")
    return GradeReport(submission.label, results, described, certified, time.perf_counter() - started)
