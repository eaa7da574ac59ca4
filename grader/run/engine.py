"""The check engine shared by `make check` (public checks) and `make grade` (all).

For each task: scan the student's function for forbidden calls, fork a sandboxed
worker holding the student's package plus the certified parts minus this task, send
it one probe at a time, and judge each answer here, where the reference and the
expected values live. Nothing the worker does can stop the run: every failure turns
into a check status with a reason.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import torch

from grader.checks import catalogue
from grader.checks._api import NOTHING_COMPUTED, OWN_PARTS, Check, OwnPartsVerdict, Task, precision_known
from grader.run.dependencies import build_order, task_graph, task_groups, worker_holdings
from grader.run.inside import op_rules, sealed
from grader.run.inside.messages import (ProbeCall, ProbeReply, Region, SetupFailed, TaskRequest,
                                        TaskRules, WorkerStatus)
from grader.run.inside.tasks import standard_exceptions
from grader.run.feedback import (Audience, as_text, checked_reply, error_verdict, failure_texts, judge_answer,
                                 remote_failure)
from grader.run.processes import Limits, Runner, RunnerRefused
from grader.run.profile import PHASES
from grader.run.runners import WHERE_GRADING_RUNS, open_runner
from grader.run.reference import Reference
from grader.run.results import (COMPUTED, ERROR, FAILED, FORBIDDEN, GRADER_FAILED, LOAD_FAILED, NOT_IMPLEMENTED,
                                PASSED, RAISED, RUNNER_FAILED, TIMEOUT, TRIVIAL, WAITING, CheckResult, GradeReport,
                                with_slots)
from grader.run.scan_calls import scan
from grader.run.stopping import joined, result_of, whole
from grader.run.scan_tampering import scan_submission, tampering_reason
from grader.run.submission import Submission
from grader.run.worker import TimeLimit, WorkerFailed




# ---------------------------------------------------------------------- grading

INFRASTRUCTURE = "the grader could not run this check: regrade"


@dataclass
class Grading:
    """What every task of one grading shares: the upload, the certified parts (None where
    the student's own parts stand in), the runner, the seed hidden inputs are drawn from,
    when the upload's time runs out, the package imported once (None: each worker imports
    it) and who reads the report (feedback.Audience)."""

    submission: Submission
    reference: Reference | None
    runner: Runner
    seed: int
    # time.monotonic() past which the upload's wall-clock cap is reached (0: from the runner's
    # limit); its budget proper is processor time, Limits.submission_seconds of it (spent).
    deadline: float = 0.0
    imported: object = None
    audience: Audience | None = None
    # Tasks whose code hung on a check. Where no certified part stands in, a task that runs
    # one of them as its own part will most likely hang as well: its checks don't wait long.
    hung: set = dataclasses.field(default_factory=set)
    # Each check's inputs and expected values, computed once, by whoever comes first.
    answers: "Answers | None" = None

    def __post_init__(self):
        if self.answers is None:
            self.answers = Answers(self.seed, self.reference)
        if not self.deadline:
            self.deadline = submission_deadline(self.runner.limits)
        if self.audience is None:
            self.audience = Audience(self.submission, self.reference)
        self._spent_lock = threading.Lock()
        self.spent = 0.0  # processor seconds the upload's workers used so far

    def charge(self, worker, before: float) -> None:
        """Add to the upload's budget what `worker` used since its count stood at `before`."""
        with self._spent_lock:
            self.spent += max(0.0, worker.spent - before)

    def time_left(self) -> float:
        """Processor seconds the upload may still use (never past its wall-clock cap)."""
        if time.monotonic() >= self.deadline:
            return 0.0
        return self.runner.limits.submission_seconds - self.spent


def wall_cap(seconds: float) -> float:
    """The wall-clock cap behind a budget of `seconds` of processor time, where a
    starved process has had its second cap (TimeLimit)."""
    return seconds * TimeLimit.CAPS[-1]


def submission_deadline(limits) -> float:
    """time.monotonic() past which no check of the upload runs on: its own wall-clock
    limit where one is set (a platform's timeout), else the cap behind its processor time."""
    return time.monotonic() + (limits.submission_wall_seconds or wall_cap(limits.submission_seconds))


def _holds(tasks: list[Task]) -> tuple[frozenset, dict[str, tuple[str, ...]]]:
    """What a worker grading `tasks` holds of the reference: the parts they build on
    (dependencies.worker_holdings), none of the tasks themselves; and each part's guard,
    the tasks that may run it (its code refuses any other: grader/run/inside/sealed.py).
    A task may run a part taught after it (catalogue order, the lessons') from its probes
    only, never from its own code: `task/probes`. A part only some of a group's tasks
    hold refuses the others."""
    holdings = worker_holdings([t.name for t in tasks])
    names = {t.name for t in tasks}
    held = frozenset().union(*(holdings.get(t.name, ()) for t in tasks)) - names
    taught = {name: i for i, name in enumerate(catalogue.tasks())}
    guards = {part: tuple(sorted(t.name if taught[part] < taught[t.name] else t.name + sealed.PROBES_ONLY
                                 for t in tasks if part in holdings.get(t.name, ())))
              for part in held}
    return held, guards


def _rules(task: Task) -> TaskRules:
    return TaskRules(tripwires=list(task.forbidden), ops=list(task.forbidden_ops), no_autograd=task.no_autograd)


def _worker_request(task: Task, submission: Submission, reference: Reference | None, limits: Limits,
                    imported: bool = False, fresh: bool = False, group: list[Task] | None = None) -> TaskRequest:
    """The task's request to a new worker. `fresh`: the package must be imported anew for
    it, never reused from an earlier task (a runner that keeps processes between tasks
    honours it; a forked worker is fresh anyway)."""
    held, guards = _holds(group or [task])
    return TaskRequest(
        task=task.name,
        student={} if imported else dict(submission.sources),
        certified=reference.compiled_for(held, guards) if reference else None,
        certify=sorted(held) if reference else [],
        regions=[Region(t.name, t.module, t.qualname) for t in catalogue.tasks().values()],
        needs=sorted({t.module for t in group}) if group else [task.module],
        limits=limits.rlimits(worker=True),
        rules=None if group else _rules(task),
        group={t.name: _rules(t) for t in group} if group else None,
        fresh=fresh,
    )


