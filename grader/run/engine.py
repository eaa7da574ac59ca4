"""The check engine shared by `make check` (public checks) and `make grade` (all).

For each task: scan the student's function for forbidden calls, fork a sandboxed
worker holding the student's package plus the certified parts minus this task, send
it one probe at a time, and judge each answer here, where the reference and the
expected values live. Nothing the worker does can stop the run: every failure turns
into a check status with a reason.

It works in three layers, each a module of its own: grader/run/schedule.py plans what
runs and in which order (pure functions of the catalogue); grader/run/worker_session.py
runs each check on a worker and judges its answer; grader/run/verdicts.py makes a task's
results count (gates, waits, verdicts). This module ties them: one task, one group of
tasks, one upload.
"""

from __future__ import annotations

import secrets
import time
from concurrent.futures import ThreadPoolExecutor

import torch

from grader.checks._api import Check, Task
from grader.run.answers import Answers
from grader.run.dependencies import task_graph, worker_holdings
from grader.run.feedback import Audience
from grader.run.processes import Runner, RunnerRefused
from grader.profile import PHASES
from grader.run.reference import Reference
from grader.run.results import ERROR, FORBIDDEN, CheckResult, GradeReport
from grader.run.runners import WHERE_GRADING_RUNS, open_runner
from grader.run.scan_calls import scan
from grader.run.scan_tampering import scan_submission, tampering_reason
from grader.run.schedule import Plan, costliest_first, order_of_grading, parts_outside, plan_groups, select_checks
from grader.run.stopping import result_of, whole
from grader.run.submission import Submission
from grader.run.verdicts import apply_waits, task_verdicts, with_verdicts
from grader.run.worker_session import Grading, SharedWorker, run_checks, submission_deadline


def grade_task(task: Task, checks: list[Check], grading: Grading, shared: SharedWorker | None = None,
               scan_for_tampering: bool = True) -> list[CheckResult]:
    """Grade one task's checks, in the order given. Never raises for anything the
    submission does: every failure is a check status. `shared`: the worker of the task's
    group (grade_group). scan_for_tampering=False lets tests reach the layers behind the
    static scan. RunnerRefused when the runner may not hold what the run needs: the
    reference, or a hidden check."""
    if not grading.runner.holds_reference and (grading.reference is not None or any(c.hidden for c in checks)):
        raise RunnerRefused(WHERE_GRADING_RUNS)
    refused = _refused_by_the_scans(task, checks, grading.submission, scan_for_tampering)
    if refused is not None:
        return with_verdicts(refused)
    return task_verdicts(run_checks(task, checks, grading, shared), checks)


def _refused_by_the_scans(task: Task, checks: list[Check], submission: Submission,
                          scan_for_tampering: bool) -> list[CheckResult] | None:
    """Every check refused, where the static scans find the upload tampering with the
    grader or the task's function calling what the task forbids; None where they don't."""
    try:
        with PHASES.phase("task scans"):
            tampering = scan_submission(submission.sources) if scan_for_tampering else []
            hits = scan(submission.sources.get(f"{task.module}.py", ""), task.qualname, task.forbidden,
                        task.forbidden_methods)
    except Exception as error:  # noqa: BLE001 - a scan that breaks costs this task, never the submission
        return [CheckResult(c, ERROR, f"the grader failed while reading the submission; please "
                                      f"report it ({type(error).__name__})") for c in checks]
    if tampering:
        return [CheckResult(c, FORBIDDEN, tampering_reason(tampering)) for c in checks]
    if hits:
        reason = f"{task.qualname} uses {hits[0]} — the point of this task is to write it yourself"
        return [CheckResult(c, FORBIDDEN, reason) for c in checks]
    return None


def grade_group(items: Plan, grading: Grading) -> list[list[CheckResult]]:
    """Grade a group of tasks (grader.run.dependencies.task_groups) one after another on
    one worker, each task's results as grade_task gives them; a group of one is a task."""
    if len(items) == 1:
        task, checks = items[0]
        return [grade_task(task, checks, grading)]
    shared = SharedWorker([task for task, _ in items], grading)
    graded = []
    try:
        for task, checks in items:
            graded.append(grade_task(task, checks, grading, shared=shared))
    finally:
        output = shared.close()
    if output and graded and graded[-1]:
        shown, staff = grading.audience.output(output)
        last = graded[-1][-1]
        last.output, last.staff_output = last.output or shown, last.staff_output or staff
    return graded


def _grade_plan(plan: Plan, grading: Grading, pool: ThreadPoolExecutor, grouped: bool) -> list[CheckResult]:
    """Every check of the plan graded on the pool's threads, the costliest groups first;
    the results in the plan's order, whatever order they were graded in."""
    groups = plan_groups(plan, grouped)
    futures = {g: pool.submit(grade_group, [plan[i] for i in groups[g]], grading)
               for g in costliest_first(plan, groups)}
    by_task = {}
    for g, members in enumerate(groups):
        for i, results in zip(members, result_of(futures[g])):
            by_task[i] = results
    return [result for i in range(len(plan)) for result in by_task[i]]


def _import_package(runner: Runner, submission: Submission, plan: Plan) -> object:
    with PHASES.phase("package import"):
        return runner.package(submission.sources) if plan and submission.sources else None


