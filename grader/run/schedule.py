"""What a grading runs, and in which order: the first of the engine's three layers.

Pure functions of the catalogue and the request, no process started: the plan (each
task with the checks it gets), the groups of tasks that may share a worker, the order
the grading threads take the groups in, and which tasks of other chapters a failing
check builds on. grader/run/worker_session.py runs what is planned here, and
grader/run/verdicts.py judges what comes back; grader/run/engine.py ties the three.
"""

from __future__ import annotations

from grader.checks import catalogue
from grader.checks._api import Check, Task
from grader.run.dependencies import task_groups
from grader.run.results import ERROR, FAILED, FORBIDDEN, LOAD_FAILED, TIMEOUT, CheckResult

# Each task with its checks, in the catalogue's order.
Plan = list[tuple[Task, list[Check]]]


def select_checks(chapters: list[str] | None, public_only: bool, tasks: "set[str] | None" = None) -> Plan:
    """The checks of these chapters (all, where None), of these tasks only where `tasks` is given."""
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


def possible_points(chapters: list[str] | None = None, public_only: bool = False) -> float:
    return sum(c.points for _, checks in select_checks(chapters, public_only) for c in checks)


def workers_needed(checks: list[Check]) -> int:
    """How many workers a task's checks start: one, plus one per side of each comparison."""
    return 1 + sum(len(c.separately) + len(c.parts) for c in checks)


def plan_groups(plan: Plan, grouped: bool) -> list[list[int]]:
    """The plan's tasks (as indices) in groups that may share a worker; one each when not grouped."""
    if not grouped:
        return [[i] for i in range(len(plan))]
    index = {task.name: i for i, (task, _) in enumerate(plan)}
    return [[index[name] for name in group] for group in task_groups([task.name for task, _ in plan])]


def costliest_first(plan: Plan, groups: list[list[int]]) -> list[int]:
    """The groups (as indices) with the most workers to start first, so that the grading
    threads finish about together."""
    return sorted(range(len(groups)), key=lambda g: -sum(workers_needed(plan[i][1]) for i in groups[g]))


def order_of_grading(plan: Plan, grouped: bool) -> list[Check]:
    """The plan's checks in about the order the grading threads reach them (the order
    their expected values are worked out ahead in)."""
    groups = plan_groups(plan, grouped)
    return [check for g in costliest_first(plan, groups) for i in groups[g] for check in plan[i][1]]


def own_worker_checks_first(checks: list[Check]) -> list[Check]:
    """A task's checks in the order one worker runs them: those that run in workers of
    their own (a comparison of two runs) first, so the rest then share one worker, where
    after them each would need a new one."""
    return sorted(checks, key=lambda c: not (c.separately or c.parts))


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
