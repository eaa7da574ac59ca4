"""An Autolab autograder, built from this kit:

    python -m grader autolab --chapters 05 --output DIR

DIR receives the two files Autolab asks of an autograded assessment, and the image
they run in:

    autograde.tar        the kit (grader/, solutions/, the stub copy) in hero_transformer_grader/
    autograde-Makefile   unpacks the tar and grades the handin
    Dockerfile           an autograding image with Python, CPU torch and bubblewrap
    README.md            the assessment's settings: handin, problems and their points

For every submission Autolab copies the handin (renamed to the assessment's handin
name), autograde.tar and autograde-Makefile (renamed Makefile) into an empty folder,
runs `make`, and reads the last line of the output (Autolab's docs: "Guide for Lab
Authors", "Formatted Feedback"). The Makefile runs

    python -m grader.lms.autolab --handin-dir .. [--chapters 05] [--budget S]

which grades the handin (a .zip or tarball of hero_transformer/, or one file of the
package, such as model.py, graded with the stubs for the others) with every check of
the chapters, hidden ones included, in the sandbox of `python -m grader grade`, and
prints: each check's status and the grader's own diagnosis (a hidden check by name and
diagnosis only), the kit's stamp, the semantic-feedback line
`{"_presentation": "semantic", "stages": [...], ...}` and last
`{"scores": {"ch05": 36}}`, one problem per chapter, named `chNN`.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import tarfile
from pathlib import Path

from grader.lms.external import KIT_FOLDER, dockerfile, grade_upload, kit_files, status_line

TAR = "autograde.tar"
MAKEFILE = "autograde-Makefile"
NOT_THE_HANDIN = {"Makefile", TAR, KIT_FOLDER}
HINT_CHARS = 400

MAKEFILE_TEXT = """\
# hero_transformer's Autolab autograder (chapters {shown}), written by `python -m grader autolab`.
# Autolab copies the handin, autograde.tar and this file (as Makefile) into one folder
# and runs `make`; the last line printed is the autoresult, {{"scores": {{...}}}}.
HERO_TRANSFORMER_PYTHON ?= $(firstword $(wildcard /opt/hero_transformer/.venv/bin/python) python3)
CHAPTERS := {chapters}
BUDGET := {budget}

all:
\t@rm -rf {kit} && tar -xf {tar}
\t@# Graded code that runs as `nobody` (a root grader without bubblewrap) reads only the sandbox's side.
\t@cd {kit} && chmod -R go-rwx solutions grader && chmod go+x . grader grader/run \\
\t    && chmod go+r grader/__init__.py grader/run/__init__.py && chmod -R go+rX grader/run/inside grader/checks
\t@cd {kit} && "$(HERO_TRANSFORMER_PYTHON)" -m grader.lms.autolab --handin-dir .. --budget $(BUDGET) \\
\t    $(if $(CHAPTERS),--chapters $(CHAPTERS)) \\
\t  || {{ echo "The autograder failed before it could grade; please tell the course staff."; \\
\t       echo '{zeros}'; }}

clean:
\trm -rf {kit}

.PHONY: all clean
"""

README = """\
# hero_transformer on Autolab (chapters {shown})

Written by `python -m grader autolab`. In the assessment's settings:

- **Handin:** one file. `handin.zip` for the zip `make submit` builds (any `.zip` or
  tarball name works, and a lone file of the package, such as `model.py`, is graded with
  the stub copy for the other files).
- **Problems,** named exactly so, with these maximum scores:

{problems}
- **Autograder:** upload `autograde.tar` and `autograde-Makefile`; choose an image that has
  this folder's `Dockerfile` built (`docker build -t hero-transformer-grader .` where
  Docker runs, then make it an Autolab/Tango image). Its Python is
  `/opt/hero_transformer/.venv/bin/python`; elsewhere the Makefile takes `python3`, or
  `HERO_TRANSFORMER_PYTHON`. Timeout: at least {timeout} s (the grader's budget is {budget} s).

Try it offline as Autolab runs it:

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
    """The one file Autolab put beside the Makefile and the tar, or why there is none."""
    found = sorted(p for p in folder.iterdir() if p.name not in NOT_THE_HANDIN and not p.name.startswith("."))
    if len(found) == 1:
        return found[0]
    if not found:
        return "Nothing was handed in. Upload the zip `make submit` builds."
    return f"Found {len(found)} files where one handin was expected ({', '.join(p.name for p in found[:5])})."


def feedback(report, numbers: list[str]) -> tuple[list[str], dict, dict]:
    """(lines a student reads, the semantic-feedback object, the scores by problem)."""
    from grader.checks import catalogue
    from grader.run.report import plain
    from grader.run.results import PASSED

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
            check = result.check
            name = check.name + (" (hidden)" if check.hidden else "")
            said = status_line(result)
            lines.append(f"  {result.score:g}/{check.points:g}  {name}: {said}"[:HINT_CHARS + 120])
            case = {"passed": result.status == PASSED}
            if result.status != PASSED:
                case["hint"] = said[:HINT_CHARS]
            cases[stage][name] = case
        lines.append("")
    lines.append(f"Total: {report.score:g} / {report.max_score:g} points")
    return lines, {"_presentation": "semantic", "stages": stages, **cases}, scores


def run(folder: Path, chapters: list[str] | None, budget: float, out=None) -> dict:
    """Grade the handin in folder and print Autolab's output; the scores."""
    from grader.checks import catalogue
    from grader.run.stamp import stamp

    out = out or sys.stdout
    numbers = [c.number for c in catalogue.chapters() if not chapters or c.number in chapters]
    seed = secrets.randbelow(2**31)
    found = find_handin(folder)
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
    parser.add_argument("--budget", type=float, default=300.0, help="wall-clock seconds for the whole handin")
    args = parser.parse_args(argv)
    run(Path(args.handin_dir), parse_chapters(args.chapters), args.budget)
    return 0


# ------------------------------------------------------------------ building


def build(output: Path, chapters: list[str] | None = None, budget: int = 300) -> dict[str, float]:
    """autograde.tar, autograde-Makefile, the image's Dockerfile and a README into
    output (new or empty); the problems and their maximum scores."""
    from grader.checks import catalogue
    from grader.run.engine import possible_points

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
    (output / MAKEFILE).write_text(MAKEFILE_TEXT.format(shown=shown, chapters=",".join(chapters or []), budget=budget,
                                                        kit=KIT_FOLDER, tar=TAR, zeros=zeros), encoding="utf-8")
    (output / "Dockerfile").write_text(dockerfile("autolab", "Autolab's Tango", from_tar=TAR), encoding="utf-8")
    listing = "".join(f"  - `{name}`: {points:g}\n" for name, points in problems.items())
    (output / "README.md").write_text(README.format(shown=shown, problems=listing, timeout=budget + 60,
                                                    budget=budget), encoding="utf-8")
    return problems


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