def grade(submission: Submission, chapters: list[str] | None = None, public_only: bool = False,
          runner: Runner | None = None, seed: int | None = None, parallel: int | None = None,
          use_reference: bool = True, grouped: bool = True, tasks: "set[str] | None" = None,
          for_the_author: bool = False) -> GradeReport:
    """Grade a submission's tasks. for_the_author=True: the report is read by the
    code's author alone (`check`), never recorded as a grade, so what the code raised
    and printed is shown whole even beside certified parts (feedback.Audience).
    grouped=True lets tasks that cannot see each other share a worker where the
    reference is at hand (grader.run.dependencies); False gives every task workers of its
    own (kept to compare the two). `tasks`: only these tasks of the chapters (by name),
    for the kit's own tools."""
    started = time.perf_counter()
    reference = Reference.available() if use_reference else None
    if runner is not None and not runner.holds_reference and (reference is not None or not public_only):
        raise RunnerRefused(WHERE_GRADING_RUNS)
    seed = secrets.randbelow(2**31) if seed is None else seed
    plan = select_checks(chapters, public_only, tasks)
    grouped = reference is not None and grouped
    # The grading threads are the parallelism here: torch's own helper threads beside them
    # only contend for the same cores (and spin while they wait). One thread per op also
    # computes the expected values as the runner computes the answers.
    torch.set_num_threads(1)
    processes = _Processes(runner, reference is not None or not public_only, parallel, submission, plan)
    deadline = submission_deadline(processes.runner.limits)
    answers = Answers(seed, reference)
    try:
        _read_ahead(submission, reference, plan)
        in_order = order_of_grading(plan, grouped)
        # While the sandbox's zygote still imports torch beside this process, the wait would pass idle.
        booting = getattr(processes.runner, "booting", None)
        if booting is not None:
            answers.ahead(in_order, until=booting)
        imported = processes.package()
        if processes.parallel > 1:  # one thread (a profile): phases must not overlap, so nothing runs beside it
            answers.ahead_on_a_thread(in_order)
        # One audience for the upload: what of the reference it does not hold is worked out once.
        grading = Grading(submission, reference, processes.runner, seed, deadline, imported,
                          Audience(submission, reference, for_the_author=for_the_author), answers=answers)
        results = _grade_plan(plan, grading, processes.pool, grouped)
        if reference is None:
            _wait_on_own_parts(results, grading, processes.pool)
        processes.pool.shutdown()
    except BaseException as stop:
        processes.stop(interrupted=isinstance(stop, KeyboardInterrupt))
        raise
    finally:
        answers.stop()
        described = processes.close()
    certified = ("the reference, for the parts each task builds on" if reference
                 else "none available: each task uses your own code for the parts it builds on")
    return GradeReport(submission.label, with_verdicts(results), described, certified, time.perf_counter() - started)


class _Processes:
    """What one upload's grading runs on: the runner (opened here where the caller gave
    none, and closed here then), the grading threads, and the package imported once."""

    def __init__(self, runner: Runner | None, with_reference: bool, parallel: int | None, submission: Submission,
                 plan: Plan):
        self.own_runner = runner is None
        self.runner = runner or open_runner(with_reference=with_reference)
        self.parallel = parallel or self.runner.threads
        self.pool = ThreadPoolExecutor(max_workers=self.parallel)
        self.submission, self.plan = submission, plan
        self.imported, self.interrupted = None, False
        # The package imported once for all tasks, where the runner can seal that process: begun
        # at once, on a grading thread, while this one reads the reference and plans (a
        # profile's one thread does one after the other, so that its phases stay apart).
        self.importing = (self.pool.submit(_import_package, self.runner, submission, plan) if self.parallel > 1
                          else None)

    def package(self) -> object:
        """The package imported once (None where each worker imports it)."""
        self.imported = (result_of(self.importing) if self.importing is not None
                         else _import_package(self.runner, self.submission, self.plan))
        return self.imported

    def stop(self, interrupted: bool) -> None:
        """Ctrl-C (or anything else): drop what has not started; closing the runner ends the rest."""
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.interrupted = interrupted
        if interrupted:
            # At once, so that the threads waiting on workers (and on the package's import)
            # are answered now, not when their time limits run out.
            with whole():
                self.runner.close()

    def close(self) -> str:
        """Everything ended; how the runner ran (runner.describe)."""
        if self.imported is None and self.importing is not None and not self.interrupted:
            self.imported = _import_left_over(self.importing)  # the plan failed while it imported
        with PHASES.phase("shutdown"):
            described = self.runner.describe(imported_once=self.imported is not None)
            if self.imported is not None:
                self.imported.close()
            if self.own_runner:
                self.runner.close()
        return described


@PHASES.phase("reference and plan")
def _read_ahead(submission: Submission, reference: Reference | None, plan: Plan) -> None:
    """What every grading thread reads, read once on this one before they start."""
    if reference is not None:
        reference.modules  # import it once here, not from two grading threads at once
        worker_holdings([task.name for task, _ in plan])  # here, before two threads each set about it
    # Scanned once, before the threads (the scan caches what it finds per upload).
    try:
        scan_submission(submission.sources)
    except Exception:  # noqa: BLE001 - each task reports a failing scan itself
        pass


def _wait_on_own_parts(results: list[CheckResult], grading: Grading, pool: ThreadPoolExecutor) -> None:
    """Where no certified part stood in: a failing part the checks build on makes them wait
    (verdicts.apply_waits). A part from a chapter outside this run may be what fails a check
    here: its own public checks are run too, quietly, so a chapter's verdicts are the
    whole run's."""
    graph = task_graph()
    outside = parts_outside(results, graph)
    quiet = _grade_plan(select_checks(None, True, outside), grading, pool, False)
    apply_waits(results + quiet, graph, outside)


def _import_left_over(importing) -> object:
    """The package's import, begun before the grading failed, so that its process ends too."""
    try:
        return result_of(importing)
    except Exception:  # noqa: BLE001 - nothing was imported, so nothing is left to end
        return None
