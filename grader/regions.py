"""Solution regions: the `### BEGIN SOLUTION <task>` ... `### END SOLUTION` blocks of
solutions/. Stripping a region leaves `raise NotImplementedError("<task>")` at the same
indentation. The student copy strips every region; the grader's certified parts strip
only the task being graded, so the process that runs a student's task never holds the
reference for it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from grader.parsing import parse

BEGIN = re.compile(r"^(?P<indent>[ \t]*)### BEGIN SOLUTION[ \t]+(?P<task>[A-Za-z_][\w.]*)[ \t]*$")
END = re.compile(r"^[ \t]*### END SOLUTION[ \t]*$")

STUDENT_HEADER = (
    "# Your copy of the course package. Fill in every part that raises\n"
    "# NotImplementedError; `make check` tells you how each one is doing.\n"
)


class RegionError(ValueError):
    pass


@dataclass(frozen=True)
class Region:
    task: str
    path: str  # relative to the package root, e.g. "model.py"
    qualname: str  # enclosing function, e.g. "TransformerBlock.forward"
    begin: int  # 1-based line of BEGIN
    end: int  # 1-based line of END

    def body(self, source: str) -> str:
        """The lines between the markers, as they stand in `source`."""
        return "\n".join(source.splitlines()[self.begin:self.end - 1])


def _enclosing_functions(source: str) -> list[tuple[int, int, str]]:
    spans = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    spans.append((child.lineno, child.end_lineno, name))
                visit(child, name + ".")

    visit(parse(source), "")
    return spans


def find_regions(source: str, path: str = "<source>") -> list[Region]:
    regions, open_at, open_task = [], None, None
    for number, line in enumerate(source.splitlines(), start=1):
        begin = BEGIN.match(line)
        if begin:
            if open_at is not None:
                raise RegionError(f"{path}:{number}: BEGIN SOLUTION inside the region opened at line {open_at}")
            open_at, open_task = number, begin["task"]
        elif END.match(line):
            if open_at is None:
                raise RegionError(f"{path}:{number}: END SOLUTION without a BEGIN")
            regions.append((open_task, open_at, number))
            open_at = None
        elif "BEGIN SOLUTION" in line and line.strip().startswith("###"):
            raise RegionError(f"{path}:{number}: write the marker as '### BEGIN SOLUTION <task_id>' "
                              f"(a Python identifier, nothing after it)")
    if open_at is not None:
        raise RegionError(f"{path}:{open_at}: region '{open_task}' is never closed")
    spans = _enclosing_functions(source)
    found = []
    for task, begin, end in regions:
        # A function's end_lineno is its last statement; a trailing END comment lies past it.
        owners = [s for s in spans if s[0] < begin <= s[1]]
        if not owners:
            raise RegionError(f"{path}:{begin}: region '{task}' is not inside a function")
        innermost = max(owners, key=lambda s: s[0])
        found.append(Region(task, path, innermost[2], begin, end))
    return found


def strip(source: str, tasks: set[str] | None = None) -> str:
    """Replace the regions of `tasks` (all regions when None) by a NotImplementedError."""
    out, skipping = [], False
    for line in source.splitlines(keepends=True):
        begin = BEGIN.match(line)
        if begin and (tasks is None or begin["task"] in tasks):
            out.append(f'{begin["indent"]}raise NotImplementedError("{begin["task"]}")\n')
            skipping = True
        elif skipping:
            if END.match(line):
                skipping = False
        elif begin or END.match(line):
            continue  # markers of kept regions are dropped; the code between stays
        else:
            out.append(line)
    return "".join(out)


def package_sources(root: Path) -> dict[str, str]:
    """Every .py file of a package folder, keyed by path relative to it."""
    return {
        str(path.relative_to(root)): path.read_text(encoding="utf-8")
        for path in sorted(root.rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def all_regions(root: Path) -> dict[str, Region]:
    regions: dict[str, Region] = {}
    for rel, source in package_sources(root).items():
        for region in find_regions(source, rel):
            earlier = regions.get(region.task)
            if earlier and (earlier.qualname, earlier.path) != (region.qualname, region.path):
                raise RegionError(f"task '{region.task}' appears in {earlier.path}:{earlier.qualname} "
                                  f"and {region.path}:{region.qualname}; a task id names one function")
            regions.setdefault(region.task, region)
    return regions
