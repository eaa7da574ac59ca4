"""docs/grader-accuracy.md, the page `make mutants` writes: what the grader catches, row by
row, read back to update a chapter's rows (`make mutants CH=05`), to check the page against
the catalogue (tests/test_accuracy_page.py) and to list the mistakes `make check` cannot
tell apart (`make student`). Reading it imports neither torch nor the checks."""

from __future__ import annotations

import re

from grader import KIT_ROOT

# The seed sweep's section, last on the page (grader.qa.seeds writes it).
SECTION = "## Every seed"

PAGE = KIT_ROOT / "docs" / "grader-accuracy.md"
_TABLE_HEADS = ("| mutant |", "| correct variant |")


def _page_rows(text: str) -> tuple[dict[str, str], dict[str, str], str]:
    """The page's mutant rows and variant rows by entry name, and what follows the change
    sections (the seed sweep's section, grader.qa.seeds), from a page written before."""
    mutants, variants, in_variants = {}, {}, False
    for line in text.splitlines():
        if line.startswith("| [") and "](#" in line:  # a mutant's row links to its change
            mutants[line[3:line.index("](#")]] = line
        elif line.startswith(_TABLE_HEADS[1]):  # the variants' rows follow their table's head
            in_variants = True
        elif in_variants and line.startswith("| "):
            variants[line[2:line.index(" |")]] = line
        elif not line.startswith("|"):
            in_variants = False
    tail = text[text.index("\n" + SECTION + "\n"):] if "\n" + SECTION + "\n" in text else ""
    return mutants, variants, tail


def shown(o):
    """The diagnosis a student meets first (Outcome.first_shown), else a hidden check's."""
    return o.first_shown or next(iter(o.public or o.failed), None)


def markdown_table(mutant_outcomes, variant_outcomes) -> str:
    lines = ["| mutant | task | mistake | failed checks (hidden in italics) | diagnosis `make check` shows | caught | "
             "caught by `make check` |", "|---|---|---|---|---|---|---|"]
    for o in mutant_outcomes:
        names = ", ".join(f"*{r.check.name.split('.', 1)[1]}*" if r.check.hidden else r.check.name.split(".", 1)[1]
                          for r in o.failed) or "—"
        first = shown(o)
        diagnosis = (first.diagnosis if first else "").replace("|", "\\|").replace("\n", " ")
        public = ("named" if o.named_publicly else "yes") if o.caught_publicly else "**NO**"
        lines.append(f"| [{o.entry.name}](#{o.entry.name}) | {o.entry.task} | {o.entry.mistake} | {names} | "
                     f"{diagnosis} | {'yes' if o.caught else '**NO**'} | {public} |")
    lines += ["", "| correct variant | task | note | score |", "|---|---|---|---|"]
    for o in variant_outcomes:
        lines.append(f"| {o.entry.name} | {o.entry.task} | {o.entry.note} | {o.score:g}/{o.max_score:g} |")
    return "\n".join(lines)


def markdown_changes(mutants) -> str:
    """Each mutant as what it changes in the reference: its patch (the changed lines), or,
    for a different short implementation, the region's whole body."""
    lines = ["## Each mistake, as a change to the reference", "",
             "A patch shows the lines of the reference's region (solutions/hero_transformer/, between "
             "`### BEGIN SOLUTION <task>` and `### END SOLUTION`) that the mutant removes (`-`) and what it "
             "writes instead (`+`); lines starting with two spaces are context, kept as they are. A mutant "
             "that is a different short implementation is shown whole."]
    for m in mutants:
        how = "its patch" if m.is_patch else "the whole region, rewritten"
        lines += ["", f"### {m.name}", "", f"`{m.task}`: {m.mistake} ({how})", "",
                  "```diff" if m.is_patch else "```python", m.shown, "```"]
    return "\n".join(lines)


def _row_rates(mutant_rows: list[str], variant_rows: list[str]) -> tuple[float, float, float, float]:
    """(kill, caught publicly, named publicly, false rejection), read back from the rows."""
    cells = [[c.strip() for c in row.strip("|").split(" | ")] for row in mutant_rows]
    count = max(1, len(cells))
    kill = sum(c[-2] == "yes" for c in cells) / count
    public = sum(c[-1] in ("named", "yes") for c in cells) / count
    named = sum(c[-1] == "named" for c in cells) / count

    def kept_every_point(row: str) -> bool:  # "3/3"; a row no run has written counts as lost
        score = row.strip("|").split(" | ")[-1].strip().split("/")
        return len(score) == 2 and all(re.fullmatch(r"[0-9.]+", n) for n in score) and float(score[0]) >= float(score[1])

    lost = sum(not kept_every_point(row) for row in variant_rows) / max(1, len(variant_rows))
    return kill, public, named, lost


