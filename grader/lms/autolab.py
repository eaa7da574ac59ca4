"""An Autolab autograder, built from this kit:

    python -m grader autolab --chapters 05 --output DIR

DIR receives the two files Autolab asks of an autograded assessment, and the image
they run in:

    autograde.tar        the kit (grader/, solutions/, the stub copy) in hero_transformer_grader/
    autograde-Makefile   unpacks the tar and grades the handin; holds the course seed
    Dockerfile           the image Tango runs the job in: Python, CPU torch, bubblewrap, the
                         users and folders Tango's job needs and the course's autodriver
    README.md            the assessment's settings, the image, the course seed

For every submission Autolab's Tango copies the handin (renamed to the assessment's
handin name), autograde.tar and autograde-Makefile (renamed Makefile) into a fresh
container of the image and runs, in /home (Tango's vmms/localDocker.py and
vmms/distDocker.py):

    cp -r mount/* autolab/; su autolab -c "autodriver -u NPROC -f FSIZE -t TIMEOUT -o OSIZE autolab > output/feedback 2>&1"

The autodriver (Tango's autodriver/autodriver.c, setuid root) refuses to run as root,
moves /home/autolab into the home of the user `autograde`, hands it to that user, sets
RLIMIT_NPROC and RLIMIT_FSIZE, drops to `autograde` and runs `make` there, killing it
after TIMEOUT seconds; Autolab reads the last line of what it printed. The Makefile runs

    python -m grader.lms.autolab --handin-dir .. --seed S [--chapters 05] [--budget S]

which grades the handin (a .zip or tarball of hero_transformer/, or one file of the
package, such as model.py, graded with the stubs for the others) with every check of
the chapters, hidden ones included, in the sandbox of `python -m grader grade`, and
prints: each check as grader/run/visible.py shows it to a student (a hidden check by
name, points, status and a diagnosis with no value in it), the kit's stamp, the
semantic-feedback line `{"_presentation": "semantic", "stages": [...], ...}` and last
`{"scores": {"ch05": 38}}`, one problem per chapter, named `chNN`.

The hidden checks draw their inputs from the course seed (written into the Makefile
when it is built) and the handin's bytes: a regrade of the same handin draws the same
inputs, two handins draw different ones.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import secrets
import sys
import tarfile
from pathlib import Path

from grader.lms.external import CPU_WHEELS, IMAGE_HOME, INSTALL_KIT, KIT_FOLDER, grade_upload, kit_files, torch_requirement

TAR = "autograde.tar"
MAKEFILE = "autograde-Makefile"
NOT_THE_HANDIN = {"Makefile", "makefile", "GNUmakefile", MAKEFILE, TAR, KIT_FOLDER, "output.log"}
# What a handin looks like: an archive of the package, or one of its files.
HANDIN = re.compile(r".*\.(zip|tar|tgz|tar\.gz|tar\.bz2|tbz2|tar\.xz|txz|py)$", re.IGNORECASE)
HINT_CHARS = 400
# Tango's defaults (config.template.py: VM_ULIMIT_USER_PROC, VM_ULIMIT_FILE_SIZE,
# MAX_OUTPUT_FILE_SIZE), the limits every job of a stock deployment runs under.
TANGO_NPROC = 100
TANGO_FSIZE = 100 * 1024 * 1024
TANGO_OSIZE = 1000 * 1024
TANGO_IMAGE = "autograding_image"

MAKEFILE_TEXT = """\
# hero_transformer's Autolab autograder (chapters {shown}), written by `python -m grader autolab`.
# Tango copies the handin, autograde.tar and this file (as Makefile) into one folder and
# its autodriver runs `make` there as the user autograde, within Tango's limits; the last
# line printed is the autoresult, {{"scores": {{...}}}}.
HERO_TRANSFORMER_PYTHON ?= $(firstword $(wildcard {home}/.venv/bin/python) python3)
CHAPTERS := {chapters}
BUDGET := {budget}
# The course seed: the hidden checks' inputs come from it and the handin's bytes, so a
# regrade draws what the first grading drew. Keep this line when the Makefile is rebuilt.
COURSE_SEED := {seed}
# Tango counts every thread of the user autograde against one limit ({nproc} by default):
# one thread per process for torch's own pools. `su autolab` left HOME at a folder the
# autodriver has moved away; the job's own folder stands in.
export OMP_NUM_THREADS := 1
export MKL_NUM_THREADS := 1
export OPENBLAS_NUM_THREADS := 1
export HOME := $(CURDIR)/.home

