"""What an LMS hands a TA, read as a list of uploads: Canvas's "Download Submissions"
(`login_userid_attemptid_original`, `_LATE_` after the login), Gradescope's "Export
Submissions" (`submission_metadata.yml` beside `submission_NNN/` folders), Moodle's
download (`Full Name_NNN_assignsubmission_file_…`), or a plain folder, zip or tarball
holding one folder, zip, tarball or loose .py files per student; and the optional
roster (Canvas's gradebook export, Moodle's grading worksheet or participants list).

Every entry of the input ends up in `Intake.entries` with what became of it, so none
can vanish silently. Names are data: a name too long for the disk, not UTF-8, or
shaped like a spreadsheet formula is shown escaped and never used as a file name.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import os
import re
import shutil
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

from grader import KIT_ROOT
from grader.run.report import plain
from grader.archives import ERRORS as ARCHIVE_ERRORS
from grader.archives import ArchiveError, kind_of, open_archive
from grader.run.submission import PACKAGE, Submission, SubmissionError, load

ROOT = KIT_ROOT
STUB_PACKAGE = ROOT / PACKAGE

# Canvas: login (letters of the sortable name), _LATE_ when late, user id, attempt
# (or attachment) id, then the file's own name.
CANVAS = re.compile(r"^(?P<login>[^_]+?)(?P<late>_LATE)?_(?P<user>\d+)_(?P<attempt>\d+)_(?P<original>.*)$")
MOODLE = re.compile(r"^(?P<name>.+?)_(?P<participant>\d+)_assignsubmission_(?P<plugin>[a-z]+)_(?P<original>.*)$")
JUNK = ("__MACOSX", ".DS_Store", "Thumbs.db", "desktop.ini")
ARCHIVE_LIMIT = 512 * 1024 * 1024  # what one class download may unpack to on disk
MEMBER_LIMIT = 64 * 1024 * 1024


class InputError(Exception):
    """The input or roster cannot be used; the message says what to do."""


def shown(name: str) -> str:
    """A file name as text a person can read: bytes that are not UTF-8 escaped as \\xNN,
    control characters removed."""
    try:
        raw = os.fsencode(name)
    except (UnicodeError, TypeError):
        raw = str(name).encode("utf-8", "backslashreplace")
    return plain(raw.decode("utf-8", "backslashreplace"))


def slug(name: str) -> str:
    """A short file name that stands for `name` on any disk: a readable prefix and a hash."""
    raw = os.fsencode(name) if isinstance(name, str) else bytes(name)
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", shown(name))[:40].strip("-.") or "upload"
    return f"{readable}-{hashlib.sha256(raw).hexdigest()[:10]}"


def normal(text: str) -> str:
    """Letters and digits, lower case: how Canvas writes a login into its file names."""
    return re.sub(r"[\W_]+", "", text.casefold())


@dataclass
class Student:
    key: str  # the identity uploads are grouped by
    name: str = ""
    id: str = ""  # Canvas user id
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""
    email: str = ""
    login: str = ""
    identifier: str = ""  # Moodle's "Participant N"

    @property
    def short(self) -> str:
        """An id for gradebooks that want one word (nbgrader)."""
        for value in (self.sis_login_id, self.login, self.email.split("@")[0], self.id, self.identifier, self.name):
            word = re.sub(r"[^A-Za-z0-9._-]+", "_", value).strip("_.")
            if word:
                return word[:64]
        return slug(self.key)


@dataclass
class Upload:
    """One student's (or group's) submission: a folder, an archive, or loose files."""

    slug: str
    label: str  # shown to people; never a path
    kind: str  # folder | zip | tarball | files | unknown
    paths: list[Path]
    entries: list[str]  # the input entries it is made of, as shown
    lms: str
    students: list[Student] = field(default_factory=list)
    attempt: tuple = ()
    late: bool = False
    originals: list[str] = field(default_factory=list)  # for loose files: the file names in the package
    attempts: int = 1  # how many attempts of this student the input held

    def info(self) -> dict:
        return {"slug": self.slug, "label": self.label, "kind": self.kind, "entries": self.entries, "lms": self.lms,
                "late": self.late, "attempts": self.attempts, "attempt": list(self.attempt)}

    def submission(self) -> Submission:
        if self.kind == "files":
            return loose_files(self.paths, self.originals, self.label)
        submission = load(self.paths[0])
        submission.label = self.label
        return submission

    def content_hash(self) -> str:
        digest = hashlib.sha256()
        for path, original in zip(self.paths, self.originals or [""] * len(self.paths)):
            digest.update(original.encode() + b"\0")
            _hash_tree(path, digest)
        return digest.hexdigest()


def _hash_tree(path: Path, digest) -> None:
    try:
        info = path.lstat()
    except OSError:
        digest.update(b"missing\0")
        return
    if stat.S_ISREG(info.st_mode):
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    elif stat.S_ISDIR(info.st_mode):
        for child in sorted(path.iterdir(), key=lambda p: os.fsencode(p.name)):
            digest.update(b"\0" + os.fsencode(child.name) + b"\0")
            _hash_tree(child, digest)
    elif stat.S_ISLNK(info.st_mode):
        digest.update(b"link\0" + os.fsencode(os.readlink(path)))


def loose_files(paths: list[Path], originals: list[str], label: str) -> Submission:
    """Single files uploaded on their own: each goes where its name says in the package;
    the files not uploaded are the released stubs (their tasks score 'not implemented')."""
    from grader.regions import package_sources

    sources = dict(package_sources(STUB_PACKAGE)) if (STUB_PACKAGE / "__init__.py").exists() else {}
    for path, original in zip(paths, originals):
        data = path.read_bytes()[: 2 * 1024 * 1024 + 1]
        if len(data) > 2 * 1024 * 1024:
            raise SubmissionError(f"{original} is too large to be a file of {PACKAGE}/")
        sources[original] = data.decode("utf-8-sig", errors="replace")
    return Submission(label, sources)


def package_files() -> set[str]:
    return {p.name for p in STUB_PACKAGE.glob("*.py")} if STUB_PACKAGE.is_dir() else set()


# ------------------------------------------------------------------------- roster


def read_roster(path: Path) -> list[Student]:
    """Canvas's gradebook export, Moodle's grading worksheet, or any CSV with a name,
    an email or a login column."""
    try:
        text = path.read_bytes().decode("utf-8-sig", errors="replace")
    except OSError as error:
        raise InputError(f"the roster {shown(str(path))} cannot be read ({error.strerror or error})") from None
    rows = list(csv.DictReader(text.splitlines()))
    if not rows:
        raise InputError(f"the roster {shown(str(path))} has no rows; export it from the LMS's gradebook as CSV")
    header = {h.strip().casefold(): h for h in rows[0].keys() if h}

    def get(row, *names):
        for name in names:
            if name in header and row.get(header[name]):
                return row[header[name]].strip()
        return ""

    students = []
    for row in rows:
        name = get(row, "student", "full name") or " ".join(filter(None, (get(row, "first name"),
                                                                         get(row, "last name", "surname"))))
        if not name or name.strip().casefold() in ("points possible", "student, test") or \
                name.strip().casefold().startswith("points possible"):
            continue  # Canvas's points row and its test student are not people
        student = Student(key="", name=name, id=get(row, "id"), sis_user_id=get(row, "sis user id", "id number"),
                          sis_login_id=get(row, "sis login id"), section=get(row, "section"),
                          email=get(row, "email address", "email"), login=get(row, "username", "login"),
                          identifier=get(row, "identifier"))
        student.key = "roster:" + (student.id or student.identifier or student.email or student.sis_user_id
                                   or student.sis_login_id or student.login or name)
        students.append(student)
    if not students:
        raise InputError(f"the roster {shown(str(path))} names no students (it needs a 'Student' or 'Full name' "
                         f"column, as Canvas and Moodle export it)")
    return students


def roster_columns(path: Path | None) -> list[str]:
    if path is None:
        return []
    text = path.read_bytes().decode("utf-8-sig", errors="replace")
    return next(csv.reader(text.splitlines()), [])


class Roster:
    def __init__(self, students: list[Student]):
        self.students = students
        self.index: dict[tuple[str, str], Student] = {}
        for s in students:
            for kind, value in (("id", s.id), ("sis", s.sis_user_id), ("email", s.email.casefold()),
                                ("login", s.login.casefold()), ("login", s.sis_login_id.casefold()),
                                ("participant", s.identifier.removeprefix("Participant ").strip()),
                                ("name", normal(s.name)), ("name", normal(" ".join(reversed(s.name.split(", ")))))):
                if value:
                    self.index.setdefault((kind, value), s)

    def find(self, *keys: tuple[str, str]) -> Student | None:
        for kind, value in keys:
            if value and (kind, value) in self.index:
                return self.index[(kind, value)]
        return None


# ---------------------------------------------------------------------- the input


@dataclass
class Entry:
    """One entry of the input as listed, and what became of it."""

    name: str
    status: str = ""  # to grade | superseded | unknown student | not a submission | other shard
    upload: str = ""  # the slug of the upload it belongs to
    student: str = ""
    note: str = ""


@dataclass
class Intake:
    uploads: list[Upload]  # the ones to grade: the latest attempt of each student on the roster
    entries: list[Entry]
    students: list[Student]  # the roster, or the students the uploads name
    lms: str


def _safe_part(part: str) -> bool:
    return part not in ("", ".", "..") and len(os.fsencode(part)) <= 200 and "\0" not in part


def _unpack(archive: Path, into: Path) -> dict[str, str]:
    """Unpack a class download; only regular files and folders, nothing outside `into`.
    Each top-level entry gets a short name on disk; the map gives its name as listed."""
    names: dict[str, str] = {}
    total = 0

    def place(member: str, is_dir: bool, size: int, read):
        nonlocal total
        parts = [p for p in PurePosixPath(member.replace("\\", "/")).parts if p != "/"]
        if not parts or parts[0].startswith(JUNK) or any(p == ".." for p in parts):
            return
        top = names.setdefault(parts[0], f"e{len(names):05d}")
        total += size
        if size > MEMBER_LIMIT or total > ARCHIVE_LIMIT:
            raise InputError(f"{shown(archive.name)} unpacks to more than {ARCHIVE_LIMIT >> 20} MiB; unpack it "
                             f"yourself and pass the folder")
        rest = [p for p in parts[1:] if _safe_part(p)]
        if len(rest) != len(parts) - 1:
            return
        target = into.joinpath(top, *rest)
        if is_dir or (not rest and member.endswith("/")):
            target.mkdir(parents=True, exist_ok=True)
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("wb") as out:
            out.write(read())

    try:
        with open_archive(archive) as (_, members):
            for member in members:
                if member.is_link or not (member.is_dir or member.is_file):
                    continue  # links, devices, pipes: never unpacked
                place(member.listed, member.is_dir, member.size,
                      lambda member=member: member.read(MEMBER_LIMIT + 1))
    except InputError:
        raise
    except ArchiveError as error:
        raise InputError(f"{shown(archive.name)} cannot be unpacked ({type(error.error).__name__}: {error}); "
                         f"download it again, or unpack it yourself and pass the folder") from None
    except ARCHIVE_ERRORS as error:
        raise InputError(f"{shown(archive.name)} cannot be unpacked ({type(error).__name__}: {error}); download it "
                         f"again, or unpack it yourself and pass the folder") from None
    return {disk: listed for listed, disk in names.items()}


def _listing(folder: Path) -> list[tuple[Path, str]]:
    """(path, name as listed) of each entry of a folder, hidden files and OS litter left out."""
    try:
        children = sorted(folder.iterdir(), key=lambda p: os.fsencode(p.name))
    except OSError as error:
        raise InputError(f"{shown(str(folder))} cannot be listed ({error.strerror or error})") from None
    return [(p, p.name) for p in children if not p.name.startswith((".",) + JUNK)]


def _kind(path: Path, name: str) -> str:
    """What an entry is by its content; `name` is the name it was listed under (an
    unpacked download keeps entries under short names of its own)."""
    try:
        mode = path.lstat().st_mode
    except OSError:
        return "unknown"
    if stat.S_ISDIR(mode):
        return "folder"
    if not stat.S_ISREG(mode):
        return "unknown"  # links, pipes, devices: never followed
    kind = kind_of(path)
    if kind is not None:
        return kind
    if name.lower().endswith((".zip", ".tar", ".tgz", ".gz", ".bz2", ".xz")):
        return "broken archive"
    if name.endswith(".py"):
        return "py"
    return "unknown"


def read_input(source: Path, work: Path, roster: list[Student] | None = None) -> Intake:
    """Everything in `source` (a folder, or a zip or tarball of the class), as uploads
    and accounted entries. Archives are unpacked into `work`."""
    if not source.exists():
        raise InputError(f"{shown(str(source))} does not exist; pass the folder or the zip the LMS gave you")
    listed: dict[str, str] = {}
    if source.is_dir():
        folder = source
    elif kind_of(source) is not None:
        folder = work / "input"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        listed = _unpack(source, folder)
    else:
        raise InputError(f"{shown(str(source))} is neither a folder, a zip nor a tarball; pass the folder or the "
                         f"zip of submissions the LMS gave you")
    items = [(path, listed.get(name, name)) for path, name in _listing(folder)]
    # An export zipped with its folder around it: look inside.
    if len(items) == 1 and items[0][0].is_dir() and (items[0][0] / "submission_metadata.yml").is_file():
        items = [(p, f"{items[0][1]}/{n}") for p, n in _listing(items[0][0])]
    if not items:
        raise InputError(f"{shown(str(source))} holds nothing to grade")
    metadata = next((p for p, n in items if n.rsplit("/", 1)[-1] == "submission_metadata.yml"), None)
    if metadata is not None:
        lms, candidates, entries = "gradescope", *_gradescope(items, metadata)
    else:
        lms, candidates, entries = _by_name(items)
    return _assign(lms, candidates, entries, roster)


def _gradescope(items, metadata: Path):
    try:
        import yaml
    except ImportError:
        raise InputError("reading Gradescope's submission_metadata.yml needs PyYAML: pip install pyyaml") from None
    try:
        meta = yaml.safe_load(metadata.read_text(encoding="utf-8", errors="replace")) or {}
    except yaml.YAMLError as error:
        raise InputError(f"submission_metadata.yml cannot be read ({error}); export the submissions again") from None
    if not isinstance(meta, dict):
        raise InputError("submission_metadata.yml does not list submissions; export the submissions again")
    candidates, entries = [], []
    for path, name in items:
        base = name.rsplit("/", 1)[-1]
        info = meta.get(base) if isinstance(meta.get(base), dict) else None
        if path == metadata:
            entries.append(Entry(shown(name), "not a submission", note="Gradescope's list of submissions"))
            continue
        if info is None:
            entries.append(Entry(shown(name), "not a submission",
                                 note="not listed in submission_metadata.yml"))
            continue
        people = []
        for who in info.get(":submitters") or info.get("submitters") or []:
            if isinstance(who, dict):
                get = lambda key: str(who.get(f":{key}") or who.get(key) or "").strip()  # noqa: E731
                people.append(Student(key="", name=get("name"), sis_user_id=get("sid"), email=get("email")))
        created = info.get(":created_at") or info.get("created_at") or ""
        when = created.isoformat() if isinstance(created, (dt.datetime, dt.date)) else str(created)
        late = bool(info.get(":late") or info.get("late"))
        candidates.append((path, name, people, (when, name), late, None))
    return candidates, entries


def _by_name(items):
    """Canvas and Moodle say who and which attempt in each name; a plain folder has one
    entry per student, named after them."""
    files = package_files()
    candidates, entries, unusable = [], [], []
    canvas = sum(bool(CANVAS.match(n)) for _, n in items)
    moodle = sum(bool(MOODLE.match(n)) for _, n in items)
    lms = "canvas" if canvas and canvas >= moodle else "moodle" if moodle else "plain"
    for path, name in items:
        kind = _kind(path, name)
        original, late, attempt = name, False, ()
        if lms == "canvas" and (m := CANVAS.match(name)):
            people = [Student(key="", login=m["login"], id=m["user"], name=m["login"])]
            original, late, attempt = m["original"], bool(m["late"]), (int(m["attempt"]),)
        elif lms == "moodle" and (m := MOODLE.match(name)):
            people = [Student(key="", name=m["name"], identifier=f"Participant {m['participant']}")]
            original = m["original"]
        else:
            stem = name
            for suffix in (".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".tar", ".zip", ".py"):
                if stem.lower().endswith(suffix) and len(stem) > len(suffix):
                    stem = stem[: -len(suffix)]
                    break
            people = [Student(key="", name=shown(stem), login=stem if kind != "py" else "")]
            if kind == "py":
                original = name
        if not attempt:
            try:
                attempt = (path.lstat().st_mtime_ns,)
            except OSError:
                attempt = (0,)
        if kind == "py":
            # A loose file counts when the package has a file of that name.
            bare = re.sub(r"-\d+(\.py)$", r"\1", original)  # Canvas adds -1, -2 to repeated names
            if bare not in files:
                unusable.append(((path, name, people, attempt, late, None), Entry(
                    shown(name), "not a submission", student=people[0].name,
                    note=f"a loose .py that is not a file of {PACKAGE}/ (those are {', '.join(sorted(files))})")))
                continue
            original = bare
        elif kind == "unknown":
            unusable.append(((path, name, people, attempt, late, None), Entry(
                shown(name), "not a submission", student=people[0].name,
                note="not a folder, a zip, a tarball or a .py file")))
            continue
        candidates.append((path, name, people, attempt, late, original if kind == "py" else None))
    # A student whose name says they uploaded, but nothing usable (a notebook alone, say),
    # still gets a row: graded, that upload says what is wrong with it. Beside a usable
    # upload of theirs it is only a stray file.
    uploaded = {_identity(c[2][0]) for c in candidates}
    for candidate, entry in unusable:
        if lms != "plain" and _identity(candidate[2][0]) not in uploaded:
            candidates.append(candidate)
        else:
            entries.append(entry)
    return lms, candidates, entries


def _identity(person: "Student") -> str:
    return person.id or person.identifier or person.login or person.name


def _assign(lms: str, candidates, entries: list[Entry], roster: list[Student] | None) -> Intake:
    index = Roster(roster) if roster else None
    by_student: dict[str, list] = {}
    people_of: dict[str, Student] = {}
    for path, name, people, attempt, late, original in candidates:
        found = []
        for person in people:
            match = index.find(("id", person.id), ("participant", person.identifier.removeprefix("Participant ")),
                               ("email", person.email.casefold()), ("sis", person.sis_user_id),
                               ("login", person.login.casefold()), ("name", normal(person.login)),
                               ("name", normal(person.name))) if index else None
            if index and match is None:
                continue
            if match is None:
                person.key = (f"{lms}:" + (person.id or person.identifier or person.email or person.sis_user_id
                                           or person.login or person.name))
                match = people_of.setdefault(person.key, person)
            found.append(match)
        if not found:
            entries.append(Entry(shown(name), "unknown student", student=", ".join(shown(p.name) for p in people),
                                 note="on no row of the roster; add the student to the roster or grade them apart"))
            continue
        group = "+".join(sorted(s.key for s in found))
        by_student.setdefault(group, []).append((path, name, found, attempt, late, original))
    chosen_uploads = []  # (the chosen upload, the earlier ones)
    for group, attempts in sorted(by_student.items()):
        loose = [a for a in attempts if a[5] is not None]
        whole = [a for a in attempts if a[5] is None]
        choices = []
        if loose:
            # Loose files of one student form one upload; a file sent again replaces the older copy.
            latest: dict[str, tuple] = {}
            for a in sorted(loose, key=lambda a: a[3]):
                latest[a[5]] = a
            kept = sorted(latest.values(), key=lambda a: a[5])
            names = [shown(a[1]) for a in kept]
            upload = Upload(slug("files:" + group), f"{len(kept)} loose file(s): {', '.join(names)}", "files",
                            [a[0] for a in kept], names, lms, kept[0][2], max(a[3] for a in kept),
                            any(a[4] for a in kept), [a[5] for a in kept])
            choices.append(upload)
            for a in loose:
                if a not in kept:
                    entries.append(Entry(shown(a[1]), "superseded", upload.slug, _who(a[2]),
                                         note=f"a later copy of {a[5]} was sent"))
        for a in whole:
            choices.append(Upload(slug(a[1]), shown(a[1]), _kind(a[0], a[1]), [a[0]], [shown(a[1])], lms, a[2], a[3], a[4]))
        choices.sort(key=lambda u: u.attempt)
        choices[-1].attempts = len(choices)
        chosen_uploads.append((choices[-1], choices[:-1]))
    # A student in two groups (alone, then with a partner) is graded by their latest upload.
    taken: set[str] = set()
    uploads = []
    for chosen, older in sorted(chosen_uploads, key=lambda c: c[0].attempt, reverse=True):
        if all(s.key in taken for s in chosen.students):
            older = [chosen, *older]
            chosen = None
        else:
            taken.update(s.key for s in chosen.students)
            uploads.append(chosen)
            for entry_name in chosen.entries:
                entries.append(Entry(entry_name, "to grade", chosen.slug, _who(chosen.students)))
        for upload in older:
            for entry_name in upload.entries:
                note = (f"an earlier attempt; the latest ({chosen.label}) counts" if chosen else
                        "every student on it has a later upload, which counts")
                entries.append(Entry(entry_name, "superseded", upload.slug, _who(upload.students), note=note))
    uploads.sort(key=lambda u: u.slug)
    students = list(roster) if roster else sorted(people_of.values(), key=lambda s: s.key)
    entries.sort(key=lambda e: e.name)
    return Intake(uploads, entries, students, lms)


def _who(students: list[Student]) -> str:
    return ", ".join(shown(s.name or s.key) for s in students)


def student_from(data: dict) -> Student:
    return Student(**{k: str(v) for k, v in data.items() if k in Student.__dataclass_fields__})


__all__ = ["InputError", "Intake", "Entry", "Upload", "Student", "read_input", "read_roster", "roster_columns",
           "shown", "slug", "asdict", "student_from"]
