"""Finding the hero_transformer/ package in what a student uploaded: a folder, a
.zip or a tarball (.tar, .tar.gz, .tgz, .tar.bz2, .tar.xz), at any depth (a zip of the repo, of the package, of a folder holding it).

An upload is read as data and nothing else: symbolic links (in a folder or stored in
a zip) are refused, never followed, so no file outside the upload can be read through
one; only regular files are opened; a damaged, encrypted or oddly compressed zip is a
SubmissionError with a message, never a crash.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from grader.edition import check_py
from grader.archives import ERRORS as ARCHIVE_ERRORS
from grader.archives import ArchiveError, kind_of, open_archive

PACKAGE = "hero_transformer"
# The package's modules as the stub copy has them (a test keeps the two equal): a file
# whose name differs from one of them only in case is named in the problem.
CONTRACT_MODULES = ("__init__.py", "backward.py", "data.py", "micro.py", "model.py", "sample.py", "tokenizer.py",
                    "train.py")
MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_TOTAL_BYTES = 4 * 1024 * 1024  # all sources travel to the worker in one message


class SubmissionError(Exception):
    """The upload has no usable package; the message tells the student what to do."""


@dataclass
class Submission:
    label: str
    sources: dict[str, str]  # path inside the package -> source text


def source_text(data: bytes) -> str:
    """A source file's text as Python reads it when importing: UTF-8, a byte-order mark
    dropped, Windows (CRLF) and old Mac (CR) line endings made newlines."""
    return data.decode("utf-8-sig", errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def _in_case(sources: dict[str, str], label: str) -> dict[str, str]:
    """The sources, unless a module the course's package has is there only under a name
    that differs in case (Model.py for model.py): Python imports a module from a file of
    exactly its name, on every system, so that is said at once."""
    for name in CONTRACT_MODULES:
        if name in sources:
            continue
        twins = sorted(rel for rel in sources if "/" not in rel and rel.lower() == name)
        if twins:
            raise SubmissionError(
                f"{label}: {PACKAGE}/{twins[0]} must be named {name}. File names must match the course's "
                f"exactly, case included: Python finds the module {name[:-3]} only in a file named {name}, on every "
                f"system. Rename it (on Windows and macOS, to another name first, then to {name}) and upload again.")
    return sources


def _pick(candidates: list[PurePosixPath], label: str, other_case: list[str] | None = None) -> PurePosixPath:
    if not candidates and other_case:
        raise SubmissionError(
            f"{label} holds the package as {sorted(other_case)[0]}/; its folder must be named {PACKAGE}, all lower "
            f"case (Python imports it by that exact name). Rename the folder, or upload the .zip `make submit` "
            f"(or `{check_py('submit')}`) builds.")
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
    if kind_of(path) is not None:
        return _from_archive(path)
    if path.suffix.lower() == ".ipynb":
        raise SubmissionError(f"{path.name} is a notebook: the grader grades the {PACKAGE}/ package, where the "
                              f"tasks are written. Upload {PACKAGE}/ or a .zip of it (`make submit` builds one)")
    named = {".zip": "a zip archive", ".tar": "a tarball", ".tgz": "a tarball", ".gz": "a gzip file",
             ".bz2": "a bzip2 file", ".xz": "an xz file"}.get(path.suffix.lower())
    if named is not None:
        raise SubmissionError(f"{path.name} is named {path.suffix} but is not {named} (it may be damaged, or another "
                              f"kind of file renamed); upload {PACKAGE}/ or a .zip of it (`make submit` builds one)")
    raise SubmissionError(f"{path.name} is neither a folder, a .zip nor a tarball; upload {PACKAGE}/ or a .zip of it")


def _walk(root: Path):
    """(relative path, is_dir, is_symlink) of everything under root that _skip keeps,
    symbolic links listed but never followed."""
    for here, dirs, files in os.walk(root, followlinks=False):
        base = Path(here)
        kept = []
        for name in sorted(dirs):
            rel, link = (base / name).relative_to(root), (base / name).is_symlink()
            if not _skip(rel.parts):
                yield rel, True, link
                if not link:
                    kept.append(name)
        dirs[:] = kept
        for name in sorted(files):
            rel = (base / name).relative_to(root)
            if not _skip(rel.parts):
                yield rel, False, (base / name).is_symlink()


def _refuse_links(links: list[str], label: str) -> None:
    if links:
        shown = ", ".join(links[:5]) + (f" and {len(links) - 5} more" if len(links) > 5 else "")
        raise SubmissionError(
            f"{label} holds symbolic links ({shown}); links are not followed. Upload the files themselves "
            f"(`make submit` builds a .zip of them).")


def _read_regular(file: Path, root: Path, rel: PurePosixPath) -> bytes:
    """The bytes of a regular file inside root; never through a link, never a pipe or device."""
    try:
        if root not in file.resolve().parents:
            raise SubmissionError(f"{rel} lies outside the upload")
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as error:
        raise SubmissionError(f"{rel} cannot be read ({error.strerror or error})") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise SubmissionError(f"{rel} is not a regular file")
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise SubmissionError(f"{rel} makes the submission too large (limit {MAX_FILE_BYTES // 1024} KiB a file)")
    return data


def _from_folder(root: Path) -> Submission:
    label = str(root)
    root = root.resolve()  # the upload itself, as the TA named it; nothing inside is followed
    entries = list(_walk(root))
    holding_py = {rel.parent for rel, is_dir, _ in entries if not is_dir and rel.suffix == ".py"}
    roots = [PurePosixPath(rel.as_posix()) for rel, is_dir, is_link in entries
             if is_dir and not is_link and rel.name == PACKAGE and rel in holding_py]
    if not roots and Path(".") in holding_py:
        # The package's own files, uploaded in a folder of another name.
        roots.append(PurePosixPath("."))
    if not roots:
        # A folder holding the upload as an archive (Moodle's "download in folders" does that).
        archives = [rel for rel, is_dir, is_link in entries
                    if not is_dir and not is_link and rel.name.lower().endswith(ARCHIVE_SUFFIXES)]
        if archives:
            found = _archives_with_a_package(root, archives)
            if len(found) == 1:
                rel, inner = found[0]
                return Submission(f"{label}/{rel.as_posix()}", inner.sources)
            if len(found) > 1:
                raise SubmissionError(
                    f"{label} holds {len(found)} archives with a {PACKAGE}/ folder in them "
                    f"({', '.join(rel.as_posix() for rel, _ in found)}): the grader cannot tell which to grade. "
                    f"Upload one.")
    if not roots:  # a package that is only a link (to solutions/, say) is refused as such
        _refuse_links([rel.as_posix() for rel, is_dir, is_link in entries
                       if is_link and (is_dir or rel.suffix == ".py")], label)
    other_case = [rel.as_posix() for rel, is_dir, is_link in entries
                  if is_dir and not is_link and rel.name.lower() == PACKAGE and rel in holding_py]
    chosen = Path(_pick(roots, label, other_case))
    inside = [(rel if chosen == Path(".") else rel.relative_to(chosen), is_dir, is_link)
              for rel, is_dir, is_link in entries if chosen == Path(".") or chosen in rel.parents]
    _refuse_links([f"{PACKAGE}/{rel.as_posix()}" for rel, is_dir, is_link in inside
                   if is_link and (is_dir or rel.suffix == ".py")], label)
    sources, total = {}, 0
    for rel, is_dir, is_link in sorted(inside):
        if is_dir or is_link or rel.suffix != ".py":
            continue
        data = _read_regular(root / chosen / rel, root, PurePosixPath(rel.as_posix()))
        total += len(data)
        if total > MAX_TOTAL_BYTES:
            raise SubmissionError(f"{rel} makes the submission too large (limit {MAX_TOTAL_BYTES // 1024 // 1024} MiB "
                                  f"in all)")
        sources[rel.as_posix()] = source_text(data)
    return Submission(label, _in_case(sources, label))


ARCHIVE_SUFFIXES = (".zip", ".tar", ".tgz", ".tar.gz", ".tar.bz2", ".tar.xz")


def _archives_with_a_package(root: Path, archives: list[Path]) -> "list[tuple[Path, Submission]]":
    found = []
    for rel in sorted(archives):
        path = root / rel
        try:
            if kind_of(path) is not None:
                found.append((rel, _from_archive(path)))
        except SubmissionError:
            continue  # not the upload (or unreadable): the folder is judged without it
    return found


def _from_archive(path: Path) -> Submission:
    """A zip or a tarball, by the same rules: regular files only, links refused, no path
    leaves the package, bounded sizes."""
    try:
        with open_archive(path) as (kind, listed):
            return _package_in(path, kind, listed)
    except ArchiveError as broken:
        if broken.kind == "zip":
            raise SubmissionError(f"{path.name} is not a readable zip file ({broken})") from None
        raise SubmissionError(f"{path.name} is not a readable tarball ({broken}); rebuild it, or upload a .zip "
                              f"(`make submit` builds one)") from None


def _package_in(path: Path, kind: str, listed) -> Submission:
    members = {}  # the normalised path -> the member (the first, when names repeat)
    for member in listed:
        if not member.is_dir and not member.listed.endswith("/") and not _skip(member.name.parts):
            members.setdefault(member.name, member)
    python_files = [f for f in members if f.suffix == ".py"]
    roots = {PurePosixPath(*f.parts[: i + 1]) for f in python_files
             for i, part in enumerate(f.parts[:-1]) if part == PACKAGE}
    other_case = sorted({"/".join(f.parts[: i + 1]) for f in python_files
                         for i, part in enumerate(f.parts[:-1]) if part != PACKAGE and part.lower() == PACKAGE})
    package = _pick(sorted(roots), path.name, other_case)
    chosen = sorted((f.relative_to(package), member) for f, member in members.items()
                    if f.suffix == ".py" and package in f.parents and ".." not in f.relative_to(package).parts)
    _refuse_links(sorted(f"{PACKAGE}/{rel.as_posix()}" for rel, member in chosen if member.is_link), path.name)
    sources, total = {}, 0
    for rel, member in chosen:
        if not member.is_file:
            raise SubmissionError(f"{path.name}: {PACKAGE}/{rel.as_posix()} is not a regular file")
        total += member.size
        if member.size > MAX_FILE_BYTES or total > MAX_TOTAL_BYTES:
            raise SubmissionError(f"{rel} makes the submission too large")
        try:
            data = member.read(MAX_FILE_BYTES + 1)
        except ARCHIVE_ERRORS as error:
            if kind == "zip":
                raise SubmissionError(
                    f"{path.name}: {rel} cannot be read ({type(error).__name__}: {error}); the zip is damaged, "
                    f"encrypted or uses a compression the grader does not read. Rebuild it with `make submit`."
                ) from None
            raise SubmissionError(f"{path.name}: {rel} cannot be read ({type(error).__name__}); the tarball is "
                                  f"damaged. Rebuild it, or upload a .zip (`make submit` builds one).") from None
        if len(data) > MAX_FILE_BYTES:
            raise SubmissionError(f"{rel} makes the submission too large")
        sources[rel.as_posix()] = source_text(data)
    return Submission(path.name, _in_case(sources, path.name))
