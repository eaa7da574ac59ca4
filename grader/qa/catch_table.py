"""`make mutants`: run every mutant and variant of the task folders (grader/checks/chNN_*/<task>/mutants.py) through the grader
and print what it catches. Exit status 1 if a mutant survives or a variant loses a point."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from grader import KIT_ROOT
from grader.checks import catalogue
from grader.checks._api import PUBLIC_SEED
from grader.mutants import Mutant, Variant, catalogue as accuracy_catalogue
from grader.qa.accuracy_page import markdown_changes, markdown_table, page_rates, shown, write_page
from grader.qa.trivial_bodies import trivial_entries
from grader.run.results import PASSED
from grader.run.reference import Reference
from grader.run.engine import grade_task
from grader.run.worker_session import Grading
from grader.run.processes import Limits
from grader.run.sandbox import Sandbox
from grader.run.submission import Submission

# The public checks' own seed: their drawn inputs are the ones a student's check shows, and
# a table of them (grader/qa/trivial_bodies.py) is at its strongest.
SEED = PUBLIC_SEED


def check_words(name: str) -> str:
    """A check's name as words: ch05.block.zero_branch_identity -> 'block zero branch identity'."""
    return name.split(".", 1)[-1].replace("_", " ").replace(".", " ").lower()


@dataclass
class Outcome:
    entry: Mutant | Variant
    failed: list  # CheckResults that did not pass
    score: float
    max_score: float

    @property
    def caught(self) -> bool:
        """A mutant is caught when an expected check fails and names the mistake."""
        entry = self.entry
        return any(r.check.name in entry.expect and entry.keyword.lower() in r.diagnosis.lower()
                   for r in self.failed)

    @property
    def public(self) -> list:
        """The failed checks `make check` runs: judged without the reference."""
        return [r for r in self.failed if not r.check.hidden]

    @property
    def caught_publicly(self) -> bool:
        return bool(self.public)

    @property
    def first_shown(self):
        """The failed public check whose diagnosis a student reads first in `make check`: the
        first in the task's order that fails (a check that holds but waits for a value check,
        Check.gated_by, says nothing of the mistake), or None."""
        return next((r for r in self.public if not getattr(r, "gated", ())), None)

    @property
    def named_publicly(self) -> bool:
        """`make check` itself names the mistake: the keyword is in the first diagnosis it shows
        (first_shown), and is more than a word of that check's name. A later check that names
        it does not count: a student who reads the first sentence and fixes what it says must
        be fixing this mistake."""
        keyword, first = self.entry.keyword.lower(), self.first_shown
        return first is not None and keyword in first.diagnosis.lower() and keyword not in check_words(first.check.name)


def run_entry(entry, reference: Reference, sandbox: Sandbox, seed: int = SEED) -> Outcome:
    task = catalogue.tasks()[entry.task]
    sources = entry.apply(reference.sources)
    submission = Submission(f"{type(entry).__name__.lower()}:{entry.name}", sources)
    chapter = catalogue.chapter_of_task()[task.name]
    checks = [c for c in chapter.checks if c.task == task.name]
    results = grade_task(task, checks, Grading(submission, reference, sandbox, seed))
    failed = [r for r in results if r.status != PASSED]
    return Outcome(entry, failed, sum(r.score for r in results), sum(c.points for c in checks))


def chosen(entries: list, chapters: list[str] | None = None, tasks: list[str] | None = None) -> list:
    """The catalogue's entries of these chapters and tasks (all where neither is given)."""
    chapter_of = catalogue.chapter_of_task()
    return [e for e in entries if (not chapters or chapter_of[e.task].number in chapters)
            and (not tasks or e.task in tasks)]


def run_all(sandbox: Sandbox | None = None, trivial: bool = False, chapters: list[str] | None = None,
            tasks: list[str] | None = None):
    """(mutant outcomes, variant outcomes), and with trivial=True the outcomes of the
    bodies that compute nothing (grader.qa.trivial_bodies) third; only the chapters'
    and tasks' entries where given."""
    reference = Reference.available()
    mutants, variants = (chosen(entries, chapters, tasks) for entries in accuracy_catalogue())
    own = sandbox is None
    sandbox = sandbox or Sandbox(Limits())
    try:
        found = ([run_entry(m, reference, sandbox) for m in mutants],
                 [run_entry(v, reference, sandbox) for v in variants])
        if trivial:
            found += ([run_entry(t, reference, sandbox) for t in chosen(trivial_entries(), chapters, tasks)],)
        return found
    finally:
        if own:
            sandbox.close()


def rates(mutant_outcomes, variant_outcomes) -> tuple[float, float]:
    kill = sum(o.caught for o in mutant_outcomes) / max(1, len(mutant_outcomes))
    false_rejection = sum(o.score < o.max_score for o in variant_outcomes) / max(1, len(variant_outcomes))
    return kill, false_rejection


