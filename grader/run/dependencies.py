"""Which tasks a chapter's checks run besides their own, read from the reference: what
the report names as the certified parts that stood in, and what tells the engine which
tasks may share a worker (two tasks whose checks never run the other's code)."""

from __future__ import annotations

import re
from functools import lru_cache

from grader.checks import catalogue
from grader.run.reference import Reference
from grader.run.regions import find_regions


@lru_cache(maxsize=1)
def _reference_parts(reference: Reference) -> tuple[dict[str, str], dict[str, set[str]]]:
    """Each task's reference body and each module's module-level imports, read once
    (every chapter's parts_used asks the same of the same sources)."""
    bodies, imports = {}, {}
    for rel, source in reference.sources.items():
        for region in find_regions(source, rel):
            bodies[region.task] = region.body(source)
        # Only a module-level import ties a module to another; one inside a function
        # (a program's main) runs outside the checks.
        imports[rel[:-3]] = set(re.findall(r"^from \.(\w+) import", source, flags=re.M))
    return bodies, imports


@lru_cache(maxsize=None)
def _mention(qualname: str) -> tuple[str, re.Pattern]:
    """What in a text means the task's function is built or called: the pattern, and a
    piece of text every match contains (a cheap test first)."""
    owner, _, method = qualname.rpartition(".")
    if owner and method in ("__init__", "forward"):
        return owner, re.compile(rf"\b{re.escape(owner)}\b")  # a class is built and called by its name
    if owner:
        return f".{method}(", re.compile(rf"\.{re.escape(method)}\(")
    return f"{method}(", re.compile(rf"\b{re.escape(method)}\(")


@lru_cache(maxsize=None)
def parts_used(chapter: str) -> frozenset[str] | None:
    """The tasks a chapter's checks run besides its own: what the chapter's probes build
    or call in the package's modules they use, and in turn what those parts' reference
    code builds or calls. None where no reference is at hand to read."""
    reference = Reference.available()
    found = next((c for c in catalogue.chapters() if c.number == chapter), None)
    if reference is None or found is None:
        return None
    tasks = catalogue.tasks()
    bodies, imports = _reference_parts(reference)
    checks_source = catalogue.chapter_source(found)
    modules = set(re.findall(r"\bns\.(\w+)\b", checks_source)) & set(imports)
    while True:
        more = set().union(*(imports[m] for m in modules)) - modules
        if not more:
            break
        modules |= more

    own = {t.name for t in found.tasks}
    # The text the checks run grows by each used part's body, joined by newlines; no
    # pattern spans a line, so each piece is searched once, as it is added (the same
    # closure as searching the whole text again after every addition).
    candidates = [(name, *_mention(task.qualname)) for name, task in tasks.items()
                  if name not in own and task.module in modules]
    pieces, used = [checks_source + "\n".join(bodies.get(t, "") for t in own)], set()
    while pieces:
        text = pieces.pop()
        for name, literal, pattern in candidates:
            if name not in used and literal in text and pattern.search(text) is not None:
                used.add(name)
                pieces.append(bodies.get(name, ""))
    return frozenset(used)


def independent(first: str, second: str) -> bool:
    """Whether two tasks may be graded in one worker: different chapters, and neither
    chapter's checks run the other task (so the worker, which holds the reference minus
    both, gives each task's probes exactly the certified parts they would have alone).
    False where no reference is at hand to tell."""
    of = catalogue.chapter_of_task()
    one, other = of[first].number, of[second].number
    if one == other:
        return False
    used_one, used_other = parts_used(one), parts_used(other)
    if used_one is None or used_other is None:
        return False
    return second not in used_one and first not in used_other


def task_groups(tasks: list[str]) -> list[list[str]]:
    """The tasks in as few groups as independence allows, each group's tasks pairwise
    independent; greedy, in the order given (the catalogue's), so the grouping is the
    same every run."""
    groups: list[list[str]] = []
    for task in tasks:
        for group in groups:
            if all(independent(task, other) for other in group):
                group.append(task)
                break
        else:
            groups.append([task])
    return groups