def _start_worker(task: Task, grading: Grading, fresh: bool = False, group: list[Task] | None = None):
    """A ready worker, or (None, failure) when the submission or the runner can't load;
    the failure is CheckResult's fields."""
    with PHASES.phase("worker starts"):
        return _started_worker(task, grading, fresh, group)


def _started_worker(task: Task, grading: Grading, fresh: bool, group: list[Task] | None):
    submission, reference, runner = grading.submission, grading.reference, grading.runner
    audience, imported = grading.audience, grading.imported
    try:
        # A fork of the package imported once where there is one (the process may have
        # died since: then this task imports it itself, like any other without one).
        worker = None
        if imported is not None:
            try:
                worker = imported.worker()
            except WorkerFailed:
                imported = None
        worker = worker or runner.worker()
    except Exception as broken:  # noqa: BLE001 - whatever stops the runner costs this task only
        # The machine or the sandbox had no process for it (the runner tried again first):
        # the grader's failure, never the student's, and a rerun grades it again.
        return None, {"status": ERROR, "diagnosis": INFRASTRUCTURE,
                      "staff_diagnosis": f"{INFRASTRUCTURE} (no sandboxed process could start: {broken!r})",
                      "cause": RUNNER_FAILED, "verdict": {"kind": "runner_failed"}}
    worker.grading_ends = grading.deadline  # no answer is awaited past the upload's own end
    spent_before = worker.spent
    try:
        ready = worker.start(_worker_request(task, submission, reference, runner.limits,
                                             imported=imported is not None, fresh=fresh, group=group),
                             max(0.5, min(runner.limits.setup_seconds, grading.time_left())))
    except WorkerFailed as failure:
        grading.charge(worker, spent_before)
        if failure.status is WorkerStatus.BUSY:
            return None, _busy(failure)
        # A module that hangs or dies at import does so for every check: say it once.
        status = TIMEOUT if failure.status is WorkerStatus.TIMEOUT else ERROR
        texts = failure_texts(failure, audience, "loading the submission failed: ")
        if status == TIMEOUT:
            texts["diagnosis"] = (f"importing the package took longer than {runner.limits.setup_seconds:g} s: code "
                                  f"at module level runs every time the package is imported; an experiment or a "
                                  f"training run left there belongs under `if __name__ == \"__main__\":`")
        verdict = ({"kind": "timeout", "task": task.name, "during": "import"} if status == TIMEOUT
                   else {"kind": "load_failed", "file": "", "line": None, "error": ""})
        return None, {"status": status, **texts, "cause": LOAD_FAILED, "verdict": verdict}
    grading.charge(worker, spent_before)
    if isinstance(ready, SetupFailed):
        status, shown, staff = remote_failure(task, ready.error, audience, loading=True)
        verdict = error_verdict(task, ready.error, audience, loading=True)
        worker.close()
        output, staff_output = audience.output(worker.output.text())
        return None, {"status": ERROR if status == NOT_IMPLEMENTED else status,
                      "diagnosis": f"the submission could not be loaded: {shown}", "output": output,
                      "staff_diagnosis": f"the submission could not be loaded: {staff}", "staff_output": staff_output,
                      "cause": LOAD_FAILED, "verdict": verdict}
    # What the grader sent, where the upload has the part's file: never the worker's own
    # list, which the code could shorten at will to say something in the report.
    held, _ = _holds(group or [task]) if reference is not None else (frozenset(), {})
    known = catalogue.tasks()
    worker.certified = tuple(sorted(t for t in held if f"{known[t].module}.py" in submission.sources))
    return worker, None


def inputs_and_expected(check: Check, seed: int, reference: Reference | None) -> tuple[dict, object]:
    """A check's inputs, drawn from the grading's seed and the check's name (so the same
    whenever and on whichever thread they are drawn), and the reference's answer to them."""
    generator = torch.Generator().manual_seed(seed + sum(map(ord, check.name)))
    with PHASES.phase("inputs"):
        inputs = check.make_inputs(generator)
    with PHASES.phase("expected values"):
        expected = check.expect(reference.modules, inputs) if (check.expect and reference) else None
    return inputs, expected


class Answers:
    """Each check's inputs and expected values, computed once by whichever comes first:
    the thread that grades the check, or work done ahead of it — while the sandbox boots,
    and on a thread of its own that walks the plan while workers compute (the grader
    works out the next check's answer as a worker runs this one). Either way a check
    gets what inputs_and_expected gives it, raised errors included."""

    def __init__(self, seed: int, reference: Reference | None):
        self.seed, self.reference = seed, reference
        self._lock = threading.Lock()
        self._claimed: dict[str, Future] = {}
        self._stop = threading.Event()
        self._helper: threading.Thread | None = None

    def take(self, check: Check) -> tuple[dict, object]:
        future, mine = self._claim(check, again=True)
        if mine:
            self._compute(check, future)
        try:
            return result_of(future)
        finally:
            with self._lock:
                self._claimed[check.name] = None  # taken: nothing kept, nothing computed again ahead

    def _claim(self, check: Check, again: bool = False) -> tuple[Future | None, bool]:
        """The check's future and whether the caller is to compute it; a check already
        taken gives (None, False), or a new future to compute where `again` (a second run)."""
        with self._lock:
            future = self._claimed.get(check.name)
            if future is not None or (check.name in self._claimed and not again):
                return future, False
            future = self._claimed[check.name] = Future()
            return future, True

    def _compute(self, check: Check, future: Future) -> None:
        try:
            future.set_result(inputs_and_expected(check, self.seed, self.reference))
        except BaseException as error:  # noqa: BLE001 - the check that takes it raises it, as before
            future.set_exception(error)

    def ahead(self, checks: list[Check], until=None) -> None:
        """Compute the answers of `checks` in turn, skipping any already claimed, while
        `until()` holds (always, without it) and until stop()."""
        for check in checks:
            if self._stop.is_set() or (until is not None and not until()):
                return
            future, mine = self._claim(check)
            if mine:
                self._compute(check, future)

    def ahead_on_a_thread(self, checks: list[Check]) -> None:
        self._helper = threading.Thread(target=self.ahead, args=(checks,), name="answers ahead", daemon=True)
        self._helper.start()

    def stop(self) -> None:
        self._stop.set()
        if self._helper is not None:
            joined(self._helper)


