"""`make mutants`: run every mutant and variant of grader/accuracy through the grader
and print what it catches. Exit status 1 if a mutant survives or a variant loses a point."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from grader import catalogue
from grader.accuracy import Mutant, Variant, apply, catalogue as accuracy_catalogue
from grader.engine import PASSED, Reference, grade_task
from grader.sandbox import Limits, Sandbox
from grader.submission import Submission

SEED = 20261129


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


def run_entry(entry, reference: Reference, sandbox: Sandbox, seed: int = SEED) -> Outcome:
    task = catalogue.tasks()[entry.task]
    sources = apply(reference.sources, task.module, task.name, entry.body)
    submission = Submission(f"{type(entry).__name__.lower()}:{entry.name}", sources)
    chapter = catalogue.chapter_of_task()[task.name]
    checks = [c for c in chapter.checks if c.task == task.name]
    results = grade_task(task, checks, submission, reference, sandbox, seed)
    failed = [r for r in results if r.status != PASSED]
    return Outcome(entry, failed, sum(r.score for r in results), sum(c.points for c in checks))


def run_all(sandbox: Sandbox | None = None):
    reference = Reference.available()
    mutants, variants = accuracy_catalogue()
    own = sandbox is None
    sandbox = sandbox or Sandbox(Limits())
    try:
        return ([run_entry(m, reference, sandbox) for m in mutants],
                [run_entry(v, reference, sandbox) for v in variants])
    finally:
        if own:
            sandbox.close()


def markdown_table(mutant_outcomes, variant_outcomes) -> str:
    lines = ["| mutant | task | mistake | failed checks | diagnosis | caught |", "|---|---|---|---|---|---|"]
    for o in mutant_outcomes:
        names = ", ".join(r.check.name.split(".", 1)[1] for r in o.failed) or "—"
        diagnosis = (o.failed[0].diagnosis if o.failed else "").replace("|", "\\|")
        lines.append(f"| {o.entry.name} | {o.entry.task} | {o.entry.mistake} | {names} | {diagnosis} | "
                     f"{'yes' if o.caught else '**NO**'} |")
    lines += ["", "| correct variant | task | note | score |", "|---|---|---|---|"]
    for o in variant_outcomes:
        lines.append(f"| {o.entry.name} | {o.entry.task} | {o.entry.note} | {o.score:g}/{o.max_score:g} |")
    return "\n".join(lines)


def rates(mutant_outcomes, variant_outcomes) -> tuple[float, float]:
    kill = sum(o.caught for o in mutant_outcomes) / max(1, len(mutant_outcomes))
    false_rejection = sum(o.score < o.max_score for o in variant_outcomes) / max(1, len(variant_outcomes))
    return kill, false_rejection


def main() -> int:
    console = Console()
    with console.status("running the mutants and the correct variants…"):
        mutant_outcomes, variant_outcomes = run_all()
    table = Table(title="Mutants: wrong implementations the grader must catch", expand=True)
    for column in ("mutant", "task", "failed checks", "diagnosis", "caught"):
        table.add_column(column)
    for o in mutant_outcomes:
        table.add_row(o.entry.name, o.entry.task,
                      "\n".join(r.check.name.split(".", 1)[1] for r in o.failed) or "—",
                      o.failed[0].diagnosis if o.failed else "", "[green]yes" if o.caught else "[red]NO")
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
    console.print(f"[bold]kill rate {kill:.1%}[/] ({sum(o.caught for o in mutant_outcomes)}/{len(mutant_outcomes)} "
                  f"mutants caught with the right diagnosis); [bold]false-rejection rate {false_rejection:.1%}[/] "
                  f"({sum(o.score < o.max_score for o in variant_outcomes)}/{len(variant_outcomes)} variants lost points)")
    if "--write-docs" in sys.argv:
        from pathlib import Path

        doc = Path(__file__).resolve().parent.parent / "docs" / "grader-accuracy.md"
        doc.parent.mkdir(exist_ok=True)
        doc.write_text("# What the grader catches\n\nGenerated by `make mutants`; do not edit by hand.\n\n"
                       f"Kill rate: **{kill:.1%}**; false-rejection rate: **{false_rejection:.1%}**.\n\n"
                       + markdown_table(mutant_outcomes, variant_outcomes) + "\n", encoding="utf-8")
        console.print(f"wrote {doc}")
    return 0 if kill == 1.0 and false_rejection == 0.0 else 1


if __name__ == "__main__":
    sys.exit(main())
