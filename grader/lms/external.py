"""What the external graders (PrairieLearn, Autolab) share: the kit's files they carry,
the grader image, reading what a student handed in, grading it with the sandboxed
engine of `python -m grader grade` (hidden checks included), and the words a student
may read about each check.

A student reads, per check, what grader.run.visible.visible_check gives on every
platform: name, points, status and the grader's own diagnosis; for a public check also
what a pass means and what their code printed where no certified part ran beside it; for
a hidden check nothing of its inputs or expected values. Never the staff_* fields:
PrairieLearn and Autolab show everything at once, with no "after publication".
"""

from __future__ import annotations

import re
import sys
import tomllib
import traceback
from dataclasses import dataclass
from pathlib import Path

from grader import KIT_ROOT
from grader.run.submission import PACKAGE, SubmissionError

ROOT = KIT_ROOT
CPU_WHEELS = "https://download.pytorch.org/whl/cpu"
# What grading needs from the kit: the engine and checks, the reference, the stub copy
# (a lone file handed in is graded with the stubs for the files it does not replace).
INCLUDED = ("grader", "solutions")
SKIPPED_PARTS = {"__pycache__", "qa"}
SKIPPED_NAMES = {"mutants.py"}  # the mutant catalogue (grader/mutants.py) and each task's entries
KIT_FOLDER = "hero_transformer_grader"  # the kit's folder inside an image or a tar
IMAGE_HOME = "/opt/hero_transformer"


def kit_files(include_stubs: bool = False) -> list[tuple[Path, str]]:
    """(file, name inside the bundle) for everything grading needs, never the kit's
    tests, docs or mutant catalogue."""
    files = [(ROOT / name, name) for name in ("pyproject.toml", "README.md")]
    for folder in INCLUDED + ((PACKAGE,) if include_stubs else ()):
        for path in sorted((ROOT / folder).rglob("*")):
            rel = path.relative_to(ROOT)
            # .json: each chapter's facts.json, which the public checks read
            if (path.is_file() and not SKIPPED_PARTS & set(rel.parts) and path.name not in SKIPPED_NAMES
                    and path.suffix in (".py", ".md", ".json")):
                files.append((path, rel.as_posix()))
    return files


# The kit's venv in an image, in the kit's folder: the same lines for every platform's image.
INSTALL_KIT = """\
# torch first, from the CPU wheel index only (the default index resolves the multi-GB
# CUDA build), pinned as the kit pins it; the kit's other dependencies after it.
RUN python -m venv .venv \\
 && .venv/bin/python -m pip install --quiet --upgrade pip \\
 && .venv/bin/python -m pip install --quiet --index-url {cpu_wheels} "{torch}" \\
 && .venv/bin/python -m pip install --quiet . \\
 && .venv/bin/python -c 'import torch; assert torch.version.cuda is None, "a CUDA build of torch was installed"'
"""

DOCKERFILE = """\
# The hero_transformer grader image, written by `python -m grader {command}`.
# Build it where Docker runs (`docker build -t NAME .` in this folder) and push NAME
# where {platform} pulls images from.
FROM python:3.12-slim-bookworm
ENV DEBIAN_FRONTEND=noninteractive PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
RUN apt-get update \\
 && apt-get install -y --no-install-recommends bubblewrap make tar \\
 && rm -rf /var/lib/apt/lists/*
{copy}
WORKDIR {home}
""" + INSTALL_KIT + """# Where the container cannot give bubblewrap namespaces, graded code runs as `nobody`
# (when the grader runs as root): it may read only what the sandbox side needs
# (grader/run/inside, grader/checks), never solutions/ or the rest of grader/.
RUN chmod -R go-rwx solutions grader \\
 && chmod go+x . grader grader/run \\
 && chmod go+r grader/__init__.py grader/run/__init__.py \\
 && chmod -R go+rX grader/run/inside grader/checks .venv{entry_mode}
"""