def _busy(failure: WorkerFailed) -> dict:
    """A worker that ran out of time waiting for a processor: the machine's failure, so
    the check is the grader's to run again (a class's run grades the upload again)."""
    return {"status": ERROR, "diagnosis": INFRASTRUCTURE, "staff_diagnosis": f"{INFRASTRUCTURE} ({failure.reason})",
            "cause": RUNNER_FAILED, "verdict": {"kind": "runner_failed"}}


class SharedWorker:
    """One worker for a group of tasks none of whose checks run another's code
    (grader.run.dependencies): it holds the parts the group's tasks build on (a part
    only some of them build on refuses the others' probes, which are then answered again
    in their own workers), none of the group's own tasks, and arms each task's rules
    around that task's probes only. The first failure (a hang, a crash, garbage,
    tampering, or a set-up that fails) ends it, and every task not finished goes on in
    workers of its own."""

    def __init__(self, tasks: list[Task], grading: Grading):
        self.tasks, self.grading = tasks, grading
        self.worker = None
        self.failed = False

    def get(self):
        """The group's worker, started on first use; None once it has failed."""
        if self.failed:
            return None
        if self.worker is None:
            worker, failure = _start_worker(self.tasks[0], self.grading, group=self.tasks)
            if failure is not None:
                self.failed = True  # each task starts its own worker and reports its own set-up
                return None
            self.worker = worker
        return self.worker

    def fail(self) -> None:
        if self.worker is not None:
            self.worker.kill()
        self.worker, self.failed = None, True

    @PHASES.phase("worker ends")
    def close(self) -> str:
        """End the worker; what it printed while the group ran."""
        if self.worker is None:
            return ""
        self.worker.close()
        output = self.worker.output.text(wait=2.0)
        self.worker = None
        return output


# The errors a failing torch operator raises, Python's and torch's (the worker names an
# operator for these only: grader/run/inside/tasks.py's describe).
NAMEABLE_FAILURES = frozenset(cls.__name__ for cls in standard_exceptions()
                              if issubclass(cls, (RuntimeError, TypeError, ValueError, IndexError))
                              and not issubclass(cls, (NotImplementedError, RecursionError)))


# What a note of low precision may say (engine._TaskRun._precision_ran).
_OPERATOR_NAME = re.compile(r"aten\.[a-z_][a-z0-9_.]{0,70}")
_DTYPE_NAMES = frozenset({"float32", "float16", "bfloat16"})


# How long a check may run once its code, or a part of the student's it runs, has hung.
HUNG_BEFORE_SECONDS = 2.0


class _SetupFailed(Exception):
    """The task's worker could not be started; run.setup_failure says why."""


