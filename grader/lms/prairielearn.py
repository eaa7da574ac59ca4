"""A PrairieLearn external grader, built from this kit:

    python -m grader prairielearn --chapters 05 --output DIR

DIR holds what a course repository needs (DIR/README.md says where each part goes):

    Dockerfile                      the grader image: Python, CPU torch (pinned as the kit
                                    pins it), bubblewrap, and the kit below at /opt/hero_transformer
    hero_transformer_grader/        the kit (grader/, solutions/, the stub copy) and the
                                    entry point, grade-prairielearn
    info.json                       a question's info.json: externalGradingOptions naming the
                                    image, the entry point (with the chapters) and the timeout
    question.html                   the question: a file upload of submission.zip, and the results

PrairieLearn copies the student's files to /grade/student (and the question's data to
/grade/data/data.json) and runs the entry point, which runs

    python -m grader.lms.prairielearn [--root /grade] [--chapters 05] [--budget S]

That grades the upload with every check of the chapters (hidden ones included) in the
same sandbox as `python -m grader grade`, creates /grade/results/ and writes
results.json as PrairieLearn documents it (docs/externalGrading.md, "Grading results"):
`gradable`, `score` in [0, 1], `message`, and `tests` with `name`,
`description`, `points`, `max_points`, `message`, `output`; `"gradable": false` with
`format_errors` when the upload is unusable (nothing handed in, no package in it, not
an archive), which costs the student no attempt; always under PrairieLearn's 1 MB
limit; the kit's stamp under `stamp`. A hidden check shows its name, points, status
and the grader's own diagnosis with every number withheld (grader/run/visible.py), never
its summary, inputs, expected values or anything the code printed. The staff companion goes to results.staff.json beside it, which PrairieLearn
does not read. PRAIRIELEARN_GRADE_ROOT (default /grade) moves the whole layout, so a
copy of it can be graded anywhere.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import os
import secrets
import shutil
import stat
import sys
import tempfile
import uuid
from pathlib import Path, PurePosixPath

from grader.lms.external import IMAGE_HOME, KIT_FOLDER, dockerfile, grade_upload, kit_files

ROOT_ENV = "PRAIRIELEARN_GRADE_ROOT"
DEFAULT_ROOT = "/grade"
MAX_BYTES = 1_000_000  # "this file should be limited to 1 MB"
MAX_TIMEOUT = 600  # externalGradingOptions.timeout "cannot exceed 600 seconds"
ENTRY = "grade-prairielearn"
LABEL = "your upload"
FAILED = ("The autograder failed before it could grade this submission, so it does not count as an attempt. "
          "Please tell the course staff.")

ENTRY_SCRIPT = """\
#!/bin/sh
# PrairieLearn runs this in the grader image for every submission: it grades
# $ROOT/student with the chapters below (or the first argument) and always leaves
# $ROOT/results/results.json behind.
ROOT="${{PRAIRIELEARN_GRADE_ROOT:-/grade}}"
KIT="$(cd "$(dirname "$0")" && pwd)"
PYTHON="${{PRAIRIELEARN_PYTHON:-$KIT/.venv/bin/python}}"
CHAPTERS="${{1:-{chapters}}}"
mkdir -p "$ROOT/results"
cd "$KIT" && "$PYTHON" -m grader.lms.prairielearn --root "$ROOT" --budget {budget} ${{CHAPTERS:+--chapters "$CHAPTERS"}}
if [ ! -s "$ROOT/results/results.json" ]; then
  cat > "$ROOT/results/results.json" <<'EOF'
{failed}
EOF
fi
exit 0
"""

QUESTION = """\
<pl-question-panel>
  <p>Upload <code>submission.zip</code>, the zip of your <code>hero_transformer/</code> package that
  <code>make submit</code> builds. It is graded with every check of chapter{s} {chapters},
  hidden ones included. An upload with no package in it is not graded and costs no attempt.</p>
  <pl-file-upload file-names="submission.zip"></pl-file-upload>
</pl-question-panel>

<pl-submission-panel>
  <pl-external-grader-results></pl-external-grader-results>
  <pl-file-preview></pl-file-preview>
</pl-submission-panel>
"""

README = """\
# hero_transformer on PrairieLearn (chapters {chapters})

Written by `python -m grader prairielearn`. Three parts:

