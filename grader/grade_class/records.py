"""A class run's folder as records: one JSON file per upload under results/, and the
run's state beside them (class.json). Grading writes them; the gradebooks, feedback and
merges read them back.

Records graded under another stamp (grader/run/stamp.py: kit, check table, torch,
Python, seed) or other settings are never overwritten: before a regrade they move,
with their staff companions and the gradebook files they made, to
previous/<their stamp id>/, which names the stamp that replaced them in archived.json.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable

from grader.files import read_json, write_json
from grader.run.report import staff_path

RECORD_FORMAT = 1
STATE = "class.json"
PREVIOUS = "previous"
ARCHIVED = "archived.json"
# What a run writes besides results/, kept with the records it was built from.
RUN_FILES = ("class.json", "gradebook.csv", "entries.csv", "summary.md", "regrade.csv", "canvas.csv", "moodle.csv")


def record_path(out: Path, upload_slug: str) -> Path:
    return out / "results" / f"{upload_slug}.json"


def read_records(folder: Path) -> dict[str, dict]:
    records = {}
    for path in sorted((folder / "results").glob("*.json")):
        if path.name.endswith(".staff.json") or path.name.startswith("."):
            continue
        data = read_json(path)
        if data and data.get("format") == RECORD_FORMAT and isinstance(data.get("upload"), dict):
            records[data["upload"]["slug"]] = data
    return records


def needs_grading(record: dict) -> bool:
    """Whether a record holds checks the grader could not run (no process could start
    for them): not the student's result, so a rerun grades the upload again even if
    nothing about it changed."""
    return bool(record.get("infrastructure"))


def stamp_id(record: dict) -> str:
    """The stamp a record was graded under; a record from before stamps by its kit version."""
    found = record.get("stamp") or {}
    return str(found.get("id") or f"kit-{record.get('kit', 'unknown')}")


def archive(out: Path, records: dict[str, dict], current: Callable[[dict], bool], replaced_by: dict) -> list[str]:
    """Move every record that is not `current` (with its staff companion) out of
    results/ into previous/<its stamp id>/results/, beside a copy of the run's files it
    belonged to; the folders used, relative to out. A folder that already holds a record
    of the same upload is never written into: the next free previous/<id>.2, .3, … is."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for record in records.values():
        if not current(record):
            groups[(stamp_id(record), json.dumps(record.get("settings"), sort_keys=True))].append(record)
    used = []
    for (old_id, _), group in sorted(groups.items()):
        names = [record_path(out, r["upload"]["slug"]).name for r in group]
        folder, n = out / PREVIOUS / old_id, 2
        while any((folder / "results" / name).exists() for name in names) or _other_stamp(folder, replaced_by):
            folder, n = out / PREVIOUS / f"{old_id}.{n}", n + 1
        (folder / "results").mkdir(parents=True, exist_ok=True)
        if not (folder / ARCHIVED).exists():
            write_json(folder / ARCHIVED, {"stamp": group[0].get("stamp"), "kit": group[0].get("kit"),
                                           "settings": group[0].get("settings"), "replaced_by": replaced_by,
                                           "archived_at": time.time()})
            for name in RUN_FILES:
                if (out / name).is_file():
                    shutil.copy2(out / name, folder / name)
        for record in group:
            path = record_path(out, record["upload"]["slug"])
            for part in (staff_path(path), path):  # the record last: what is left in results/ is whole
                if part.exists():
                    os.replace(part, folder / "results" / part.name)
        used.append(folder.relative_to(out).as_posix())
    return used


def _other_stamp(folder: Path, replaced_by: dict) -> bool:
    """A folder archived when another stamp replaced its records: not one to add to."""
    found = read_json(folder / ARCHIVED)
    return found is not None and (found.get("replaced_by") or {}).get("id") != replaced_by.get("id")


def replaced(folder: Path, current_id: str | None) -> list[tuple[dict, dict[str, dict]]]:
    """The archives of folder/previous/ whose records the stamp `current_id` replaced,
    oldest first: (what archived.json says, the records by upload)."""
    found = []
    for marker in sorted((Path(folder) / PREVIOUS).glob(f"*/{ARCHIVED}")):
        info = read_json(marker)
        if info and current_id and (info.get("replaced_by") or {}).get("id") == current_id:
            info["folder"] = f"{PREVIOUS}/{marker.parent.name}"
            found.append((info, read_records(marker.parent)))
    return sorted(found, key=lambda item: item[0].get("archived_at", 0))


def copy_archives(folder: Path, out: Path) -> None:
    """A shard's previous/ into the merged folder (shards hold disjoint uploads)."""
    for source in sorted((Path(folder) / PREVIOUS).glob("*/")):
        target = Path(out) / PREVIOUS / source.name
        for path in sorted(source.rglob("*")):
            if path.is_file() and not (target / path.relative_to(source)).exists():
                (target / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target / path.relative_to(source))