class _TaskRun:
    """One task's checks, run one at a time on a worker; after any failure the next
    check gets a fresh worker."""

    def __init__(self, task: Task, grading: Grading, shared: SharedWorker | None = None):
        self.task, self.grading = task, grading
        self.reference, self.runner, self.seed, self.deadline = (grading.reference, grading.runner, grading.seed,
                                                                 grading.deadline)
        self.audience = grading.audience
        self.shared = shared
        self.on_shared = False  # whether self.worker is the group's
        self.worker = None
        self.setup_failure = None
        self.timeout_cap = self.runner.limits.check_seconds
        self.last_certified: tuple[str, ...] = ()
        self.fresh_next = False  # the next worker must import the package anew
        # The student's own parts the task's checks run, where no certified part stands in.
        self.own_parts = task_graph().get(task.name, ()) if self.reference is None else ()
        # Whether its worker records the operators its probes run: the worker's own test of the rule.
        self.watched = bool(op_rules.Rules(task.forbidden_ops, task.no_autograd))

    def run(self, check: Check) -> CheckResult:
        if self.grading.time_left() <= 0:
            self.drop_worker()
            limits = self.runner.limits
            used = (f"{limits.submission_seconds:g} s of computing" if time.monotonic() < self.grading.deadline else
                    f"{limits.submission_wall_seconds or wall_cap(limits.submission_seconds):g} s by the clock")
            return CheckResult(check, TIMEOUT, (
                f"the grading time for one submission ({used}) ran out before this check ran: something is far too "
                f"slow, or waits for what never comes — often an experiment left at module level, which runs every "
                f"time the package is imported; put it under `if __name__ == \"__main__\":`"))
        inputs, expected = self.grading.answers.take(check)
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
            if failure.status is WorkerStatus.BUSY:
                return CheckResult(check, **_busy(failure))
            if failure.status is WorkerStatus.TIMEOUT:
                # Code that hung once will most likely hang again: don't wait as long twice.
                self.timeout_cap = min(self.timeout_cap, HUNG_BEFORE_SECONDS)
                self.grading.hung.add(self.task.name)
            status = {WorkerStatus.TIMEOUT: TIMEOUT, WorkerStatus.TAMPERED: FORBIDDEN}.get(failure.status, ERROR)
            verdict = {WorkerStatus.TIMEOUT: {"kind": "timeout", "task": self.task.name, "during": "probe"},
                       WorkerStatus.TAMPERED: {"kind": "forbidden", "task": self.task.name, "call": ""}}.get(
                failure.status, {"kind": "unanswered", "task": self.task.name})
            return CheckResult(check, status, **failure_texts(failure, self.audience), verdict=verdict)
        if self.reference is None:
            # No certified part stood in: the judge may judge the task on the parts it ran.
            inputs = {**inputs, OWN_PARTS: self.own_parts}
        with PHASES.phase("judges"), precision_known() as leaned:
            status, diagnosis, staff, verdict = judge_answer(check, self.task, reply, inputs, expected,
                                                             self.audience)
        if leaned and reply.answered and not (check.separately or check.parts):
            # A judge leaned on float32's precision: whether the code computed in float32 is
            # asked of what ran, and the answer judged again knowing it (_api, precision_known).
            ran = self._precision_ran(check, sent)
            if ran is not None:
                with PHASES.phase("judges"), precision_known(ran):
                    status, diagnosis, staff, verdict = judge_answer(check, self.task, reply, inputs, expected,
                                                                     self.audience)
        certified = self.worker.certified if self.worker is not None else self.last_certified
        return CheckResult(check, status, str(diagnosis), certified=certified, staff_diagnosis=staff,
                           on_own_parts=isinstance(diagnosis, OwnPartsVerdict), verdict=verdict,
                           # read only where a check failed (answered, _trivial): not on every pass
                           answer=COMPUTED if status == PASSED else kind_of_answer(reply.result, inputs, expected))

    def call(self, check: Check, sent: dict, own: bool = False) -> ProbeReply:
        if self.worker is None and self.setup_failure is None and self.shared is not None and not own:
            self.worker = self.shared.get()
            self.on_shared = self.worker is not None
        if self.worker is None and self.setup_failure is None:
            self.worker, self.setup_failure = _start_worker(self.task, self.grading, fresh=self.fresh_next)
            self.fresh_next = False
        if self.setup_failure:
            raise _SetupFailed()
        reply = checked_reply(self._probe(check, sent))
        if self.on_shared and reply.crossed:
            # The probe ran another task of the group (held as the student wrote it), or a
            # part held for another task of the group that its own task does not build on
            # (refused): answered again in the task's own worker, as if never grouped.
            self.worker, self.on_shared, self.shared = None, False, None
            return self.call(check, sent, own=True)
        return self._failure_named(check, sent, reply)

    def _probe(self, check: Check, sent: dict, name_failure: bool = False, name_precision: bool = False) -> ProbeReply:
        cap = self.timeout_cap
        if self.grading.hung.intersection(self.own_parts):
            cap = min(cap, HUNG_BEFORE_SECONDS)  # it runs a part of the student's that hung
        # Apart where the worker records every operator the probe runs (a Python call each).
        worker, spent_before = self.worker, self.worker.spent
        try:
            with PHASES.phase("probes under operator rules" if self.watched else "probes"):
                return worker.call(ProbeCall(module=check.probe.__module__.removeprefix("grader.checks."),
                                             probe=check.probe.__name__, inputs=sent,
                                             task=self.task.name if self.on_shared else None,
                                             name_failure=name_failure, name_precision=name_precision),
                                   max(0.5, min(check.timeout, cap, self.grading.time_left())))
        finally:
            self.grading.charge(worker, spent_before)

    def _failure_named(self, check: Check, sent: dict, reply: ProbeReply) -> ProbeReply:
        """A probe of a task with no operator rule that raised: run again with the worker
        noting the operator that raises, which the diagnosis names (noting it on every probe
        doubled the time of every grading; a failure is rare in code that passes). The
        name is taken only from the same failure again; anything else keeps the first reply."""
        error = reply.error
        if not (self.task.names_failing_operator and not (self.task.forbidden_ops or self.task.no_autograd)
                and error is not None and error.type in NAMEABLE_FAILURES
                and error.operation is None and not reply.forbidden_calls):
            return reply
        try:
            again = checked_reply(self._probe(check, sent, name_failure=True))
        except WorkerFailed:
            self.drop_worker()
            return reply
        named = again.error
        if again.forbidden_calls or again.crossed or named is None or named.operation is None:
            return reply
        same = (named.type, named.message, named.where) == (error.type, error.message, error.where)
        return dataclasses.replace(reply, error=dataclasses.replace(error, operation=named.operation)) if same \
            else reply

    def _precision_ran(self, check: Check, sent: dict) -> "dict | bool | None":
        """The probe run again with the worker noting the first operator of the code's own that
        computed below float64: that operator's note, False where none did, None where the run
        could not tell (it failed, or answered otherwise than the first time)."""
        if self.worker is None:
            return None
        try:
            again = checked_reply(self._probe(check, sent, name_precision=True))
        except WorkerFailed:
            self.drop_worker()
            return None
        if not again.answered or again.forbidden_calls or again.crossed:
            return None
        noted = again.low_precision
        if noted is None:
            return False
        # Words a student reads: an operator's name, a dtype and a shape, never other text.
        if not (_OPERATOR_NAME.fullmatch(noted.op) and noted.dtype in _DTYPE_NAMES and len(noted.shape) <= 6):
            return None
        return {"op": noted.op, "dtype": noted.dtype, "shape": list(noted.shape), "made": noted.made}

    def call_separately(self, check: Check, runs: list[tuple[str, dict]], merge: bool = False) -> ProbeReply:
        """Each run in a fresh worker; the results gathered by name (merge=True: the parts'
        dict results merged into one, each later part told the earlier results)."""
        gathered, merged, certified = {}, {}, ()
        for name, inputs in runs:
            self.drop_worker(clean=True)
            self.fresh_next = True  # no state of the student's package may link two runs
            if merge:
                inputs = {**inputs, "earlier": dict(gathered)}
            reply = self.call(check, inputs, own=True)
            if not reply.answered or reply.forbidden_calls:
                return reply
            gathered[name] = reply.result
            if merge:
                if not isinstance(reply.result, dict):
                    return ProbeReply(result=reply.result)
                merged.update(reply.result)
            certified = self.worker.certified
        self.drop_worker(clean=True)
        self.last_certified = certified
        return ProbeReply(result=merged if merge else gathered)

    @PHASES.phase("worker ends")
    def drop_worker(self, clean: bool = False):
        """End the worker: killed after a failure; told to exit (clean=True) after a run
        that answered, so a runner that keeps processes may reuse it. The group's worker is
        left to the group after a clean run, and ended for every task after a failure."""
        if self.on_shared:
            if not clean:
                self.shared.fail()
            self.worker, self.on_shared = None, False
            return
        if self.worker is not None:
            if clean:
                self.worker.close()
            else:
                self.worker.kill()
        self.worker = None

    @PHASES.phase("worker ends")
    def finish(self, ran: list[CheckResult]):
        """Ends the last worker and gives what it printed to the last check it ran (the
        group's worker is ended by the group)."""
        if self.on_shared:
            self.worker, self.on_shared = None, False
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
               runner: Runner, seed: int, scan_for_tampering: bool = True,
               deadline: float | None = None, imported=None, audience: Audience | None = None) -> list[CheckResult]:
    """Grade one task's checks. Never raises for anything the submission does: every
    failure is a check status. (scan_for_tampering=False lets tests reach the layers
    behind the static scan.) RunnerRefused when the runner may not hold what the run
    needs: the reference, or a hidden check."""
    grading = Grading(submission, reference, runner, seed, deadline or 0.0, imported, audience)
    return _grade_task(task, checks, grading, scan_for_tampering=scan_for_tampering)


