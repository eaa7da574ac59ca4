"""The release's allow-list: the places its leak scans may find in the bundle that are a
lesson's published fact rather than an answer (release_template/ALLOWED_FINDINGS.txt),
read by the text scan (release.py) and the answer scan (answer_scan.py) alike."""

from __future__ import annotations

from pathlib import Path

ALLOW_LIST = Path(__file__).resolve().parent / "release_template" / "ALLOWED_FINDINGS.txt"


def read_allow_list(path: Path = ALLOW_LIST) -> dict[str, str]:
    """PATH or PATH::FUNCTION -> why it may stay. An entry without a reason is refused:
    the list exists to be read."""
    allowed = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines() if path.exists() else [], 1):
        entry, _, why = line.partition("#")
        if entry.strip():
            if not why.strip():
                raise ValueError(f"{path}:{number}: say why {entry.strip()} may stay (after a #)")
            allowed[entry.strip()] = why.strip()
    return allowed
