"""Finding the hero_transformer/ package in what a student uploaded: a folder or a
.zip, at any depth (a zip of the repo, of the package, of a folder holding it)."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

PACKAGE = "hero_transformer"
MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_TOTAL_BYTES = 32 * 1024 * 1024


class SubmissionError(Exception):
    """The upload has no usable package; the message tells the student what to do."""


@dataclass
class Submission:
    label: str
    sources: dict[str, str]  # path inside the package -> source text


def _pick(candidates: list[PurePosixPath], label: str) -> PurePosixPath:
    if not candidates:
        raise SubmissionError(
            f"{label} holds no {PACKAGE}/ folder with Python files in it. Upload the folder "
            f"{PACKAGE}/ itself, or a .zip that contains it (`make submit` builds one).")
    # The shallowest package wins; ignore copies inside virtualenvs or caches.
    return min(candidates, key=lambda p: (len(p.parts), str(p)))


def _skip(parts) -> bool:
    return any(part in {"__pycache__", ".venv", "venv", "site-packages", "__MACOSX", ".git", "solutions"}
               or part.startswith("._") for part in parts)


def load(path: str | Path) -> Submission:
    path = Path(path)
    if not path.exists():
        raise SubmissionError(f"{path} does not exist")
    if path.is_dir():
        return _from_folder(path)
    if zipfile.is_zipfile(path):
        return _from_zip(path)
    raise SubmissionError(f"{path} is neither a folder nor a .zip file; upload {PACKAGE}/ or a .zip of it")


def _from_folder(root: Path) -> Submission:
    roots = [PurePosixPath(p.relative_to(root).as_posix()) for p in root.rglob(PACKAGE)
             if p.is_dir() and not _skip(p.relative_to(root).parts) and any(p.glob("*.py"))]
    if not roots and any(root.glob("*.py")):
        # The package's own files, uploaded in a folder of another name.
        roots.append(PurePosixPath("."))
    package = root / _pick(roots, str(root))
    sources, total = {}, 0
    for file in sorted(package.rglob("*.py")):
        rel = file.relative_to(package)
        if _skip(rel.parts):
            continue
        size = file.stat().st_size
        total += size
        if size > MAX_FILE_BYTES or total > MAX_TOTAL_BYTES:
            raise SubmissionError(f"{rel} makes the submission too large (limit {MAX_FILE_BYTES // 1024} KiB a file)")
        sources[rel.as_posix()] = file.read_text(encoding="utf-8", errors="replace")
    return Submission(str(root), sources)


def _from_zip(path: Path) -> Submission:
    try:
        archive = zipfile.ZipFile(path)
        names = [n for n in archive.namelist() if not n.endswith("/")]
    except (zipfile.BadZipFile, OSError) as error:
        raise SubmissionError(f"{path.name} is not a readable zip file ({error})") from None
    with archive:
        files = [PurePosixPath(n) for n in names if not _skip(PurePosixPath(n).parts)]
        roots = set()
        for f in files:
            if f.suffix == ".py":
                parts = f.parts
                for i, part in enumerate(parts[:-1]):
                    if part == PACKAGE:
                        roots.add(PurePosixPath(*parts[: i + 1]))
        package = _pick(sorted(roots), path.name)
        sources, total = {}, 0
        for f in files:
            if f.suffix != ".py" or package not in f.parents:
                continue
            rel = f.relative_to(package)
            if ".." in rel.parts:
                continue
            info = archive.getinfo(str(f))
            total += info.file_size
            if info.file_size > MAX_FILE_BYTES or total > MAX_TOTAL_BYTES:
                raise SubmissionError(f"{rel} makes the submission too large")
            sources[rel.as_posix()] = archive.read(info).decode("utf-8", errors="replace")
    return Submission(path.name, sources)
