"""`make task-check TASK=layer_norm`: everything the kit asks of one task, in about a minute.

    python -m grader.qa.task_check layer_norm

Each step says what it found and, when it fails, what to do: the solution region and
the student's stub agree, the facts and forms the public checks judge with are current,
the lesson names the task and its generated table is current, the reference earns every
point and the stub none, the task's mutants are caught and the first diagnosis `make check`
shows for each names its mistake, its correct variants keep every point, and bodies that
compute nothing earn nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from grader import KIT_ROOT
from grader.checks import catalogue


@dataclass
class Step:
    what: str
    problem: str = ""  # what is wrong and what to do; "" when the step holds
    seconds: float = 0.0


def _sync(task) -> str:
    from grader.generate import student_copy

    stale = [rel for rel in student_copy.stale_files() if rel == f"{task.module}.py"]
    return f"hero_transformer/{stale[0]} is not what solutions/ makes of it: run `make student`" if stale else ""


def _facts_and_forms(task) -> str:
    from grader.generate import facts, forms
    from grader.run.forms import FORMS_FILE, written

    chapter = catalogue.chapter_of_task()[task.name]
    stale = facts.stale(packages={chapter.module})
    if stale:
        return f"{stale[0].relative_to(KIT_ROOT)} is out of date: run `make student`"
    for folder, found in forms.computed(packages={chapter.module}).items():
        written.cache_clear()
        if folder.split("/")[0] == chapter.module and written(folder) != found:
            return f"grader/checks/{folder}/{FORMS_FILE} is out of date: run `make student`"
    return ""


def _lesson(task) -> str:
    from grader.generate import lesson_tables

    chapter = catalogue.chapter_of_task()[task.name]
    folder = lesson_tables.chapter_folders().get(chapter.number)
    if folder is None:
        return f"chapter {chapter.number} has no lesson folder under assignments/"
    readme = folder / "README.md"
    prose = lesson_tables.outside_block(readme.read_text(encoding="utf-8"))
    where = readme.relative_to(KIT_ROOT)
    if f"`{task.name}`" not in prose and f"({task.name}" not in prose:
        return f"{where} never names the task id `{task.name}` outside its generated table: say it where the task is taught"
    if task.qualname not in prose:
        return f"{where} never names {task.qualname}, the function the student fills in"
    try:
        stale = lesson_tables.stale()
    except lesson_tables.BlockError as problem:
        return f"{where}: {problem}"
    return f"{stale[0].relative_to(KIT_ROOT)}'s check table is out of date: run `make student`" if readme in stale else ""


def _scores(task, sandbox) -> str:
    from grader.run.engine import grade_task
    from grader.run.worker_session import Grading
    from grader.run.reference import Reference
    from grader.regions import package_sources
    from grader.run.submission import Submission

    reference = Reference.available()
    checks = [c for c in catalogue.chapter_of_task()[task.name].checks if c.task == task.name]
    full = grade_task(task, checks, Grading(Submission("reference", reference.sources), reference, sandbox, seed=1))
    lost = [r for r in full if r.status != "passed"]
    if lost:
        return f"the reference fails {lost[0].check.name}: {lost[0].diagnosis}"
    stubs = package_sources(KIT_ROOT / "hero_transformer")
    empty = grade_task(task, checks, Grading(Submission("stubs", stubs), reference, sandbox, seed=1))
    earned = [r for r in empty if r.status == "passed"]
    if earned:
        return f"the stub passes {earned[0].check.name}: the check must fail where the task is not written"
    return ""


def _catalogue(task, sandbox) -> list[Step]:
    from grader.qa import catch_table

    steps = []
    started = time.perf_counter()
    mutants, variants, trivial = catch_table.run_all(sandbox, trivial=True, tasks=[task.name])
    spent = time.perf_counter() - started
    if not mutants:
        steps.append(Step("its mutants are caught", f"{task.name} has no mutant: add one in "
                          f"grader/checks/{catalogue.chapter_of_task()[task.name].module}/{task.name}/"
                          f"{catalogue.MUTANTS}.py"))
    else:
        missed = [o for o in mutants if not o.caught]
        unnamed = [o for o in mutants if o.caught and not o.caught_publicly]
        problem = (f"mutant {missed[0].entry.name} is not caught with its word '{missed[0].entry.keyword}' by "
                   f"{', '.join(missed[0].entry.expect)}" if missed else
                   f"mutant {unnamed[0].entry.name} is caught by hidden checks only: a public check must fail too"
                   if unnamed else "")
        steps.append(Step(f"its {len(mutants)} mutants are caught", problem))
        misnamed = [o for o in mutants if o.caught_publicly and not o.named_publicly]
        first = misnamed[0].first_shown if misnamed else None
        steps.append(Step(
            "the first diagnosis `make check` shows for each mutant names its mistake",
            (f"mutant {misnamed[0].entry.name}: `make check` shows first "
             f"{first.check.name if first else 'a gated check'}: \"{(first.diagnosis if first else '')[:200]}\", "
             f"which does not say '{misnamed[0].entry.keyword}'; make that check's input tell this mistake from "
             f"the ones it names, or its diagnosis say both" + (f" ({len(misnamed) - 1} more)" if len(misnamed) > 1
                                                                    else "")) if misnamed else ""))
    losing = [o for o in variants if o.score < o.max_score]
    steps.append(Step(f"its {len(variants)} correct variants keep every point",
                      f"variant {losing[0].entry.name} scores {losing[0].score:g}/{losing[0].max_score:g}: "
                      f"{'; '.join(r.diagnosis for r in losing[0].failed)[:300]}" if losing else ""))
    scoring = [o for o in trivial if o.score > 0]
    steps.append(Step("bodies that compute nothing earn nothing",
                      f"{scoring[0].entry.name} earns {scoring[0].score:g} points: gate the property checks it "
                      f"passes (gated_by=...) on a value check" if scoring else ""))
    for step in steps:
        step.seconds = spent / len(steps)
    return steps


def run(name: str) -> list[Step]:
    from grader.run.processes import Limits
    from grader.run.sandbox import Sandbox

    task = catalogue.tasks()[name]
    steps = []
    for what, step in (("the region and the student's stub agree", _sync),
                       ("the facts and forms its public checks judge with are current", _facts_and_forms),
                       ("the lesson names it and its check table is current", _lesson)):
        started = time.perf_counter()
        steps.append(Step(what, step(task), time.perf_counter() - started))
    with Sandbox(Limits()) as sandbox:
        started = time.perf_counter()
        steps.append(Step("the reference earns every point, the stub none", _scores(task, sandbox),
                          time.perf_counter() - started))
        steps += _catalogue(task, sandbox)
    return steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.qa.task_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("task", help="the task's id, as its solution region names it (layer_norm)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    console = Console()
    if args.task not in catalogue.tasks():
        console.print(f"[red]There is no task {escape(args.task)!r}.[/] A task is a solution region "
                      f"(### BEGIN SOLUTION {escape(args.task)}) with checks in its chapter's grader/checks package; "
                      f"`make new-task CH=NN TASK={escape(args.task)}` writes both. Tasks: "
                      f"{', '.join(catalogue.tasks())}")
        return 2
    with console.status(f"checking {args.task}…"):
        steps = run(args.task)
    table = Table(title=f"task {args.task}", expand=True)
    for column in ("step", "", "s"):
        table.add_column(column)
    for step in steps:
        mark = "[green]ok" if not step.problem else "[red]no"
        table.add_row(escape(step.what) + (f"\n[red]{escape(step.problem)}" if step.problem else ""), mark,
                      f"{step.seconds:.0f}")
    console.print(table)
    failing = [s for s in steps if s.problem]
    console.print(f"[bold]{len(steps) - len(failing)} of {len(steps)} steps hold" + (
        "" if not failing else f"; first to fix: {escape(failing[0].problem)}"))
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
