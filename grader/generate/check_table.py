"""The course's check table, written from the catalogue: every chapter's tasks and checks,
each check with its points, summary and options. The table is a contract with every
student and every gradebook, so it is kept in the kit as data, and a change to a check
shows in review as a change to that file; tests/test_check_table.py fails while the file
and the catalogue differ.

    python -m grader.generate.check_table            write tests/data/check_table.json
    python -m grader.generate.check_table --check    exit 1 (saying what differs) where it is stale

`make student` writes it with the other generated files.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grader import KIT_ROOT
from grader.files import write_atomic

TABLE = KIT_ROOT / "tests" / "data" / "check_table.json"
REFRESH = "python -m grader.generate.check_table"


def table() -> dict:
    """The chapters with their tasks' and checks' names, the tasks, and the checks, in the catalogue's order."""
    from grader.checks import catalogue

    found = {"chapters": [], "tasks": [], "checks": []}
    for chapter in catalogue.chapters():
        found["chapters"].append({"number": chapter.number, "title": chapter.title,
                                  "tasks": [t.name for t in chapter.tasks], "checks": [c.name for c in chapter.checks]})
        for t in chapter.tasks:
            found["tasks"].append({"name": t.name, "module": t.module, "qualname": t.qualname, "title": t.title,
                                   "forbidden": list(t.forbidden), "forbidden_methods": list(t.forbidden_methods),
                                   "forbidden_ops": list(t.forbidden_ops), "no_autograd": t.no_autograd})
        for c in chapter.checks:
            found["checks"].append({"name": c.name, "chapter": c.chapter, "task": c.task, "points": c.points,
                                    "summary": c.summary, "hidden": c.hidden, "timeout": c.timeout,
                                    "separately": list(c.separately), "parts": list(c.parts),
                                    "has_expect": c.expect is not None, "gated_by": list(c.gated_by)})
    return found


def text(found: dict) -> str:
    return json.dumps(found, indent=1) + "\n"


def differences(written: dict, now: dict) -> list[str]:
    """What changed from the written table to the catalogue's, one sentence a change."""
    found = [f"the {part} differ" for part in ("chapters", "tasks") if written.get(part) != now[part]]
    before = {c["name"]: c for c in written.get("checks", [])}
    after = {c["name"]: c for c in now["checks"]}
    found += [f"{name}: no longer a check" for name in before if name not in after]
    found += [f"{name}: a new check" for name in after if name not in before]
    for name, check in after.items():
        if name in before:
            found += [f"{name}: {field} {before[name].get(field)!r} -> {value!r}" for field, value in check.items()
                      if before[name].get(field) != value]
    if not found and [c["name"] for c in written.get("checks", [])] != list(after):
        found.append("the checks come in another order")
    return found


def stale(path: Path = TABLE, now: dict | None = None) -> list[str]:
    """Each difference between the written table and the catalogue's (`now`, if already
    made); [] where it is current."""
    try:
        written = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as unreadable:
        return [f"{path.name} cannot be read ({unreadable})"]
    return differences(written, table() if now is None else now)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=REFRESH, description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say what differs from the written table")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    now = table()
    found = stale(now=now)
    if args.check:
        for line in found:
            print(line, file=sys.stderr)
        return 1 if found else 0
    write_atomic(TABLE, text(now))
    for line in found:
        print(line)
    print(f"wrote {TABLE.relative_to(KIT_ROOT).as_posix()}: {len(now['checks'])} checks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
