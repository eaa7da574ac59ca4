"""Files the grader writes and reads back: each written whole or not at all, so a
reader, or a run resumed after Ctrl-C, never meets half a file."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def write_atomic(path: str | Path, content: str | bytes) -> None:
    """Write through a temporary file in the same folder and rename it into place;
    nothing is left behind when writing fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".part-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(content.encode("utf-8") if isinstance(content, str) else content)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: str | Path, data, indent: int = 1) -> None:
    """A JSON document, ASCII only, written atomically."""
    write_atomic(path, json.dumps(data, indent=indent, ensure_ascii=True))


def read_json(path: Path) -> dict | None:
    """A JSON object read back, or None when the file is missing, unreadable or not an object."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
