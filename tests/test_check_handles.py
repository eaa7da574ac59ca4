"""The kit names a check by its handle, never by a string: a mutant's expected failure, the
facts a public check reads and a test import the handle from the module that declares the
check (`from grader.checks.ch05_block.gelu import exact_values`) and use it, or its
`.name`. A check renamed or removed is then a failing import, where a string would go
on naming a check that is no longer there. Chapter and task names ("ch05", "ch05.gelu")
are no check's, and generated data (JSON, the docs) is written from the catalogue."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("grader", "tests", "solutions", "hero_transformer", "assignments", "docs")
CHECK_NAME_LITERAL = re.compile(r"[\"']ch[0-9]{2}\.[a-z_0-9]+\.[a-z_0-9]+")


def check_name_literals(root: Path = ROOT) -> list[str]:
    """'file:line: text' for each string in the kit's Python that spells out a check's full name."""
    found = []
    for folder in SOURCES:
        for path in sorted((root / folder).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if CHECK_NAME_LITERAL.search(line):
                    found.append(f"{path.relative_to(root).as_posix()}:{number}: {line.strip()}")
    return found


def test_no_check_is_named_by_a_string():
    found = check_name_literals()
    assert not found, ("a check named by a string goes stale when the check is renamed: import its handle from "
                       "the module that declares it (from grader.checks.chNN_topic.task import name) and use it, "
                       "or name.name where a string is wanted:\n" + "\n".join(found))


def test_the_scan_finds_a_check_name_in_either_quotes_and_passes_chapter_and_task_names(tmp_path):
    (tmp_path / "tests").mkdir()
    # The names below are split in two, so that this file spells out none itself.
    (tmp_path / "tests" / "test_x.py").write_text(
        'chapter, task = "ch05", "ch05.gelu"\n'
        + "expected = 'ch0" + "5.gelu.exact_values'\n"
        + 'failed = {"ch0' + '5.gelu.odd_part": 1}\n', encoding="utf-8")
    assert [line.split(":")[1] for line in check_name_literals(tmp_path)] == ["2", "3"]