def page_rates() -> tuple[float, float, float, float]:
    """The page's headline rates (kill, caught publicly, named publicly, false rejection):
    the whole catalogue's, as the last runs of each chapter wrote its rows."""
    mutants, variants, _ = _page_rows(PAGE.read_text(encoding="utf-8"))
    return _row_rates(list(mutants.values()), list(variants.values()))


def write_page(mutant_outcomes, variant_outcomes, whole: bool = True):
    """docs/grader-accuracy.md from this run: the whole page (`make mutants`), or, for a run
    of some chapters (`make mutants CH=05`), their rows replaced and every other row kept as
    the last run wrote it; the headline rates are read from the rows, so they are always the
    whole catalogue's. An entry no run has written yet says so (tests/test_accuracy_page.py
    fails on it)."""
    from grader.checks import catalogue
    from grader.mutants import catalogue as accuracy_catalogue
    mutants, variants = accuracy_catalogue()
    old_mutants, old_variants, tail = _page_rows(PAGE.read_text(encoding="utf-8")) if PAGE.exists() else ({}, {}, "")
    if whole:
        old_mutants, old_variants, tail = {}, {}, ""
    fresh = markdown_table(mutant_outcomes, variant_outcomes).splitlines()
    new_mutants, new_variants, _ = _page_rows("\n".join(fresh))
    mutant_rows = [new_mutants.get(m.name) or old_mutants.get(m.name) or _unrun_row(m) for m in mutants]
    variant_rows = [new_variants.get(v.name) or old_variants.get(v.name) or f"| {v.name} | {v.task} | {v.note} | "
                    f"not run yet: make mutants CH={catalogue.chapter_of_task()[v.task].number} |" for v in variants]
    kill, public, named, lost = _row_rates(mutant_rows, variant_rows)
    text = ("# What the grader catches\n\nGenerated by `make mutants` (a chapter's rows by `make mutants CH=NN`); "
            "do not edit by hand.\n\n"
            f"Kill rate: **{kill:.1%}**; caught by `make check` (public checks, judged without the "
            f"reference): **{public:.1%}**; named by `make check` (the mistake's word in the first public "
            f"check's diagnosis `make check` shows for it): **{named:.1%}**; false-rejection rate: **{lost:.1%}**.\n\n"
            "In the last column, *named* means `make check` fails and the first diagnosis it shows names the "
            "mistake; *yes* that it fails with a first diagnosis that does not; a hidden check names it then. "
            "A mutant's name links to the mistake itself, its change to the reference, below the "
            "tables.\n\n"
            + "\n".join(fresh[:2] + mutant_rows + ["", "| correct variant | task | note | score |", "|---|---|---|---|"]
                        + variant_rows) + "\n\n"
            + markdown_changes(mutants) + "\n" + tail)
    PAGE.parent.mkdir(exist_ok=True)
    PAGE.write_text(text, encoding="utf-8")
    return PAGE


def indistinct(text: str) -> list[str]:
    """Mistakes of one task that `make check` cannot tell apart, read from the page: two or
    more mutants whose first diagnosis is the same sentence, which names at most some of
    them. Each as a line saying what to do (`make student` prints them)."""
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for row in _page_rows(text)[0].values():
        cells = [c.strip() for c in row.strip().strip("|").split(" | ")]
        name, task, diagnosis, public = cells[0][1:cells[0].index("]")], cells[1], cells[4], cells[-1]
        if diagnosis and not diagnosis.startswith("not run yet"):
            groups.setdefault((task, diagnosis), []).append((name, public))
    found = []
    for (task, diagnosis), members in groups.items():
        if len(members) > 1 and any(public != "named" for _, public in members):
            names = ", ".join(name for name, _ in members)
            found.append(f"{task}: {names} get the same first sentence from `make check` "
                         f"(\"{diagnosis[:120]}\"), which names {'some' if any(p == 'named' for _, p in members) else 'none'} "
                         f"of them: give that check an input on which the mistakes differ, or make its sentence say each")
    return found


def _unrun_row(mutant) -> str:
    from grader.checks import catalogue

    chapter = catalogue.chapter_of_task()[mutant.task].number
    return (f"| [{mutant.name}](#{mutant.name}) | {mutant.task} | {mutant.mistake} | — | not run yet: make mutants "
            f"CH={chapter} | **NO** | **NO** |")


def main() -> int:
    """`make student`'s last look at the page: the mistakes `make check` cannot tell apart."""
    from rich.console import Console

    for line in indistinct(PAGE.read_text(encoding="utf-8")) if PAGE.exists() else []:
        Console().print(f"[yellow]not told apart:[/] {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
