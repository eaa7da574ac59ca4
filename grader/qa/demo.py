"""`make demo`: the first thing to run. Grades the reference, the untouched student
copy, and a handful of typical wrong or hostile submissions, and shows what a
student would read for each."""

from __future__ import annotations

from rich.console import Console
from rich.rule import Rule
from rich.table import Table

from grader import KIT_ROOT
from grader.checks import catalogue
from grader.mutants import apply, catalogue as accuracy_catalogue
from grader.run.reference import Reference
from grader.run.engine import grade
from grader.run.report import render
from grader.run.processes import Limits
from grader.run.sandbox import Sandbox
from grader.run.submission import Submission, load

ROOT = KIT_ROOT

# (what a TA would call it, mutant name from a task's mutants.py, chapters to grade)
TYPICAL_MISTAKES = [
    ("GELU written with the tanh approximation", "gelu_tanh", ["05"]),
    ("a post-LN block", "block_post_ln", ["05"]),
    ("attention without the causal mask", "attention_no_causal_mask", ["04"]),
]


def _hostile(reference: Reference) -> Submission:
    task = catalogue.tasks()["layer_norm"]
    body = "while True:  # a forward that never returns\n    pass"
    return Submission("a LayerNorm that loops forever", apply(reference.sources, task.module, task.name, body))


def run_demo(console: Console | None = None) -> int:
    console = console or Console()
    reference = Reference.available()
    mutants = {m.name: m for m in accuracy_catalogue()[0]}
    summary = Table(title="Demo summary", expand=True)
    for column in ("submission", "chapters", "score", "checks failed"):
        summary.add_column(column)
    with Sandbox(Limits(check_seconds=3.0)).start() as sandbox:
        cases = [("the reference solution", load(ROOT / "solutions" / "hero_transformer"), None),
                 ("the untouched student copy", load(ROOT / "hero_transformer"), ["05"])]
        for label, name, chapters in TYPICAL_MISTAKES:
            entry = mutants[name]
            cases.append((label, Submission(label, entry.apply(reference.sources)), chapters))
        cases.append(("a LayerNorm that loops forever", _hostile(reference), ["05"]))
        for label, submission, chapters in cases:
            console.print(Rule(f"[bold]{label}"))
            report = grade(submission, chapters, runner=sandbox, seed=2026)
            render(report, console)
            failed = sum(r.status != "passed" for r in report.results)
            summary.add_row(label, ", ".join(chapters) if chapters else "all",
                            f"{report.score:g}/{report.max_score:g}", str(failed))
    console.print(summary)
    console.print("Next: [bold]make check[/] runs the public checks on your own hero_transformer/; "
                  "[bold]make grade SUB=path[/] grades an upload with the hidden checks too.")
    return 0
