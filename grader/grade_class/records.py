"""A class run's folder as records: one JSON file per upload under results/, and the
run's state beside them (class.json). Grading writes them; the gradebooks, feedback and
merges read them back."""

from __future__ import annotations

from pathlib import Path

from grader.files import read_json

RECORD_FORMAT = 1
STATE = "class.json"


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
