"""The grader's own accuracy: known-wrong implementations (mutants) that must lose
points with the right diagnosis, and known-right ones (variants) that must not.

Each entry replaces the body of one solution region of the reference, so it reads
as the few lines a student would have written. Entries live in chNN.py beside this
file; `python -m grader.qa.catch_table` runs them all and prints the catch table.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import textwrap
from dataclasses import dataclass

from grader.run.regions import BEGIN, END


@dataclass(frozen=True)
class Mutant:
    name: str
    task: str
    body: str
    expect: tuple[str, ...]  # check names of which at least one must fail
    keyword: str  # must appear (case-insensitive) in a failing check's diagnosis
    mistake: str = ""  # the mistake in a few words, for the table


@dataclass(frozen=True)
class Variant:
    name: str
    task: str
    body: str
    note: str = ""


def mutant(name, task, body, expect, keyword, mistake=""):
    expect = (expect,) if isinstance(expect, str) else tuple(expect)
    return Mutant(name, task, body, expect, keyword, mistake)


def variant(name, task, body, note=""):
    return Variant(name, task, body, note)


def replace_region(source: str, task: str, body: str) -> str:
    """source with the region of `task` replaced by `body` (indented to match)."""
    lines, out, inside, found = source.splitlines(keepends=True), [], False, False
    for line in lines:
        begin = BEGIN.match(line)
        if begin and begin["task"] == task:
            indent = begin["indent"]
            out.append(textwrap.indent(textwrap.dedent(body).strip("\n") + "\n", indent))
            inside = found = True
        elif inside:
            inside = not END.match(line)
        else:
            out.append(line)
    if not found:
        raise KeyError(f"no region '{task}' in this source")
    return "".join(out)


def apply(sources: dict[str, str], module: str, task: str, body: str) -> dict[str, str]:
    changed = dict(sources)
    key = f"{module}.py"
    changed[key] = replace_region(sources[key], task, body)
    return changed


def catalogue() -> tuple[list[Mutant], list[Variant]]:
    mutants, variants = [], []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if re.fullmatch(r"ch\d\d", info.name):
            module = importlib.import_module(f"{__name__}.{info.name}")
            mutants += getattr(module, "MUTANTS", [])
            variants += getattr(module, "VARIANTS", [])
    return mutants, variants


def lesson_mistakes() -> dict[str, dict[str, tuple[str, ...]]]:
    """{chapter number: {a phrase quoted from the lesson's common mistakes: the mutants that make it}}."""
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if re.fullmatch(r"ch\d\d", info.name):
            module = importlib.import_module(f"{__name__}.{info.name}")
            found[info.name[2:]] = dict(getattr(module, "LESSON", {}))
    return found