def _grade_task(task: Task, checks: list[Check], grading: Grading, shared: SharedWorker | None = None,
                scan_for_tampering: bool = True) -> list[CheckResult]:
    submission = grading.submission
    if not grading.runner.holds_reference and (grading.reference is not None or any(c.hidden for c in checks)):
        raise RunnerRefused(WHERE_GRADING_RUNS)
    try:
        with PHASES.phase("task scans"):
            tampering = scan_submission(submission.sources) if scan_for_tampering else []
            hits = scan(submission.sources.get(f"{task.module}.py", ""), task.qualname, task.forbidden,
                        task.forbidden_methods)
    except Exception as error:  # noqa: BLE001 - a scan that breaks costs this task, never the submission
        return with_verdicts([CheckResult(c, ERROR, f"the grader failed while reading the submission; please "
                                                    f"report it ({type(error).__name__})") for c in checks])
    if tampering:
        return with_verdicts([CheckResult(c, FORBIDDEN, tampering_reason(tampering)) for c in checks])
    if hits:
        reason = f"{task.qualname} uses {hits[0]} — the point of this task is to write it yourself"
        return with_verdicts([CheckResult(c, FORBIDDEN, reason) for c in checks])
    run, ran = _TaskRun(task, grading, shared), []
    # Checks that run in workers of their own go first: the rest then share one worker,
    # where after them a check would need a new one. The report keeps the catalogue's order.
    for check in sorted(checks, key=lambda c: not (c.separately or c.parts)):
        try:
            started = time.perf_counter()
            result = run.run(check)
            result.seconds = time.perf_counter() - started
        except Exception as error:  # noqa: BLE001 - a grader bug must cost one check, not the run
            run.drop_worker()
            result = CheckResult(check, ERROR, f"the grader failed on this check; please report it "
                                               f"({type(error).__name__}: {as_text(error, 300)})", cause=GRADER_FAILED)
        ran.append(result)
    run.finish(ran)
    # The task's verdicts are made once all its checks are judged: a gated check counts
    # only with the value checks that gate it.
    drawn = published_inputs_only(ran)
    statuses = {r.check.name.rsplit(".", 1)[-1]: (FAILED if r.check.name in drawn else computing_status(r))
                for r in ran}
    by_check = {id(result.check): gated(result, statuses, drawn.get(result.check.name, ())) for result in ran}
    return with_verdicts([by_check[id(check)] for check in checks])


def published_inputs_only(ran: list[CheckResult]) -> dict[str, tuple[str, ...]]:
    """{each public check that passed: the task's hidden checks} where the code answers
    the published inputs only. The hidden checks' inputs are drawn for each grading, and
    the code answers none of them (answered: no pass, no wrong answer it computed), while
    either it passed every public check it did not call unfinished (a table of the
    published answers, computed elsewhere, that raises anywhere else, NotImplementedError
    on the public checks it skips) or gave a trivial answer on a drawn input (an
    input handed back, zeros, a constant: such a table's cheap fallback, whichever public
    check it fails on purpose). Its public points need a computation on an input it could
    not know in advance. A slip computes a wrong answer on the drawn inputs, or crashes
    there and on a published input too, and keeps what passed. {} where the grader could
    not judge a check (a failure of its own, CheckResult.cause, withholds nothing), or
    where no hidden check ran (the student's own check, a check picked alone)."""
    hidden = [r for r in ran if r.check.hidden]
    public = [r for r in ran if not r.check.hidden]
    if not hidden or any(r.cause for r in ran) or any(answered(r) for r in hidden):
        return {}
    if not (all(r.status == PASSED or _unfinished(r) for r in public) or any(_trivial(r) for r in hidden)):
        return {}
    failed = tuple(r.check.name for r in hidden)
    return {r.check.name: failed for r in public if r.status == PASSED}


def answered(result: CheckResult) -> bool:
    """The check passed, or failed on a wrong answer the code computed (named or not):
    not a crash, a time-out, a refusal, an error the probe caught, a trivial answer, or a
    mistake of _api.NOTHING_COMPUTED."""
    if result.status == PASSED:
        return True
    return (result.status == FAILED and (result.verdict or {}).get("kind") in ("mistake", "deviation")
            and result.answer == COMPUTED and not _names_nothing_computed(result))


def _unfinished(result: CheckResult) -> bool:
    return result.status == NOT_IMPLEMENTED or (result.verdict or {}).get("kind") == "not_implemented"


def _trivial(result: CheckResult) -> bool:
    return result.status == FAILED and (result.answer == TRIVIAL or _names_nothing_computed(result))


def _names_nothing_computed(result: CheckResult) -> bool:
    verdict = result.verdict or {}
    return verdict.get("kind") == "mistake" and bool(set(str(verdict.get("mistake", "")).split("+")) & NOTHING_COMPUTED)


# A value check's status as a gate (Check.gated_by): a check that failed on a named slip
# with an answer the code computed (LayerNorm's d - 1, say) shows that the task computes,
# which no body that computes nothing does, and the properties it gates count. (An
# unnamed wrong answer does not: a probe computes around the task's function, and what
# comes back can look computed whatever the function did.)
COMPUTES = "computes"


def computing_status(result: CheckResult) -> str:
    named = (result.verdict or {}).get("kind") == "mistake"
    return COMPUTES if result.status == FAILED and named and answered(result) else result.status