all:
\t@rm -rf {kit} .home && mkdir .home && tar -xf {tar}
\t@# Graded code that runs as `nobody` (a root grader without bubblewrap) reads only the sandbox's side.
\t@cd {kit} && chmod -R go-rwx solutions grader && chmod go+x . grader grader/run \\
\t    && chmod go+r grader/__init__.py grader/run/__init__.py && chmod -R go+rX grader/run/inside grader/checks
\t@cd {kit} && "$(HERO_TRANSFORMER_PYTHON)" -m grader.lms.autolab --handin-dir .. --budget $(BUDGET) \\
\t    --seed $(COURSE_SEED) $(if $(CHAPTERS),--chapters $(CHAPTERS)) \\
\t  || {{ echo "The autograder failed before it could grade; please tell the course staff."; \\
\t       echo '{zeros}'; }}

clean:
\trm -rf {kit} .home

.PHONY: all clean
"""

DOCKERFILE = """\
# The hero_transformer grader image for Autolab's Tango, written by `python -m grader autolab`.
#
# Tango runs every job in a fresh container of this image, from its WORKDIR (/home):
#   cp -r mount/* autolab/; su autolab -c "autodriver -u NPROC -f FSIZE -t TIMEOUT -o OSIZE autolab > output/feedback 2>&1"
# so the image holds the users autolab and autograde, /home/autolab, /home/autograde and
# /home/output as Tango's own image makes them, and the autodriver, setuid root, at
# /usr/bin/autodriver. The autodriver is the course's own: this file copies it from the
# image Tango's installation builds from Tango's vmms/Dockerfile (named {tango_image} in
# Tango's documentation). Where that image has another name:
#   docker build --build-arg TANGO_IMAGE=NAME -t hero-transformer-grader .
ARG TANGO_IMAGE={tango_image}
FROM ${{TANGO_IMAGE}} AS tango

