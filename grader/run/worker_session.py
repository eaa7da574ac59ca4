"""Running a task's checks on workers: the engine's second layer.

A worker session starts the process that holds the upload (and the certified parts the
task builds on), sends it one probe at a time, and judges each reply here, where the
expected values live (grader/run/feedback.py words them). It keeps every way a run can
go: the shared worker of a group of tasks and the fall-back to a task's own, a fresh
worker after any failure, the re-runs that name a failing operator or the precision
the code computed in, the separate workers of a comparison, and the grading's budget
of processor time. grader/run/schedule.py decides what runs; grader/run/verdicts.py
makes the results count; grader/run/engine.py ties the three.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import time
from dataclasses import dataclass

import torch

from grader.checks import catalogue
from grader.checks._api import OWN_PARTS, Check, OwnPartsVerdict, Task, precision_known
from grader.run.answers import REFERENCE_RUNS, Answers
from grader.run.dependencies import task_graph, worker_holdings
from grader.run.feedback import (Audience, as_text, checked_reply, error_verdict, failure_texts, judge_answer,
                                 remote_failure)
from grader.run.inside import op_rules, sealed, wire
from grader.run.inside.messages import (PartsRequest, ProbeCall, ProbeReply, Ready, Region, SetupFailed, TaskRequest,
                                        TaskRules, WorkerStatus)
from grader.run.inside.tasks import standard_exceptions
from grader.run.processes import Limits, Runner
from grader.profile import PHASES
from grader.run.reference import Reference
from grader.run.results import (COMPUTED, ERROR, FAILED, FORBIDDEN, GRADER_FAILED, LOAD_FAILED, NOT_IMPLEMENTED, PASSED,
                                RUNNER_FAILED, TIMEOUT, CheckResult)
from grader.run.schedule import own_worker_checks_first
from grader.run.submission import Submission
from grader.run.verdicts import kind_of_answer
from grader.run.worker import PartsApart, TimeLimit, WorkerFailed


# ---------------------------------------------------------------------- the grading

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


def holdings_of(tasks: list[Task]) -> tuple[frozenset, dict[str, tuple[str, ...]]]:
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


def worker_request(task: Task, submission: Submission, reference: Reference | None, limits: Limits,
                    imported: bool = False, fresh: bool = False, group: list[Task] | None = None) -> TaskRequest:
    """The task's request to a new worker. `fresh`: the package must be imported anew for
    it, never reused from an earlier task (a runner that keeps processes between tasks
    honours it; a forked worker is fresh anyway)."""
    held, guards = holdings_of(group or [task])
    return TaskRequest(
        task=task.name,
        student={} if imported else dict(submission.sources),
        certified=reference.compiled_for(held, guards, runs_apart(held)) if reference else None,
        certify=sorted(held) if reference else [],
        regions=[Region(t.name, t.module, t.qualname) for t in catalogue.tasks().values()],
        needs=sorted({t.module for t in group}) if group else [task.module],
        limits=limits.rlimits(worker=True),
        rules=None if group else _rules(task),
        group={t.name: _rules(t) for t in group} if group else None,
        fresh=fresh,
    )



def runs_apart(held) -> frozenset:
    """The held parts that run in the certified parts' own process: those whose values
    cross as data (Task.crosses). A part that reaches a task the worker holds no part of
    (the graded task's code, or a student's own part) calls it back: the worker's code of
    it answers (grader/run/inside/parts.py)."""
    known = catalogue.tasks()
    return frozenset(part for part in held if known[part].crosses)


def called_back(held) -> frozenset:
    """The tasks a worker holding `held` answers calls back of: every task whose values
    cross that it holds no part of (its code there is the student's own)."""
    return frozenset(name for name, task in catalogue.tasks().items() if task.crosses and name not in held)


def parts_apart(held, guards: dict, grading: Grading) -> "PartsApart | None":
    """What a worker holding `held` calls across, and how its parts' process starts (a
    fresh process of the runner's, set up with the parts' code and nothing of the upload's),
    or None where it calls nothing across."""
    apart = runs_apart(held)
    if not apart or grading.reference is None:
        return None
    back = called_back(held)
    request = PartsRequest(certified=grading.reference.parts_apart(apart, back),
                           regions=[Region(t.name, t.module, t.qualname) for t in catalogue.tasks().values()],
                           limits=grading.runner.limits.rlimits(worker=True))

    def start():
        process = grading.runner.parts_process()
        process.grading_ends = grading.deadline
        ready = process.start(dataclasses.replace(request, certified=dict(request.certified)),
                              grading.runner.limits.setup_seconds)
        if not isinstance(ready, Ready):
            process.kill()
            raise OSError(f"the certified parts could not be set up: {ready.error.message[:200]}")
        return process

    users = {part: frozenset(user.removesuffix(sealed.PROBES_ONLY) for user in guards.get(part, ())) for part in apart}
    return PartsApart(users, start, back)


# ---------------------------------------------------------------------- starting a worker


@PHASES.phase("worker starts")
def start_worker(task: Task, grading: Grading, fresh: bool = False, group: list[Task] | None = None):
    """A ready worker for `task` (for each task of `group`, where one is shared), or
    (None, failure) where the upload or the runner can't load it; the failure is
    CheckResult's fields. `fresh`: the package must be imported anew (worker_request)."""
    worker, forked, no_process = _new_process(grading)
    if no_process is not None:
        return None, no_process
    worker.grading_ends = grading.deadline  # no answer is awaited past the upload's own end
    spent_before, limits = worker.spent, grading.runner.limits
    try:
        ready = worker.start(worker_request(task, grading.submission, grading.reference, limits,
                                            imported=forked, fresh=fresh, group=group),
                             max(0.5, min(limits.setup_seconds, grading.time_left())))
    except WorkerFailed as failure:
        return None, _import_failure(task, failure, grading)
    finally:
        grading.charge(worker, spent_before)
    if isinstance(ready, SetupFailed):
        return None, _setup_failed(task, ready, worker, grading.audience)
    held, guards = holdings_of(group or [task]) if grading.reference is not None else (frozenset(), {})
    if grading.reference is not None:
        worker.apart = parts_apart(held, guards, grading)
    # What the grader sent, where the upload has the part's file: never the worker's own
    # list, which the code could shorten at will to say something in the report.
    known = catalogue.tasks()
    worker.certified = tuple(sorted(t for t in held if f"{known[t].module}.py" in grading.submission.sources))
    return worker, None


def _new_process(grading: Grading) -> tuple[object, bool, dict | None]:
    """(worker, whether it is a fork of the package imported once, None), or (None, False,
    failure) where the machine or the sandbox had no process for it (the runner tried
    again first): the grader's failure, never the student's, and a rerun grades it again."""
    try:
        if grading.imported is not None:
            try:
                return grading.imported.worker(), True, None
            except WorkerFailed:
                pass  # the imported package's process died: this task imports it itself
        return grading.runner.worker(), False, None
    except Exception as broken:  # noqa: BLE001 - whatever stops the runner costs this task only
        return None, False, {"status": ERROR, "diagnosis": INFRASTRUCTURE,
                             "staff_diagnosis": f"{INFRASTRUCTURE} (no sandboxed process could start: {broken!r})",
                             "cause": RUNNER_FAILED, "verdict": {"kind": "runner_failed"}}


def _import_failure(task: Task, failure: WorkerFailed, grading: Grading) -> dict:
    """A worker that hung or died while setting up: a module that does so at import does
    so for every check, said once (or the machine's failure, where it starved)."""
    if failure.status is WorkerStatus.BUSY:
        return busy_failure(failure)
    timed_out = failure.status is WorkerStatus.TIMEOUT
    texts = failure_texts(failure, grading.audience, "loading the submission failed: ")
    if timed_out:
        seconds = grading.runner.limits.setup_seconds
        texts["diagnosis"] = (f"importing the package took longer than {seconds:g} s: code "
                              f"at module level runs every time the package is imported; an experiment or a "
                              f"training run left there belongs under `if __name__ == \"__main__\":`")
    verdict = ({"kind": "timeout", "task": task.name, "during": "import"} if timed_out
               else {"kind": "load_failed", "file": "", "line": None, "error": ""})
    return {"status": TIMEOUT if timed_out else ERROR, **texts, "cause": LOAD_FAILED, "verdict": verdict}


def _setup_failed(task: Task, ready: SetupFailed, worker, audience: Audience) -> dict:
    """The upload's import raised, or lacks the task's module: said as the worker found it."""
    status, shown, staff = remote_failure(task, ready.error, audience, loading=True)
    verdict = error_verdict(task, ready.error, audience, loading=True)
    worker.close()
    output, staff_output = audience.output(worker.output.text())
    return {"status": ERROR if status == NOT_IMPLEMENTED else status,
            "diagnosis": f"the submission could not be loaded: {shown}", "output": output,
            "staff_diagnosis": f"the submission could not be loaded: {staff}", "staff_output": staff_output,
            "cause": LOAD_FAILED, "verdict": verdict}


# ---------------------------------------------------------------------- running a task's checks


def busy_failure(failure: WorkerFailed) -> dict:
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
            worker, failure = start_worker(self.tasks[0], self.grading, group=self.tasks)
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


# What a note of low precision may say (TaskRun._precision_ran).
_OPERATOR_NAME = re.compile(r"aten\.[a-z_][a-z0-9_.]{0,70}")
_DTYPE_NAMES = frozenset({"float32", "float16", "bfloat16"})


# How long a check may run once its code, or a part of the student's it runs, has hung.
HUNG_BEFORE_SECONDS = 2.0


class _SetupFailed(Exception):
    """The task's worker could not be started; run.setup_failure says why."""


class TaskRun:
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
        """The check's result: its probe run on a worker and its answer judged."""
        if self.grading.time_left() <= 0:
            self.drop_worker()
            return self._out_of_time(check)
        inputs, expected = self.grading.answers.take(check)
        sent = {key: value for key, value in inputs.items() if not key.startswith("_")}
        try:
            reply = self._reply_to(check, sent)
        except _SetupFailed:
            return CheckResult(check, **self.setup_failure)
        except WorkerFailed as failure:
            self.drop_worker()
            return self._no_answer(check, failure)
        if self.reference is None:
            # No certified part stood in: the judge may judge the task on the parts it ran.
            inputs = {**inputs, OWN_PARTS: self.own_parts}
        return self._judged(check, sent, reply, inputs, expected)

    def _out_of_time(self, check: Check) -> CheckResult:
        limits = self.runner.limits
        used = (f"{limits.submission_seconds:g} s of computing" if time.monotonic() < self.grading.deadline else
                f"{limits.submission_wall_seconds or wall_cap(limits.submission_seconds):g} s by the clock")
        return CheckResult(check, TIMEOUT, (
            f"the grading time for one submission ({used}) ran out before this check ran: something is far too "
            f"slow, or waits for what never comes — often an experiment left at module level, which runs every "
            f"time the package is imported; put it under `if __name__ == \"__main__\":`"))

    def _reply_to(self, check: Check, sent: dict) -> ProbeReply:
        """The worker's reply to the check: one probe, or one per side of a comparison."""
        if check.separately:
            first = check.separately[0]
            runs = [(name, {**{k: v for k, v in sent.items() if k not in check.separately}, first: sent[name]})
                    for name in check.separately]
            return self.call_separately(check, runs)
        if check.parts:
            return self.call_separately(check, [(part, {**sent, "part": part}) for part in check.parts], merge=True)
        return self.call(check, sent)

    def _no_answer(self, check: Check, failure: WorkerFailed) -> CheckResult:
        """A worker that hung, died, sent garbage or found the grader's code changed."""
        if failure.status is WorkerStatus.BUSY:
            return CheckResult(check, **busy_failure(failure))
        if failure.status is WorkerStatus.TIMEOUT:
            # Code that hung once will most likely hang again: don't wait as long twice.
            self.timeout_cap = min(self.timeout_cap, HUNG_BEFORE_SECONDS)
            self.grading.hung.add(self.task.name)
        status = {WorkerStatus.TIMEOUT: TIMEOUT, WorkerStatus.TAMPERED: FORBIDDEN}.get(failure.status, ERROR)
        verdict = {WorkerStatus.TIMEOUT: {"kind": "timeout", "task": self.task.name, "during": "probe"},
                   WorkerStatus.TAMPERED: {"kind": "forbidden", "task": self.task.name, "call": ""}}.get(
            failure.status, {"kind": "unanswered", "task": self.task.name})
        return CheckResult(check, status, **failure_texts(failure, self.audience), verdict=verdict)

    def _judged(self, check: Check, sent: dict, reply: ProbeReply, inputs: dict, expected) -> CheckResult:
        asked: list = []

        def reference():
            """The reference's answer to these inputs, worked out once, where asked."""
            if not asked:
                asked.append(self._reference_answer(check, inputs))
            return asked[0]

        with PHASES.phase("judges"), precision_known() as leaned:
            status, diagnosis, staff, verdict = judge_answer(check, self.task, reply, inputs, expected,
                                                             self.audience, reference)
        if leaned and reply.answered and not (check.separately or check.parts):
            # A judge leaned on float32's precision: whether the code computed in float32 is
            # asked of what ran, and the answer judged again knowing it (_api, precision_known).
            ran = self._precision_ran(check, sent)
            if ran is not None:
                with PHASES.phase("judges"), precision_known(ran):
                    status, diagnosis, staff, verdict = judge_answer(check, self.task, reply, inputs, expected,
                                                                     self.audience, reference)
        certified = self.worker.certified if self.worker is not None else self.last_certified
        return CheckResult(check, status, str(diagnosis), certified=certified, staff_diagnosis=staff,
                           on_own_parts=isinstance(diagnosis, OwnPartsVerdict), verdict=verdict,
                           # read only where a check failed (answered, _trivial): not on every pass
                           answer=COMPUTED if status == PASSED else kind_of_answer(
                               reply.result, inputs, expected, reference if check.hidden and status == FAILED else None))

    def _reference_answer(self, check: Check, inputs: dict):
        """The probe's answer on the reference, in the grader's own process: what tells a
        trivial answer from a right one that looks so (kind_of_answer), and a wrong answer
        of the right form from a check at fault (feedback.judge_failure). None where it
        cannot be had."""
        reference = self.grading.reference
        if reference is None or check.separately or check.parts:
            return None
        try:
            with REFERENCE_RUNS, torch.random.fork_rng(devices=[]):
                torch.manual_seed(0)
                answer = check.probe(reference.modules, **{k: v for k, v in inputs.items() if not k.startswith("_")})
                # As a worker's answer arrives: plain data, read back as the grader reads it.
                return wire.decode(json.dumps(wire.encode(wire.plain(answer)), allow_nan=False).encode("utf-8"))
        except Exception:  # noqa: BLE001 - no answer to tell by: the answer counts as computed
            return None

    def call(self, check: Check, sent: dict, own: bool = False) -> ProbeReply:
        if self.worker is None and self.setup_failure is None and self.shared is not None and not own:
            self.worker = self.shared.get()
            self.on_shared = self.worker is not None
        if self.worker is None and self.setup_failure is None:
            self.worker, self.setup_failure = start_worker(self.task, self.grading, fresh=self.fresh_next)
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


def run_checks(task: Task, checks: list[Check], grading: Grading,
               shared: SharedWorker | None = None) -> list[CheckResult]:
    """Each of the task's checks run and judged, one worker after another (the group's
    first, where `shared`), in the order they ran (schedule.own_worker_checks_first)."""
    run, ran = TaskRun(task, grading, shared), []
    for check in own_worker_checks_first(checks):
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
    return ran
