"""What the student's own check says when one task is wrong and the rest is right: the
release holds no reference, so every task runs on the student's own parts, and a wrong
part must not fail the right tasks built on it (grader.run.verdicts.apply_waits, and the
judges that judge a task on its own parts).

For each mutant of the catalogue whose task other tasks build on (the task graph,
grader.run.dependencies), those tasks are graded as the release grades them (public
checks, no reference), one chapter at a time as a student runs `check.py 06` (or, with
--whole, together with the mutant's task in one run). Every check of another task that does not
pass is graded again as the course grades it (certified parts) and listed: it must pass
there, and here it must pass too or be waiting on the mutated task.

    python -m grader.qa.own_parts                # every such mutant
    python -m grader.qa.own_parts --task layer_norm --json out.json
    python -m grader.qa.own_parts --whole        # each mutant's task and those built on it in one run
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field

from grader.checks import catalogue
from grader.qa.catch_table import SEED
from grader.mutants import Mutant, catalogue as accuracy_catalogue
from grader.run.dependencies import task_graph
from grader.run.engine import grade
from grader.run.reference import Reference
from grader.run.results import PASSED, WAITING
from grader.run.submission import Submission


@dataclass
class Downstream:
    """A mutant's effect on the checks of the tasks it did not touch."""

    mutant: str
    task: str
    # [check, status in the release, its diagnosis, status as the course grades it]
    not_passed: list[list[str]] = field(default_factory=list)
    points: float = 0.0

    def wrong(self) -> list[list[str]]:
        """Checks of right tasks that fail without saying they wait on the mutated task."""
        return [row for row in self.not_passed
                if not (row[1] == WAITING and f"'{self.task}'" in row[2])]

    def misleading(self) -> list[list[str]]:
        """Failures whose sentence does not name the task that is wrong."""
        return [row for row in self.not_passed if self.task not in row[2]]


def dependents(task: str, graph: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    graph = task_graph() if graph is None else graph
    return [t for t, parts in graph.items() if task in parts]


def entries(tasks: "set[str] | None" = None) -> list[Mutant]:
    graph = task_graph()
    built_on = {part for parts in graph.values() for part in parts}
    mutants, _ = accuracy_catalogue()
    return [m for m in mutants if m.task in built_on and (tasks is None or m.task in tasks)]


def downstream(mutant: Mutant, runner, reference: Reference, whole: bool = False) -> Downstream:
    """How the release grades the tasks built on the mutated one: one chapter at a time, as
    a student mostly checks (`check.py 06`: the mutated task is in the run only where it is
    of that chapter), or with `whole`, the mutated task and every task built on it in one run."""
    graph = task_graph()
    later = dependents(mutant.task, graph)
    submission = Submission(f"mutant:{mutant.name}", mutant.apply(reference.sources))
    chapter = {t: c.number for t, c in catalogue.chapter_of_task().items()}
    runs = ([{mutant.task, *later}] if whole else
            [{t for t in later if chapter[t] == number} | ({mutant.task} if chapter[mutant.task] == number else set())
             for number in sorted({chapter[t] for t in later})])
    results = [r for tasks in runs
               for r in grade(submission, public_only=True, runner=runner, seed=SEED, use_reference=False,
                              tasks=tasks).results]
    found = Downstream(mutant.name, mutant.task)
    others = [r for r in results if r.check.task != mutant.task and r.status != PASSED]
    if others:
        course = grade(submission, public_only=True, runner=runner, seed=SEED,
                       tasks={r.check.task for r in others})
        as_graded = {r.check.name: r.status for r in course.results}
        for result in others:
            found.not_passed.append([result.check.name, result.status, result.diagnosis,
                                     as_graded.get(result.check.name, "?")])
            found.points += result.check.points
    return found


def run(tasks: "set[str] | None" = None, whole: bool = False) -> list[Downstream]:
    from grader.run.runners import open_runner

    reference = Reference.available()
    with open_runner("sandbox", with_reference=True) as runner:
        return [downstream(m, runner, reference, whole) for m in entries(tasks)]


def summary(found: list[Downstream]) -> str:
    hit = [f for f in found if f.not_passed]
    rows = [row for f in found for row in f.not_passed]
    wrong = [row for f in found for row in f.wrong()]
    return (f"{len(found)} mutants of tasks others build on; {len(hit)} leave a check of a right task not passing: "
            f"{len(rows)} checks, {sum(f.points for f in found):g} points, "
            f"{sum(len(f.misleading()) for f in found)} with a sentence that does not name the wrong task, "
            f"{sum(r[1] == WAITING for r in rows)} waiting on it; {len(wrong)} fail without waiting on it")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.qa.own_parts", description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", action="append", help="only the mutants of this task (repeatable)")
    parser.add_argument("--chapters", help="only the mutants of these chapters' tasks, e.g. 05 or 05,07")
    parser.add_argument("--json", help="write every downstream check's status and diagnosis here")
    parser.add_argument("--whole", action="store_true",
                        help="grade each mutant's task with every task built on it in one run, instead of one "
                             "chapter at a time")
    args = parser.parse_args(argv)
    unknown = set(args.task or ()) - set(catalogue.tasks())
    if unknown:
        parser.error(f"no such task: {', '.join(sorted(unknown))}")
    try:
        chapters = catalogue.parse_chapters(args.chapters)
    except ValueError as problem:
        parser.error(str(problem))
    tasks = set(args.task) if args.task else None
    if chapters:
        in_chapters = {t.name for c in catalogue.chapters() if c.number in chapters for t in c.tasks}
        tasks = in_chapters & tasks if tasks else in_chapters
    found = run(tasks, args.whole)
    for entry in found:
        for row in entry.wrong():
            print(f"{entry.mutant}: {row[0]} {row[1]} (course: {row[3]}): {row[2]}")
    print(summary(found))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump([vars(f) for f in found], handle, indent=1, ensure_ascii=False)
    return 1 if any(f.wrong() for f in found) else 0


if __name__ == "__main__":
    sys.exit(main())