def kind_of_answer(answer, inputs: dict, expected=None) -> str:
    """RAISED where the probe caught an exception of the code's and put it in its answer
    (as "raised", _api.try_call, or its name under "error"); TRIVIAL where the answer is
    what a body that computes nothing gives: nothing at all, or every tensor in it a
    constant (zeros among them) or a multiple of an input (handed back, or halved), while
    the right answer (`expected`) is none of these; COMPUTED otherwise, and wherever the
    check has no expected answer to tell by (a right answer may be all of these: an
    optimizer keeps the very tensors it was given, a clip scales them, zero_grad zeroes). A slip that
    gives a trivial answer on some input (a LayerNorm's statistics over a time axis of
    length 1 are zeros) is not told apart from a body that computes nothing there."""
    if _raised(answer):
        return RAISED
    if expected is None or not _looks_computed(expected, inputs):
        return COMPUTED
    return COMPUTED if _looks_computed(answer, inputs) else TRIVIAL


def _looks_computed(answer, inputs: dict) -> bool:
    given = [t for t in _tensors(inputs) if t.numel() and t.is_floating_point()]
    found = [t for t in _tensors(answer) if t.numel()]
    if not found:
        return answer is not None and not (isinstance(answer, dict) and all(v is None for v in answer.values()))
    return any(not _constant(t) and not any(_multiple_of(t, g) for g in given) for t in found)


def _raised(value, depth: int = 0) -> bool:
    if isinstance(value, dict):
        if value.get("raised") or (isinstance(value.get("error"), str) and value["error"]):
            return True
        return depth < 4 and any(_raised(v, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)) and depth < 4:
        return any(_raised(v, depth + 1) for v in value[:64])
    return False


def _constant(tensor) -> bool:
    flat = tensor.detach().reshape(-1)
    return not flat.dtype.is_complex and bool((flat == flat[0]).all())


def _multiple_of(tensor, given) -> bool:
    """tensor == c * given for one number c (the input itself, or a scaled copy)."""
    if tensor.shape != given.shape or not tensor.is_floating_point():
        return False
    a, b = given.detach().double().reshape(-1), tensor.detach().double().reshape(-1)
    scale = float(a @ b) / max(float(a @ a), 1e-300)
    return bool(torch.allclose(scale * a, b, rtol=1e-12, atol=1e-12))


def _tensors(value, depth: int = 0):
    """Every tensor in plain data (dicts, lists, tuples), a few levels deep."""
    if isinstance(value, torch.Tensor):
        yield value
    elif depth < 4 and isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item, depth + 1)
    elif depth < 4 and isinstance(value, (list, tuple)):
        for item in value[:64]:
            yield from _tensors(item, depth + 1)


def gated(result: CheckResult, statuses: dict[str, str], drawn_failing: tuple[str, ...] = ()) -> CheckResult:
    """The result as it counts (Check.gated_by): a check that passed while a value check
    gating it neither passed nor named a slip (computing_status) earns nothing yet, and
    says so. `statuses`: the task's checks judged so far, by short name; a gate not in this
    run (a check picked alone) withholds nothing. `drawn_failing` (published_inputs_only): the
    task's hidden checks, none answered; public points need a computation on an input the
    code could not know in advance."""
    if result.status == PASSED and drawn_failing and not result.check.hidden:
        said = ("this check passes on its published inputs only: on the inputs drawn for this grading the task "
                "gives no answer it computed (it raises, or gives back an input, zeros or a constant), and public "
                "points need code that computes on inputs it cannot know in advance")
        return dataclasses.replace(result, status=FAILED, gated=drawn_failing, diagnosis=said,
                                   staff_diagnosis=said,
                                   verdict={"kind": "public_only", "task": result.check.task, "on": list(drawn_failing)})
    failing = tuple(g for g in result.check.gated_by if statuses.get(g, PASSED) not in (PASSED, COMPUTES))
    if result.status != PASSED or not failing:
        return result
    named = " and ".join(f"'{g}'" for g in failing)
    said = (f"this property holds, but it earns nothing yet: it counts once the task's {named} "
            f"check{'s' * (len(failing) > 1)} pass{'' if len(failing) > 1 else 'es'} or name{'' if len(failing) > 1 else 's'} "
            f"a slip of the formula, since a body that computes nothing (returning its input unchanged, say) has it too")
    return dataclasses.replace(result, status=FAILED, gated=failing, diagnosis=said, staff_diagnosis=said,
                               verdict={"kind": "gated",
                                        "on": [f"{result.check.name.rsplit('.', 1)[0]}.{g}" for g in failing]})


def apply_waits(results: list[CheckResult], graph: dict[str, tuple[str, ...]],
                quiet: "set[str] | frozenset[str]" = frozenset()) -> list[CheckResult]:
    """Where no certified part stood in: a check that failed, and could only be judged
    with right parts, waits while a task it builds on (graph) fails its own checks in this
    run, and says which, instead of a sentence about its own task (a forbidden call or a
    time-out too: the part may be what made it). A verdict reached on the task's own parts
    (CheckResult.on_own_parts) stands, and so does a task not started. Tasks
    are taken parts first (dependencies.build_order): a task fails its own checks when a
    failure is left once its waits are taken out, and only such a task makes later
    checks wait. `quiet`: tasks graded only to learn whether they are right, whose
    checks the student does not see in this run (another chapter's)."""
    order = {task: i for i, task in enumerate(build_order(graph))}
    last = len(order)
    by_task: dict[str, list[CheckResult]] = {}
    for result in results:
        by_task.setdefault(result.check.task, []).append(result)
    failing: list[str] = []
    deferred: list[tuple[CheckResult, tuple[str, ...]]] = []  # checks that run a later task
    for task in sorted(by_task, key=lambda t: order.get(t, last)):
        upstream = tuple(t for t in graph.get(task, ()) if t in failing and order[t] < order.get(task, last))
        for result in by_task[task]:
            if result.check.runs_later:  # judged once the later tasks are known right or wrong
                deferred.append((result, upstream))
                continue
            _wait_if_upstream(result, upstream, quiet)
        # A task whose code never ran (the package did not import) is not known to be wrong.
        if any(r.status not in (PASSED, WAITING) and not r.gated and r.cause != LOAD_FAILED
               and not r.check.runs_later for r in by_task[task]):
            failing.append(task)
    for result, upstream in deferred:
        _wait_if_upstream(result, upstream + tuple(t for t in result.check.runs_later if t in failing), quiet)
    return results