1. **The grader image.** Where Docker runs (not needed on the course's server):

   ```bash
   docker build -t {image} .
   docker push {image}
   ```

   The image holds Python 3.12, the CPU build of torch (`{torch}`, from
   `{cpu_wheels}`), bubblewrap and the kit, with the entry point at
   `{home}/{entry}`. Rebuild and push it (under a new tag, named in info.json)
   whenever the kit changes.

2. **The question.** Copy `info.json` and `question.html` into a question folder of the
   course repository, e.g. `questions/hero_transformer/{question}/`. In `info.json`,
   `externalGradingOptions.image` must name the image you pushed; the entry point's
   argument is the chapters graded (`{entry} 05,07` for two). A fresh `uuid` was written
   for it; keep it unique in the course.

3. **Sync** the course in PrairieLearn and try the question as a student: the reference
   (`solutions/hero_transformer` zipped as `make submit` zips it) scores 100 %, the stub
   copy 0 %, a zip without the package is "invalid, not gradable".

The timeout ({timeout} s) is the grader's own budget ({budget} s) plus the container's start;
checks still unrun when the budget is spent score `timeout`, so a result is always written.
"""


def not_gradable(problems: list[str], found_stamp: dict) -> dict:
    return {"gradable": False, "format_errors": problems, "score": 0.0,
            "message": "This submission could not be graded and does not count as an attempt: " + " ".join(problems),
            "tests": [], "stamp": found_stamp}


def results(report, found_stamp: dict) -> dict:
    """PrairieLearn's results.json for a graded upload."""
    from grader.run.report import plain
    from grader.run.results import PASSED
    from grader.run.visible import visible_check

    tests = []
    for result in report.results:
        seen = visible_check(result)
        # A hidden check's summary names its inputs: its description says only what it is.
        tests.append({"name": seen.name, "description": "hidden check" if seen.hidden else seen.summary,
                      "points": seen.score, "max_points": seen.points,
                      "message": seen.said, "output": seen.output.strip()[-2000:]})
    passed = sum(r.status == PASSED for r in report.results)
    message = (f"{report.score:g} / {report.max_score:g} points: {passed} of {len(report.results)} checks passed "
               f"({sum(t.check.hidden for t in report.results)} of them hidden checks, shown by name and diagnosis).")
    if report.problem:
        message = f"{plain(report.problem)} {message}"
    score = report.score / report.max_score if report.max_score else 0.0
    return fit({"gradable": True, "score": min(1.0, max(0.0, round(score, 6))), "message": message,
                "tests": tests, "stamp": found_stamp})


def size(data: dict) -> int:
    return len(json.dumps(data).encode("utf-8"))


def fit(data: dict, limit: int = MAX_BYTES) -> dict:
    """Within PrairieLearn's limit: outputs shortened first, then messages; tests stay."""
    for field, keep in (("output", 400), ("output", 0), ("message", 300), ("message", 80)):
        if size(data) <= limit:
            break
        for test in data["tests"]:
            if len(test[field]) > keep:
                test[field] = (test[field][:keep] + " [cut]") if keep else ""
    if size(data) > limit:
        data["tests"] = data["tests"][: max(1, len(data["tests"]) * limit // size(data) - 1)]
        data["message"] += " Some checks are left out of this list: it would exceed PrairieLearn's size limit."
    return data


def unpack_data_files(data: dict, target: Path) -> bool:
    """The files PrairieLearn also passes in data.json (`submitted_answers._files`:
    name and base64 contents), written to target by their base names; False if none."""
    files = ((data.get("submitted_answers") or {}).get("_files") or []) if isinstance(data, dict) else []
    wrote = False
    for entry in files if isinstance(files, list) else []:
        if not isinstance(entry, dict):
            continue
        name = PurePosixPath(str(entry.get("name", "")).replace("\\", "/")).name
        if not name or name in (".", ".."):
            continue
        try:
            content = base64.b64decode(str(entry.get("contents", "")), validate=True)
        except (binascii.Error, ValueError):
            continue
        (target / name).write_bytes(content)
        wrote = True
    return wrote


def grade_job(root: Path, chapters: list[str] | None, budget: float) -> tuple[dict, dict | None]:
    """(results.json, the staff companion or None) for the job laid out under root."""
    from grader.files import read_json
    from grader.run.report import staff_json
    from grader.run.stamp import stamp

    data = read_json(root / "data" / "data.json") or {}
    variant = data.get("variant_seed")
    # A variant's seed where PrairieLearn gives one (a regrade of it draws the same hidden inputs).
    seed = int(variant) % 2**31 if isinstance(variant, int) or str(variant).isdigit() else secrets.randbelow(2**31)
    found_stamp = stamp(seed)
    student = root / "student"
    with tempfile.TemporaryDirectory(prefix="prairielearn-") as scratch:
        handed_in = student
        if not (student.is_dir() and any(student.iterdir())):
            handed_in = Path(scratch) / "student"
            handed_in.mkdir()
            if not unpack_data_files(data, handed_in):
                return not_gradable(["Nothing was uploaded. Upload submission.zip (`make submit` builds it)."],
                                    found_stamp), None
        outcome = grade_upload(handed_in, LABEL, chapters, seed, budget)
    if outcome.unusable:
        return not_gradable([outcome.unusable], found_stamp), None
    if outcome.report is None:
        return not_gradable([FAILED], found_stamp), {"stamp": found_stamp, "problem": outcome.failed}
    return results(outcome.report, found_stamp), staff_json(outcome.report, found_stamp)


def main(argv=None) -> int:
    from grader.checks.catalogue import parse_chapters
    from grader.files import write_atomic

    parser = argparse.ArgumentParser(prog="python -m grader.lms.prairielearn", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", help=f"the job's folder (default: ${ROOT_ENV}, else {DEFAULT_ROOT})")
    parser.add_argument("--chapters", help="e.g. 05 or 05,07 (default: all)")
    parser.add_argument("--budget", type=float, default=300.0, help="wall-clock seconds for the whole upload")
    args = parser.parse_args(argv)
    root = Path(args.root or os.environ.get(ROOT_ENV) or DEFAULT_ROOT)
    out = root / "results"
    out.mkdir(parents=True, exist_ok=True)  # PrairieLearn does not make it
    try:
        found, staff = grade_job(root, parse_chapters(args.chapters), args.budget)
    except Exception:  # noqa: BLE001 - a results file is written whatever happened
        import traceback

        traceback.print_exc()
        from grader.run.stamp import stamp

        found, staff = not_gradable([FAILED], stamp(None)), None
    if staff is not None:
        write_atomic(out / "results.staff.json", json.dumps(staff, indent=1))
    write_atomic(out / "results.json", json.dumps(found, indent=1))
    print(f"results.json: gradable {found['gradable']}, score {found['score']:g}", file=sys.stderr)
    return 0


# ------------------------------------------------------------------ building


def timeouts(chapters: list[str] | None, budget: float = 300.0) -> tuple[int, int]:
    """(the grader's budget, PrairieLearn's timeout): the timeout leaves a minute for the
    container's start and torch's import, and never exceeds PrairieLearn's 600 s."""
    timeout = min(MAX_TIMEOUT, int(budget) + 60)
    return timeout - 60, timeout


def info_json(chapters: list[str] | None, image: str) -> dict:
    from grader.checks import catalogue

    chosen = [c for c in catalogue.chapters() if not chapters or c.number in chapters]
    _, timeout = timeouts(chapters)
    title = ("hero_transformer: " + ", ".join(f"chapter {c.number} ({c.title})" for c in chosen)
             if len(chosen) <= 2 else f"hero_transformer: chapters {', '.join(c.number for c in chosen)}")
    return {
        "uuid": str(uuid.uuid4()),
        "type": "v3",
        "title": title,
        "topic": "hero_transformer",
        "tags": ["hero_transformer"] + [f"ch{c.number}" for c in chosen],
        "gradingMethod": "External",
        "singleVariant": True,
        "externalGradingOptions": {
            "enabled": True,
            "image": image,
            "entrypoint": f"{IMAGE_HOME}/{ENTRY} {','.join(chapters or [])}".strip(),
            "timeout": timeout,
        },
    }


def build(output: Path, chapters: list[str] | None = None, image: str | None = None) -> dict:
    """Write the image definition, the kit with its entry point, info.json and
    question.html into output (new or empty); what info.json says."""
    from grader.lms.external import CPU_WHEELS, torch_requirement
    from grader.run.stamp import kit_version

    output = Path(output)
    if output.exists() and any(output.iterdir()):
        raise FileExistsError(f"{output} is not empty: choose a new folder")
    image = image or f"hero-transformer-grader:{kit_version()}"
    budget, timeout = timeouts(chapters)
    kit = output / KIT_FOLDER
    for path, name in kit_files(include_stubs=True):
        (kit / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, kit / name)
    failed = json.dumps(not_gradable([FAILED], {"kit": kit_version()}))
    entry = kit / ENTRY
    entry.write_text(ENTRY_SCRIPT.format(chapters=",".join(chapters or []), budget=budget, failed=failed),
                     encoding="utf-8")
    entry.chmod(entry.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    (output / "Dockerfile").write_text(dockerfile("prairielearn", "PrairieLearn", f"{IMAGE_HOME}/{ENTRY}"),
                                       encoding="utf-8")
    info = info_json(chapters, image)
    (output / "info.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    shown = ", ".join(chapters) if chapters else "00 to 09"
    (output / "question.html").write_text(QUESTION.format(chapters=shown, s="s" if not chapters or len(chapters) > 1
                                                          else ""), encoding="utf-8")
    (output / "README.md").write_text(README.format(chapters=shown, image=image, torch=torch_requirement(),
                                                    cpu_wheels=CPU_WHEELS, home=IMAGE_HOME, entry=ENTRY,
                                                    question="ch" + "-".join(chapters) if chapters else "all",
                                                    timeout=timeout, budget=budget), encoding="utf-8")
    return info


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