FROM python:3.12-slim-bookworm
ENV DEBIAN_FRONTEND=noninteractive PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
# make for the job; procps (pkill) and findutils (find) for the autodriver's clean-up.
RUN apt-get update \\
 && apt-get install -y --no-install-recommends bubblewrap make tar procps findutils \\
 && rm -rf /var/lib/apt/lists/*
COPY --from=tango /usr/bin/autodriver /usr/bin/autodriver
RUN chown root:root /usr/bin/autodriver && chmod 4755 /usr/bin/autodriver \\
 && useradd --no-create-home --home-dir /home/autolab --shell /bin/sh autolab \\
 && useradd --no-create-home --home-dir /home/autograde --shell /bin/sh autograde \\
 && mkdir -p /home/autolab /home/autograde /home/output \\
 && chown autolab:autolab /home/autolab /home/output \\
 && chown autograde:autograde /home/autograde \\
 && su autolab -c "autodriver --help" > /dev/null
ADD {tar} /tmp/kit/
RUN mv /tmp/kit/{kit} {home} && rm -rf /tmp/kit
WORKDIR {home}
""" + INSTALL_KIT + """# The job grades with the kit in autograde.tar and this venv, which autograde may read;
# the image's own copy of the reference is root's alone.
RUN chmod -R go-rwx solutions grader \\
 && chmod -R go+rX .venv && chmod go+x .
# Tango's command line starts with `cp -r mount/* autolab/`, relative to this folder.
WORKDIR /home
"""

README = """\
# hero_transformer on Autolab (chapters {shown})

Written by `python -m grader autolab`. In the assessment's settings:

- **Handin:** one file. `handin.zip` for the zip `make submit` builds (any `.zip` or
  tarball name works, and a lone file of the package, such as `model.py`, is graded with
  the stub copy for the other files). Other files in the job's folder are ignored; two
  handins (two archives, say) are refused with their names.
- **Problems,** named exactly so, with these maximum scores:

{problems}
- **Autograder:** upload `autograde.tar` and `autograde-Makefile`; timeout at least
  {timeout} s (the grader's budget is {budget} s; past the timeout the autodriver kills the
  job and Autolab records no score).
- **Image:** build this folder's `Dockerfile` on the Tango host and name it in the
  assessment (Autolab's "VM image"):

  ```bash
  docker build -t hero-transformer-grader .          # FROM {tango_image}, Tango's own image
  docker build --build-arg TANGO_IMAGE=NAME -t hero-transformer-grader .   # if yours has another name
  ```

  Tango runs every job as `su autolab -c "autodriver … autolab"` in the image's `/home`,
  and the autodriver, which refuses to run as root, runs `make` as the user `autograde`
  with at most {nproc} processes (threads count) and files of at most {fsize_mb} MB, Tango's
  defaults. The image therefore holds those two users, `/home/autolab`,
  `/home/autograde` and `/home/output`, and the autodriver setuid root at
  `/usr/bin/autodriver`, copied from the image Tango's installation builds (Tango's
  `vmms/Dockerfile`, which compiles it from Tango's `autodriver/`): the autodriver that
  matches your Tango. The kit's grader, its venv at `{home}/.venv` and CPU torch come
  on top. The build checks that the autodriver runs in this image.

  On Tango's Docker back ends the job's container gets no user namespaces, so bubblewrap
  cannot start: graded code runs in separate processes as `autograde`, the user the
  grader itself runs as, with the grader's limits per check (Autolab gives a job one
  user; the kit's full sandbox needs bubblewrap or a root grader).

**Course seed.** The hidden checks draw their inputs from `COURSE_SEED` in
`autograde-Makefile` ({seed}, drawn when this folder was written) and the handin's bytes:
a regrade ("Regrade" or "Regrade all" in Autolab) draws the inputs the first grading drew,
and two handins draw different ones. Keep that line when you rebuild the autograder for
the same course (`python -m grader autolab --seed {seed} …` writes it again), or the
regrade's hidden inputs change; every result names its seed in the stamp line.

Try it offline as Tango runs it (as root the Makefile works too; Tango never runs it so):

```bash
mkdir try && cp ../submission.zip try/handin.zip && cp autograde.tar try/ && cp autograde-Makefile try/Makefile
cd try && HERO_TRANSFORMER_PYTHON=/path/to/kit/.venv/bin/python make   # the last line: {{"scores": {{...}}}}
```
"""


def problem_name(chapter: str) -> str:
    return f"ch{chapter}"


def _number(value: float):
    return int(value) if float(value).is_integer() else round(float(value), 4)


def find_handin(folder: Path) -> Path | str:
    """The one handin Tango put beside the Makefile and the tar, or why there is none.
    Files that are not a handin (anything but an archive or a .py file, which some
    deployments add) are ignored; where no file looks like a handin, a lone other file is
    taken, so its reader can say what is wrong with it."""
    files = sorted(p for p in folder.iterdir()
                   if p.name not in NOT_THE_HANDIN and not p.name.startswith(".") and not p.is_dir())
    handins = [p for p in files if HANDIN.fullmatch(p.name)]
    if len(handins) == 1:
        return handins[0]
    if len(handins) > 1:
        return (f"Found {len(handins)} handins where one was expected ({', '.join(p.name for p in handins[:5])}). "
                f"Hand in one file: the zip `make submit` builds.")
    if len(files) == 1:
        return files[0]
    return "Nothing was handed in. Upload the zip `make submit` builds."


def handin_seed(course_seed: int, handin: Path | str) -> int:
    """The hidden checks' seed for one handin: the course seed and the handin's bytes, so
    a regrade of it draws the same inputs and another handin draws others."""
    digest = hashlib.sha256()
    digest.update(f"{course_seed}:".encode())
    if isinstance(handin, Path) and handin.is_file():
        with handin.open("rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    return int(digest.hexdigest(), 16) % 2**31


def feedback(report, numbers: list[str]) -> tuple[list[str], dict, dict]:
    """(lines a student reads, the semantic-feedback object, the scores by problem)."""
    from grader.checks import catalogue
    from grader.run.report import plain
    from grader.run.results import PASSED
    from grader.run.visible import visible_check

    titles = {c.number: c.title for c in catalogue.chapters()}
    lines, stages, cases, scores = [], [], {}, {}
    if report.problem:
        lines += [plain(report.problem), ""]
    for number in numbers:
        results = [r for r in report.results if r.check.chapter == number]
        got, out_of = sum(r.score for r in results), sum(r.check.points for r in results)
        scores[problem_name(number)] = _number(got)
        stage = f"Chapter {number}: {titles.get(number, '')}"
        stages.append(stage)
        cases[stage] = {}
        lines.append(f"{stage} - {got:g} / {out_of:g} points")
        for result in results:
            seen = visible_check(result)
            name = seen.name + (" (hidden)" if seen.hidden else "")
            said = seen.said
            lines.append(f"  {seen.score:g}/{seen.points:g}  {name}: {said}"[:HINT_CHARS + 120])
            case = {"passed": result.status == PASSED}
            if result.status != PASSED:
                case["hint"] = said[:HINT_CHARS]
            cases[stage][name] = case
        lines.append("")
    lines.append(f"Total: {report.score:g} / {report.max_score:g} points")
    return lines, {"_presentation": "semantic", "stages": stages, **cases}, scores


def run(folder: Path, chapters: list[str] | None, budget: float, out=None, course_seed: int | None = None) -> dict:
    """Grade the handin in folder and print Autolab's output; the scores. Without a
    course seed the hidden inputs are drawn afresh (a regrade draws others)."""
    from grader.checks import catalogue
    from grader.run.stamp import stamp

    out = out or sys.stdout
    numbers = [c.number for c in catalogue.chapters() if not chapters or c.number in chapters]
    found = find_handin(folder)
    seed = secrets.randbelow(2**31) if course_seed is None else handin_seed(course_seed, found)
    outcome = grade_upload(found, found.name, chapters, seed, budget) if isinstance(found, Path) else None
    if outcome is not None and outcome.report is not None:
        lines, semantic, scores = feedback(outcome.report, numbers)
    else:
        scores = {problem_name(n): 0 for n in numbers}
        semantic = {"_presentation": "semantic"}
        reason = found if isinstance(found, str) else (outcome.unusable or
                                                        "The autograder failed before it could grade; please tell "
                                                        "the course staff.")
        lines = ["This handin could not be graded: " + reason, "Every problem scores 0 until a usable handin is graded."]
    print("\n".join(lines), file=out)
    print("hero_transformer stamp: " + json.dumps(stamp(seed), sort_keys=True), file=out)
    print(json.dumps(semantic), file=out)
    print(json.dumps({"scores": scores}), file=out, flush=True)
    return scores


def main(argv=None) -> int:
    from grader.checks.catalogue import parse_chapters

    parser = argparse.ArgumentParser(prog="python -m grader.lms.autolab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--handin-dir", default="..", help="the folder Autolab graded in (default: ..)")
    parser.add_argument("--chapters", help="e.g. 05 or 05,07 (default: all)")
    parser.add_argument("--budget", type=float, default=300.0, help="seconds for the whole handin, of processor time and of wall clock both")
    parser.add_argument("--seed", type=int, help="the course seed (the Makefile's COURSE_SEED); without it every "
                                                 "grading draws new hidden inputs")
    args = parser.parse_args(argv)
    run(Path(args.handin_dir), parse_chapters(args.chapters), args.budget, course_seed=args.seed)
    return 0


# ------------------------------------------------------------------ building


def build(output: Path, chapters: list[str] | None = None, budget: int = 300, seed: int | None = None,
          tango_image: str = TANGO_IMAGE) -> dict[str, float]:
    """autograde.tar, autograde-Makefile, the image's Dockerfile and a README into
    output (new or empty); the problems and their maximum scores. `seed`: the course
    seed the Makefile carries (drawn here if not given)."""
    from grader.checks import catalogue
    from grader.run.schedule import possible_points

    output = Path(output)
    if output.exists() and any(output.iterdir()):
        raise FileExistsError(f"{output} is not empty: choose a new folder")
    output.mkdir(parents=True, exist_ok=True)
    numbers = [c.number for c in catalogue.chapters() if not chapters or c.number in chapters]
    problems = {problem_name(n): possible_points([n]) for n in numbers}
    with tarfile.open(output / TAR, "w", format=tarfile.PAX_FORMAT) as archive:
        for path, name in kit_files(include_stubs=True):
            info = archive.gettarinfo(str(path), f"{KIT_FOLDER}/{name}")
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = 0o644
            with path.open("rb") as handle:
                archive.addfile(info, handle)
    zeros = json.dumps({"scores": {name: 0 for name in problems}})
    shown = ", ".join(numbers)
    seed = secrets.randbelow(2**31) if seed is None else seed
    (output / MAKEFILE).write_text(MAKEFILE_TEXT.format(shown=shown, chapters=",".join(chapters or []), budget=budget,
                                                        kit=KIT_FOLDER, tar=TAR, zeros=zeros, seed=seed,
                                                        home=IMAGE_HOME, nproc=TANGO_NPROC), encoding="utf-8")
    (output / "Dockerfile").write_text(DOCKERFILE.format(tango_image=tango_image, tar=TAR, kit=KIT_FOLDER,
                                                         home=IMAGE_HOME, cpu_wheels=CPU_WHEELS,
                                                         torch=torch_requirement()), encoding="utf-8")
    listing = "".join(f"  - `{name}`: {points:g}\n" for name, points in problems.items())
    (output / "README.md").write_text(README.format(shown=shown, problems=listing, timeout=budget + 60,
                                                    budget=budget, seed=seed, tango_image=tango_image,
                                                    home=IMAGE_HOME, nproc=TANGO_NPROC,
                                                    fsize_mb=TANGO_FSIZE // 2**20), encoding="utf-8")
    return problems


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