def torch_requirement() -> str:
    """The kit's own torch pin, from pyproject.toml, so every image and the kit agree."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pinned = next(d for d in project["dependencies"] if re.match(r"torch\b", d))
    return pinned.replace(" ", "")


def dockerfile(command: str, platform: str, entry: str | None = None, from_tar: str | None = None) -> str:
    """The image: the kit at IMAGE_HOME (copied from the folder beside the Dockerfile, or
    unpacked from the tar beside it), its venv, bubblewrap; `entry` made executable."""
    entry_mode = f" \\\n && chmod 755 {entry}" if entry else ""
    copy = (f"ADD {from_tar} /tmp/kit/\nRUN mv /tmp/kit/{KIT_FOLDER} {IMAGE_HOME} && rm -rf /tmp/kit" if from_tar
            else f"COPY {KIT_FOLDER}/ {IMAGE_HOME}/")
    return DOCKERFILE.format(command=command, platform=platform, copy=copy, home=IMAGE_HOME,
                             cpu_wheels=CPU_WHEELS, torch=torch_requirement(), entry_mode=entry_mode)


# ------------------------------------------------------------------ grading


def read_upload(path: Path, label: str):
    """The submission in what was handed in: a folder (PrairieLearn's /grade/student),
    or one file (Autolab's handin). Files of the package handed in loose (model.py, or
    several) are graded with the released stubs for the others; anything else goes to
    the grader's own reader (a package folder, a .zip or a tarball at any depth).
    Raises SubmissionError, worded for the student, when there is nothing to grade."""
    from grader.grade_class.uploads import loose_files, package_files
    from grader.run.submission import load

    try:
        if path.is_symlink():
            raise SubmissionError(f"{label} is a symbolic link; upload the file itself")
        if path.is_dir():
            entries = sorted(path.iterdir())
            if not entries:
                raise SubmissionError(f"{label} is empty: nothing was handed in. Upload {PACKAGE}/ as a .zip "
                                      f"(`make submit` builds submission.zip)")
            loose = [p for p in entries if p.suffix == ".py" and p.is_file() and not p.is_symlink()]
            if len(loose) == len(entries) and {p.name for p in loose} <= package_files():
                return loose_files(loose, [p.name for p in loose], label)
            if len(entries) == 1 and entries[0].is_file() and not entries[0].is_symlink():
                return read_upload(entries[0], label)  # one file: what is wrong with it, by its name
        elif path.suffix == ".py":
            if path.name in package_files():
                return loose_files([path], [path.name], label)
            raise SubmissionError(f"{path.name} is not a file of {PACKAGE}/ (those are "
                                  f"{', '.join(sorted(package_files()))}); upload one of them, or {PACKAGE}/ as a "
                                  f".zip (`make submit` builds submission.zip)")
        submission = load(path)
    except SubmissionError as problem:
        raise SubmissionError(str(problem).replace(str(path), label)) from None
    submission.label = label
    return submission


@dataclass
class Outcome:
    """A hand-in graded, or why not: `unusable` (the hand-in's fault, worded for the
    student) or `failed` (the grader's, for the course staff)."""

    report: object | None = None
    unusable: str = ""
    failed: str = ""


def grade_upload(path: Path, label: str, chapters: list[str] | None, seed: int, budget: float) -> Outcome:
    """Grade what was handed in at `path` with every check (hidden ones included) of
    `chapters`, in the Linux sandbox (process isolation only where bubblewrap cannot
    run, as on Gradescope)."""
    try:
        submission = read_upload(path, label)
    except SubmissionError as problem:
        return Outcome(unusable=str(problem))
    from grader.run.engine import grade
    from grader.run.processes import Limits
    from grader.run.runners import open_runner

    runner = None
    try:
        # The platform kills the grader at its wall-clock timeout (the budget plus a margin):
        # the budget bounds the wall clock too, so the results are written before that.
        limits = Limits(submission_seconds=budget, submission_wall_seconds=budget)
        runner = open_runner("sandbox", limits, with_reference=True)
        try:
            runner.start()  # its torch import overlaps this process's
        except Exception:  # noqa: BLE001 - grade() retries, and reports the failure per check
            pass
        return Outcome(report=grade(submission, chapters, seed=seed, runner=runner))
    except Exception as crash:  # noqa: BLE001 - the platform must get a result file regardless
        traceback.print_exc(file=sys.stderr)
        return Outcome(failed=f"the grader hit an internal error ({type(crash).__name__})")
    finally:
        if runner is not None:
            runner.close()


def status_line(result) -> str:
    """`passed`, or the status and the grader's own diagnosis, as a student may read it."""
    from grader.run.visible import visible_check

    return visible_check(result).said


def visible_output(result, limit: int = 2000) -> str:
    """What the code printed, where the report shows it (a public check, no certified part
    beside it); the end of it, control characters removed."""
    from grader.run.visible import visible_check

    return visible_check(result).output.strip()[-limit:]