def _wait_if_upstream(result: CheckResult, upstream: tuple[str, ...], quiet) -> None:
    final = result.status == FAILED and result.on_own_parts and not result.gated or result.cause == LOAD_FAILED
    if upstream and result.status in (FAILED, ERROR, FORBIDDEN, TIMEOUT) and not final:
        _wait(result, upstream, quiet)


def _wait(result: CheckResult, upstream: tuple[str, ...], quiet) -> None:
    chapter = {task: c.number for task, c in catalogue.chapter_of_task().items()}
    own = result.check.chapter

    def named(task: str) -> str:
        return f"'{task}'" if chapter.get(task, own) == own else f"'{task}' (chapter {chapter[task]})"

    many = len(upstream) > 1
    quoted = [named(t) for t in upstream[:3]] + (["others"] if len(upstream) > 3 else [])
    listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]
    elsewhere = sorted({chapter[t] for t in upstream if t in quiet and t in chapter})
    fix = f"fix {'them' if many else 'it'} first"
    if elsewhere:
        fix = (f"this run checked {'them' if many else 'it'} quietly: run {see_chapters(elsewhere)} to see why, "
               f"and {fix}")
    result.status, result.waiting_on, result.gated = WAITING, upstream, ()
    result.verdict = {"kind": "waiting", "on": list(upstream)}
    result.diagnosis = result.staff_diagnosis = (
        f"waiting on {listed}: {'they fail their' if many else 'it fails its'} own checks, and this check can "
        f"only be judged with right parts; {fix}")


# A verdict for a result whose maker gave none (a scan's finding, the grader's own failure).
_VERDICT_OF_STATUS = {FAILED: "deviation", NOT_IMPLEMENTED: "not_implemented", TIMEOUT: "timeout",
                      FORBIDDEN: "forbidden", ERROR: "crash"}


def with_verdicts(results: list[CheckResult]) -> list[CheckResult]:
    """Every result that did not pass carries a verdict (grader/run/verdicts.py)."""
    for result in results:
        if result.status == PASSED:
            result.verdict = None
        elif result.verdict is None:
            result.verdict = with_slots({"kind": _VERDICT_OF_STATUS.get(result.status, "deviation"),
                                         "task": result.check.task}, result.slots)
    return results


def see_chapters(chapters: list[str]) -> str:
    """The command that shows these chapters' checks, as this edition of the kit spells it."""
    from grader.edition import EDITION, check_py

    if EDITION == "student":
        return f"`{check_py(' '.join(chapters))}`"
    return f"`make check CH={','.join(chapters)}`"


def grade_group(items: list[tuple[Task, list[Check]]], submission: Submission, reference: Reference | None,
                runner: Runner, seed: int, deadline: float | None = None, imported=None,
                audience: Audience | None = None) -> list[list[CheckResult]]:
    """Grade a group of tasks (grader.run.dependencies.task_groups) one after another on
    one worker, each task's results as grade_task gives them; a group of one is a task."""
    return _grade_group(items, Grading(submission, reference, runner, seed, deadline or 0.0, imported, audience))


def _grade_group(items: list[tuple[Task, list[Check]]], grading: Grading) -> list[list[CheckResult]]:
    if len(items) == 1:
        task, checks = items[0]
        return [_grade_task(task, checks, grading)]
    shared = SharedWorker([task for task, _ in items], grading)
    graded = []
    try:
        for task, checks in items:
            graded.append(_grade_task(task, checks, grading, shared=shared))
    finally:
        output = shared.close()
    if output and graded and graded[-1]:
        shown, staff = grading.audience.output(output)
        last = graded[-1][-1]
        last.output, last.staff_output = last.output or shown, last.staff_output or staff
    return graded


def _import_package(runner: Runner, submission: Submission, plan: list) -> object:
    with PHASES.phase("package import"):
        return runner.package(submission.sources) if plan and submission.sources else None


def _group_order(plan: list[tuple[Task, list[Check]]], groups: list[list[int]]) -> list[int]:
    """The costliest groups (most workers to start) first, so two threads finish together."""
    return sorted(range(len(groups)), key=lambda g: -sum(workers_needed(plan[i][1]) for i in groups[g]))


def _order_of_grading(plan: list[tuple[Task, list[Check]]], grouped: bool) -> list[Check]:
    """The plan's checks in about the order the grading threads reach them."""
    groups = plan_groups(plan, grouped)
    return [check for g in _group_order(plan, groups) for i in groups[g] for check in plan[i][1]]


def _grade_plan(plan: list[tuple[Task, list[Check]]], grading: Grading, pool: ThreadPoolExecutor,
                grouped: bool) -> list[CheckResult]:
    groups = plan_groups(plan, grouped)
    # The report keeps the catalogue's order.
    order = _group_order(plan, groups)
    futures = {g: pool.submit(_grade_group, [plan[i] for i in groups[g]], grading) for g in order}
    by_task = {}
    for g, members in enumerate(groups):
        for i, results in zip(members, result_of(futures[g])):
            by_task[i] = results
    return [result for i in range(len(plan)) for result in by_task[i]]


def parts_outside(results: list[CheckResult], graph: dict[str, tuple[str, ...]]) -> set[str]:
    """The tasks of chapters not graded in `results` that a failing check there builds on,
    directly or through one another: whether they are right decides whether that check
    waits. (A run of whole chapters, as every student's is, holds the rest.)"""
    chapter = {task: c.number for task, c in catalogue.chapter_of_task().items()}
    graded = {r.check.task for r in results}
    chapters = {chapter.get(task) for task in graded}
    could_wait = {r.check.task for r in results
                  if r.status in (FAILED, ERROR, FORBIDDEN, TIMEOUT) and r.cause != LOAD_FAILED}
    reach, frontier = set(), set(could_wait)
    while frontier:
        task = frontier.pop()
        for part in graph.get(task, ()):
            if part not in reach:
                reach.add(part)
                frontier.add(part)
    return {task for task in reach - graded if chapter.get(task) not in chapters}


