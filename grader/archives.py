"""Reading a zip or a tarball the same way: one list of members, each with its name as
a POSIX path (a Windows zip's backslashes turned), what kind of entry it is, its size,
and a bounded read. Finding a package in an upload (run/submission.py) and unpacking an
LMS download (grade_class/uploads.py) both read archives through here."""

from __future__ import annotations

import stat
import tarfile
import zipfile
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, Iterator

# Everything a damaged archive can raise while it is opened or read: a bad CRC or header
# (BadZipFile, TarError), an encrypted member (RuntimeError), an unknown compression
# (NotImplementedError), a truncated stream (EOFError, zlib.error), a read error.
ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, tarfile.TarError, RuntimeError, NotImplementedError, EOFError,
          zlib.error, OSError, ValueError, KeyError, UnicodeDecodeError)


class ArchiveError(Exception):
    """The archive cannot be opened or listed; `kind` is "zip" or "tarball"."""

    def __init__(self, kind: str, error: BaseException):
        super().__init__(str(error))
        self.kind, self.error = kind, error


@dataclass(frozen=True)
class Member:
    name: PurePosixPath
    listed: str  # the name as the archive spells it
    is_dir: bool
    is_link: bool  # a symbolic or hard link: never followed
    is_file: bool  # a regular file
    size: int
    read: Callable[[int], bytes]  # at most that many bytes of its content (ERRORS when damaged)


def kind_of(path: Path) -> str | None:
    """"zip", "tarball", or None for anything else (a folder, a damaged or other file)."""
    try:
        if not path.is_file():
            return None
        if zipfile.is_zipfile(path):
            return "zip"
        if tarfile.is_tarfile(path):
            return "tarball"
    except ERRORS:
        return None
    return None


def _zip_members(archive: zipfile.ZipFile) -> list[Member]:
    members = []
    for info in archive.infolist():
        link = info.create_system == 3 and stat.S_ISLNK(info.external_attr >> 16)  # 3: made on Unix

        def read(limit: int, _info=info) -> bytes:
            with archive.open(_info) as stream:
                return stream.read(limit)

        directory = info.is_dir()
        members.append(Member(PurePosixPath(info.filename.replace("\\", "/")), info.filename, directory, link,
                              not directory and not link, info.file_size, read))
    return members


def _tar_members(archive: tarfile.TarFile) -> list[Member]:
    members = []
    for info in archive.getmembers():
        def read(limit: int, _info=info) -> bytes:
            return archive.extractfile(_info).read(limit)

        members.append(Member(PurePosixPath(info.name.replace("\\", "/")), info.name, info.isdir(),
                              info.issym() or info.islnk(), info.isfile(), info.size, read))
    return members


@contextmanager
def open_archive(path: Path) -> Iterator[tuple[str, list[Member]]]:
    """(its kind, its members) while open; ArchiveError when it cannot be opened or listed."""
    kind = kind_of(path) or ("zip" if path.suffix.lower() == ".zip" else "tarball")
    try:
        handle = zipfile.ZipFile(path) if kind == "zip" else tarfile.open(path)
    except ERRORS as error:
        raise ArchiveError(kind, error) from None
    with handle:
        try:
            members = _zip_members(handle) if kind == "zip" else _tar_members(handle)
        except ERRORS as error:
            raise ArchiveError(kind, error) from None
        yield kind, members
