"""Every status and diagnosis the grader gives the mutant catalogue and the correct
variants, as one JSON file: the before/after comparison for a change to the grader that
must not change a verdict.

    python -m grader.qa.outcomes before.json            # all checks, with the reference
    python -m grader.qa.outcomes after.json --public    # what `make check` shows (no reference)
    python -m grader.qa.outcomes --compare before.json after.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grader.qa.catch_table import SEED


def outcomes(public: bool, runner: str | None = None, groups: str | None = None) -> dict[str, list]:
    """Every entry's statuses and diagnoses. groups="on"/"off": grade, for each entry,
    every task of the group its task belongs to (all checks, with the reference), on one
    shared worker ("on") or one worker per task ("off"): what sharing must not change."""
    from grader.checks import catalogue
    from grader.mutants import catalogue as accuracy_catalogue
    from grader.run.reference import Reference
    from grader.run.dependencies import task_groups
    from grader.run.engine import grade_group, grade_task
    from grader.run.worker_session import Grading
    try:
        from grader.run.processes import open_runner
    except ImportError:  # before the process layer
        from grader.run.processes import Limits
        from grader.run.sandbox import Sandbox

        def open_runner(kind, with_reference):
            return Sandbox(Limits())
    from grader.run.submission import Submission

    reference = Reference.available()
    mutants, variants = accuracy_catalogue()
    found: dict[str, list] = {}
    with open_runner(runner or "sandbox", with_reference=not public) as processes:
        for entry in [*mutants, *variants]:
            task = catalogue.tasks()[entry.task]
            chapter = catalogue.chapter_of_task()[task.name]
            checks = [c for c in chapter.checks if c.task == task.name and not (public and c.hidden)]
            submission = Submission(f"{type(entry).__name__.lower()}:{entry.name}", entry.apply(reference.sources))
            if groups:
                group = next(g for g in task_groups(list(catalogue.tasks())) if task.name in g)
                items = [(catalogue.tasks()[name], [c for c in catalogue.chapter_of_task()[name].checks
                                                    if c.task == name]) for name in group]
                if groups == "on":
                    graded = grade_group(items, Grading(submission, reference, processes, SEED))
                else:
                    graded = [grade_task(t, cs, Grading(submission, reference, processes, SEED)) for t, cs in items]
                results = [r for task_results in graded for r in task_results]
            else:
                results = grade_task(task, checks, Grading(submission, None if public else reference, processes, SEED))
            found[f"{type(entry).__name__.lower()}:{entry.name}"] = [
                [r.check.name, r.status, r.diagnosis, *published(r)] for r in results]
    return found


def published(result) -> list[str]:
    """A hidden check's diagnosis as a student reads it once the check is published."""
    from grader.run.visible import visible_check

    if not result.check.hidden or result.status == "passed":
        return []
    return [visible_check(result).diagnosis]


def _graded(rows: list | None) -> list | None:
    return None if rows is None else [row[:3] for row in rows]


def compare(before: dict, after: dict) -> list[str]:
    """Every entry whose statuses or grader's sentences differ, then every hidden check whose
    published sentence differs (where both files hold it)."""
    differences = []
    for key in sorted(set(before) | set(after)):
        if _graded(before.get(key)) != _graded(after.get(key)):
            differences.append(f"{key}:\n  before {_graded(before.get(key))}\n  after  {_graded(after.get(key))}")
    for key in sorted(set(before) & set(after)):
        for old, new in zip(before[key], after[key]):
            if len(old) == len(new) == 4 and old[0] == new[0] and old[3] != new[3]:
                differences.append(f"{key} {old[0]} published:\n  before {old[3]}\n  after  {new[3]}")
    return differences


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.qa.outcomes", description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--public", action="store_true", help="public checks without the reference, as make check")
    parser.add_argument("--runner", choices=["sandbox", "portable"], default=None)
    parser.add_argument("--groups", choices=["on", "off"],
                        help="grade each entry's whole task group, sharing one worker (on) or not (off)")
    parser.add_argument("--compare", action="store_true", help="compare two files written before")
    args = parser.parse_args(argv)
    if args.compare:
        if len(args.files) != 2:
            parser.error("--compare takes two files written before")
        try:
            before, after = (json.loads(p.read_text(encoding="utf-8")) for p in args.files)
        except (OSError, ValueError) as problem:
            parser.error(f"cannot read the outcomes: {problem}")
        differences = compare(before, after)
        print("\n".join(differences) or f"identical: {len(before)} entries")
        return 1 if differences else 0
    found = outcomes(args.public, args.runner, args.groups)
    args.files[0].write_text(json.dumps(found, indent=1, ensure_ascii=False), encoding="utf-8")
    print(f"wrote {args.files[0]}: {len(found)} entries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