def workers_needed(checks: list[Check]) -> int:
    """How many workers a task's checks start: one, plus one per side of each comparison."""
    return 1 + sum(len(c.separately) + len(c.parts) for c in checks)


def select_checks(chapters: list[str] | None, public_only: bool,
                  tasks: "set[str] | None" = None) -> list[tuple[Task, list[Check]]]:
    plan = []
    for chapter in catalogue.chapters():
        if chapters and chapter.number not in chapters:
            continue
        for task in chapter.tasks:
            if tasks is not None and task.name not in tasks:
                continue
            checks = [c for c in chapter.checks if c.task == task.name and not (public_only and c.hidden)]
            if checks:
                plan.append((task, checks))
    return plan


def plan_groups(plan: list[tuple[Task, list[Check]]], grouped: bool) -> list[list[int]]:
    """The plan's tasks (as indices) in groups that may share a worker; one each when not grouped."""
    if not grouped:
        return [[i] for i in range(len(plan))]
    index = {task.name: i for i, (task, _) in enumerate(plan)}
    return [[index[name] for name in group] for group in task_groups([task.name for task, _ in plan])]


def possible_points(chapters: list[str] | None = None, public_only: bool = False) -> float:
    return sum(c.points for _, checks in select_checks(chapters, public_only) for c in checks)


def grade(submission: Submission, chapters: list[str] | None = None, public_only: bool = False,
          runner: Runner | None = None, seed: int | None = None, parallel: int | None = None,
          use_reference: bool = True, grouped: bool = True, tasks: "set[str] | None" = None,
          for_the_author: bool = False) -> GradeReport:
    """Grade a submission's tasks. for_the_author=True: the report is read by the
    code's author alone (`check`), never recorded as a grade, so what the code raised
    and printed is shown whole even beside certified parts (feedback.Audience). grouped=True lets tasks that cannot see each other
    share a worker where the reference is at hand (grader.run.dependencies); False
    gives every task workers of its own (kept to compare the two). `tasks`: only these
    tasks of the chapters (by name), for the kit's own tools."""
    started = time.perf_counter()
    reference = Reference.available() if use_reference else None
    if runner is not None and not runner.holds_reference and (reference is not None or not public_only):
        raise RunnerRefused(WHERE_GRADING_RUNS)
    seed = secrets.randbelow(2**31) if seed is None else seed
    plan = select_checks(chapters, public_only, tasks)
    own_runner = runner is None
    runner = runner or open_runner(with_reference=reference is not None or not public_only)
    parallel = parallel or runner.threads
    # The grading threads are the parallelism here: torch's own helper threads beside them
    # only contend for the same cores (and spin while they wait). One thread per op also
    # computes the expected values as the runner computes the answers.
    torch.set_num_threads(1)
    deadline = submission_deadline(runner.limits)
    pool = ThreadPoolExecutor(max_workers=parallel)
    # The package imported once for all tasks, where the runner can seal that process: begun
    # at once, on a grading thread, while this one reads the reference and plans (a
    # profile's one thread does one after the other, so that its phases stay apart).
    importing = pool.submit(_import_package, runner, submission, plan) if parallel > 1 else None
    imported = None
    answers = Answers(seed, reference)
    interrupted = False
    try:
        with PHASES.phase("reference and plan"):
            if reference is not None:
                reference.modules  # import it once here, not from two grading threads at once
                worker_holdings([task.name for task, _ in plan])  # here, before two threads each set about it
            # Scanned once, before the threads (the scan caches what it finds per upload).
            try:
                scan_submission(submission.sources)
            except Exception:  # noqa: BLE001 - each task reports a failing scan itself
                pass
        in_order = _order_of_grading(plan, reference is not None and grouped)
        # While the sandbox's zygote still imports torch beside this process, the wait would pass idle.
        booting = getattr(runner, "booting", None)
        if booting is not None:
            answers.ahead(in_order, until=booting)
        imported = result_of(importing) if importing is not None else _import_package(runner, submission, plan)
        if parallel > 1:  # one thread (a profile): phases must not overlap, so nothing runs beside it
            answers.ahead_on_a_thread(in_order)
        # One audience for the upload: what of the reference it does not hold is worked out once.
        grading = Grading(submission, reference, runner, seed, deadline, imported,
                          Audience(submission, reference, for_the_author=for_the_author), answers=answers)
        results = _grade_plan(plan, grading, pool, reference is not None and grouped)
        if reference is None:
            graph = task_graph()
            # A part from a chapter outside this run may be what fails a check here: its own
            # public checks are run too, quietly, so a chapter's verdicts are the whole run's.
            outside = parts_outside(results, graph)
            quiet = _grade_plan(select_checks(None, True, outside), grading, pool, False)
            apply_waits(results + quiet, graph, outside)
        pool.shutdown()
    except BaseException as stop:
        # Ctrl-C (or anything else): drop what has not started; closing the runner ends the rest.
        pool.shutdown(wait=False, cancel_futures=True)
        interrupted = isinstance(stop, KeyboardInterrupt)
        if interrupted:
            # At once, so that the threads waiting on workers (and on the package's import)
            # are answered now, not when their time limits run out.
            with whole():
                runner.close()
        raise
    finally:
        answers.stop()
        if imported is None and importing is not None and not interrupted:
            try:  # the plan failed while the package was imported: its process ends too
                imported = result_of(importing)
            except Exception:  # noqa: BLE001 - nothing was imported, so nothing is left to end
                imported = None
        with PHASES.phase("shutdown"):
            described = runner.describe(imported_once=imported is not None)
            if imported is not None:
                imported.close()
            if own_runner:
                runner.close()
    certified = ("the reference, for the parts each task builds on" if reference
                 else "none available: each task uses your own code for the parts it builds on")
    return GradeReport(submission.label, with_verdicts(results), described, certified, time.perf_counter() - started)
