"""The points and check counts the prose states, kept the catalogue's.

    python -m grader.generate.doc_totals            rewrite every stated total that differs
    python -m grader.generate.doc_totals --check    exit 1 (each with its line) where one differs

README.md, docs/teaching.md and the Autolab back end's docstring give totals in running
text ("all ten chapters (355 points)", "chapter 05 only, 38 points", `{"ch05": 38}`,
"205 checks"): `make student` rewrites each number from grader.checks.catalogue, so a
task or a check added changes them with no edit by hand, and tests/test_docs_totals.py
fails on a number left stale. The words around the numbers are the docs' own.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from grader import KIT_ROOT

DOCS = ("README.md", "docs/teaching.md", "grader/lms/autolab.py")
# Each pattern names the number (n) and, where there is one, the chapter (ch) or the kind
# of checks (kind). A line break may fall between any two words.
ALL = re.compile(r"all\s+(?:ten\s+)?chapters\W{0,4}(?P<n>\d[\d,]*)(?=\s+points)")
ONE = (re.compile(r"chapter\s+(?P<ch>\d\d)\s+only\W{0,4}(?P<n>\d+)(?=\s+points)"),
       re.compile(r"`ch(?P<ch>\d\d)`\s+is\s+(?P<n>\d+)"),
       re.compile(r"\"ch(?P<ch>\d\d)\":\s+(?P<n>\d+)"))
CHECKS = re.compile(r"(?P<n>\d[\d,]*)(?=\s+(?:(?P<kind>hidden|public)\s+)?checks(?!\s+of))")
SMALL = 20  # "2 checks" of one task is no course-wide count


def _points(chapters=None) -> str:
    from grader.checks import catalogue

    return f"{sum(c.points for c in catalogue.all_checks() if chapters is None or c.chapter in chapters):g}"


def _counts() -> dict[str, int]:
    from grader.checks import catalogue

    checks = catalogue.all_checks()
    return {"": len(checks), "hidden": sum(c.hidden for c in checks), "public": sum(not c.hidden for c in checks)}


def corrected(text: str) -> tuple[str, list[tuple[int, str, str]]]:
    """The text with every stated total the catalogue's, and [(line, stated, right)] of
    those that were not."""
    changes: list[tuple[int, str, str]] = []

    def line_of(position: int) -> int:
        return text.count("\n", 0, position) + 1

    def replace(pattern: re.Pattern, right_for) -> None:
        nonlocal text
        pieces, last = [], 0
        for match in pattern.finditer(text):
            stated, right = match["n"], right_for(match)
            if right is None or stated.replace(",", "") == right:
                continue
            changes.append((line_of(match.start("n")), stated, right))
            pieces += [text[last:match.start("n")], right]
            last = match.end("n")
        text = "".join(pieces) + text[last:]

    replace(ALL, lambda match: _points())
    for pattern in ONE:
        replace(pattern, lambda match: _points({match["ch"]}))
    counts = _counts()
    replace(CHECKS, lambda match: str(counts[match["kind"] or ""]) if int(match["n"].replace(",", "")) > SMALL
            else None)
    return text, sorted(changes)


def stale(root: Path = KIT_ROOT) -> list[str]:
    """'doc line N: says X, the catalogue Y' for each stated total that differs."""
    found = []
    for doc in DOCS:
        _, changes = corrected((root / doc).read_text(encoding="utf-8"))
        found += [f"{doc} line {line}: says {stated}, the catalogue {right}" for line, stated, right in changes]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.generate.doc_totals", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say which totals are stale")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.check:
        found = stale()
        for line in found:
            print(line, file=sys.stderr)
        return 1 if found else 0
    for doc in DOCS:
        path = KIT_ROOT / doc
        text, changes = corrected(path.read_text(encoding="utf-8"))
        if changes:
            path.write_text(text, encoding="utf-8")
            for line, stated, right in changes:
                print(f"{doc} line {line}: {stated} -> {right}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