def public_rates(mutant_outcomes) -> tuple[float, float]:
    """(caught by `make check`, named by `make check`) as fractions of the mutants."""
    count = max(1, len(mutant_outcomes))
    return (sum(o.caught_publicly for o in mutant_outcomes) / count,
            sum(o.named_publicly for o in mutant_outcomes) / count)


NAMED_TARGET = 0.95

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.qa.catch_table", description=__doc__.split("\n\n")[0])
    parser.add_argument("--chapters", help="only these chapters' entries, e.g. 05 or 05,07 (make mutants CH=05)")
    parser.add_argument("--task", action="append", help="only this task's entries (repeatable)")
    parser.add_argument("--no-trivial", action="store_true", help="leave out the bodies that compute nothing")
    parser.add_argument("--write-docs", action="store_true", help="write docs/grader-accuracy.md (whole catalogue)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        chapters = catalogue.parse_chapters(args.chapters)
    except ValueError as unknown:
        parser.error(str(unknown))
    unknown_tasks = sorted(set(args.task or ()) - set(catalogue.tasks()))
    if unknown_tasks:
        parser.error(f"there is no task {unknown_tasks[0]!r}; tasks: {', '.join(catalogue.tasks())}")
    if args.write_docs and (chapters or args.task):
        parser.error("--write-docs writes the whole catalogue's page: leave out --chapters and --task (--chapters "
                     "alone updates its chapters' rows)")
    console = Console()
    with console.status("running the mutants and the correct variants…"):
        mutant_outcomes, variant_outcomes, *trivial = run_all(trivial=not args.no_trivial, chapters=chapters,
                                                              tasks=args.task)
    scoring = [o for outcomes in trivial for o in outcomes if o.score > 0]
    table = Table(title="Mutants: wrong implementations the grader must catch", expand=True)
    for column in ("mutant", "task", "failed checks", "diagnosis", "caught", "make check"):
        table.add_column(column)
    for o in mutant_outcomes:
        first = shown(o)
        public = ("[green]named" if o.named_publicly else "[yellow]yes") if o.caught_publicly else "[red]NO"
        table.add_row(o.entry.name, o.entry.task,
                      "\n".join(r.check.name.split(".", 1)[1] for r in o.failed) or "—",
                      first.diagnosis if first else "", "[green]yes" if o.caught else "[red]NO", public)
    console.print(table)
    variants = Table(title="Correct variants: right implementations that must get full marks", expand=True)
    for column in ("variant", "task", "score"):
        variants.add_column(column)
    for o in variant_outcomes:
        style = "green" if o.score == o.max_score else "red"
        detail = "" if o.score == o.max_score else " — " + "; ".join(f"{r.check.name}: {r.diagnosis}" for r in o.failed)
        variants.add_row(o.entry.name, o.entry.task, f"[{style}]{o.score:g}/{o.max_score:g}{detail}")
    console.print(variants)
    kill, false_rejection = rates(mutant_outcomes, variant_outcomes)
    public, named = public_rates(mutant_outcomes)
    n = len(mutant_outcomes)
    summary = (f"kill rate {kill:.1%} ({sum(o.caught for o in mutant_outcomes)}/{n} mutants caught with the right "
               f"diagnosis); caught by `make check` {public:.1%} ({sum(o.caught_publicly for o in mutant_outcomes)}/{n}); "
               f"named by `make check` {named:.1%} ({sum(o.named_publicly for o in mutant_outcomes)}/{n}); "
               f"false-rejection rate {false_rejection:.1%} "
               f"({sum(o.score < o.max_score for o in variant_outcomes)}/{len(variant_outcomes)} variants lost points)")
    if trivial:
        summary += (f"; bodies that compute nothing scoring points: {len(scoring)}/{len(trivial[0])}"
                    + "".join(f"\n  {o.entry.name}: {o.score:g}/{o.max_score:g}" for o in scoring))
    console.print(f"[bold]{summary}")
    if args.write_docs or chapters:
        doc = write_page(mutant_outcomes, variant_outcomes, whole=args.write_docs)
        console.print(f"wrote {doc}" + ("" if args.write_docs else f" (the rows of chapter(s) {', '.join(chapters)})"))
    if chapters:
        # The naming target is the catalogue's: one chapter may name fewer, another more.
        named = page_rates()[2]
        console.print(f"named by `make check` over the whole catalogue (the page's rows): {named:.1%}, "
                      f"against a target of {NAMED_TARGET:.0%}")
    return 0 if (kill == 1.0 and public == 1.0 and named >= NAMED_TARGET and false_rejection == 0.0
                 and not scoring) else 1


if __name__ == "__main__":
    sys.exit(main())
