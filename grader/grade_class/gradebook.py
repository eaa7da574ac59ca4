"""Grading a class: what the LMS handed over in, a gradebook the LMS imports out.

    python -m grader grade-class INPUT --out DIR [--roster FILE] [--format canvas|moodle|nbgrader|csv]
                                 [--chapters 05,07] [--shard K/N]
    python -m grader grade-class merge DIR... --out DIR

INPUT is read by grader.grade_class.uploads (Canvas, Gradescope, Moodle, plain folders and archives).
Each upload's result is written to DIR/results/<upload>.json as soon as it is graded,
atomically, with its staff-only companion beside it; a rerun grades only uploads whose
content, kit version or settings changed, so an interrupted run resumes where it
stopped. Everything else in DIR (gradebooks, feedback, summary) is built from those
files alone by grader.grade_class.outputs, which is also what `merge` runs on shards.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

from grader import KIT_ROOT
from grader.checks import catalogue
from grader.grade_class.uploads import InputError, Upload, read_input, read_roster, roster_columns, shown
from grader.run.results import RUNNER_FAILED, GradeReport
from grader.run.reference import Reference
from grader.run.engine import grade
from grader.run.schedule import possible_points
from grader.files import read_json, write_json
from grader.grade_class.records import (RECORD_FORMAT, STATE, archive, copy_archives, needs_grading, read_records,
                                        record_path)
from grader.run.report import results_json, staff_path
from grader.run.stamp import describe, kit_version, stamp
from grader.run.stopping import Stopped, first_done, moment, whole
from grader.run.processes import Limits
from grader.run.sandbox import Sandbox
from grader.run.submission import SubmissionError

ROOT = KIT_ROOT


class Interrupted(Exception):
    """Ctrl-C during a class run; what was graded is kept."""

    def __init__(self, done: int, left: int):
        super().__init__(f"{done} graded, {left} left")
        self.done, self.left = done, left


def parse_shard(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        k, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise InputError(f"--shard takes K/N, e.g. 1/4 for the first of four slices; got {text!r}") from None
    if not 1 <= k <= n:
        raise InputError(f"--shard {text}: K must be between 1 and N")
    return k, n


def in_shard(upload_slug: str, shard: tuple[int, int] | None) -> bool:
    """A slice that depends on the upload alone, so every shard agrees without talking."""
    if shard is None:
        return True
    k, n = shard
    return int(hashlib.sha256(upload_slug.encode()).hexdigest(), 16) % n == k - 1




# ------------------------------------------------------------------ one upload


def _classify(upload: Upload, problem: str) -> str:
    if "holds no" in problem:
        return "no package"
    if upload.kind in ("zip", "tarball", "broken archive") or "readable" in problem or "cannot be read" in problem:
        return "unreadable archive"
    return "not graded"


def grade_upload(upload: Upload, content_hash: str, settings: dict, seed: int, sandbox: Sandbox) -> dict:
    """Grade one upload into its record (and the staff companion, under the key 'staff')."""
    from grader.grade_class.similarity import fingerprints

    chapters, public_only = settings["chapters"], settings["public_only"]
    prints, status = {}, "graded"
    try:
        submission = upload.submission()
        prints = fingerprints(submission.sources)
        report = grade(submission, chapters, public_only=public_only, runner=sandbox, seed=seed)
    except SubmissionError as problem:
        text = str(problem)
        for path in upload.paths:  # the upload by the name it was listed under, not where it sits on disk
            text = text.replace(str(path), upload.label).replace(path.name, upload.label)
        status = _classify(upload, text)
        report = GradeReport(upload.label, [], sandbox.describe(), "none", problem=text)
    except (OSError, ValueError) as problem:
        status = "unreadable archive"
        report = GradeReport(upload.label, [], sandbox.describe(), "none",
                             problem=f"the upload cannot be read ({type(problem).__name__}); upload it again")
    except Exception as crash:  # noqa: BLE001 - one upload must never cost the class its gradebook
        status = "not graded"
        report = GradeReport(upload.label, [], sandbox.describe(), "none",
                             problem=f"the grader hit an internal error on this upload ({type(crash).__name__}); "
                                     f"please report it")
    results = results_json(report, settings["stamp"]["seed"])
    per_chapter = results["extra_data"]["chapters"]
    numbers = [c.number for c in catalogue.chapters() if not chapters or c.number in chapters]
    return {
        "format": RECORD_FORMAT, "kit": settings["kit"], "stamp": settings["stamp"],
        "settings": _grading_key(settings), "hash": content_hash,
        "seed": seed, "upload": upload.info(), "students": [vars(s) | {} for s in upload.students],
        "status": status, "problem": report.problem,
        "score": report.score, "max_score": possible_points(chapters, public_only),
        "chapters": {n: {"score": per_chapter.get(n, {}).get("score", 0),
                         "max_score": per_chapter.get(n, {}).get("max_score", possible_points([n], public_only))}
                     for n in numbers},
        "checks": record_checks(report),
        "fingerprints": prints,
        # Checks the grader could not run (no process could start for them): not the
        # student's result; a rerun grades the upload again (records.needs_grading).
        "infrastructure": sum(r.cause == RUNNER_FAILED for r in report.results),
        "elapsed": round(report.elapsed, 3),
        "results": dict(results),
        "staff": results.staff,
    }


def record_checks(report: GradeReport) -> list[dict]:
    """Each check of a record: never the staff_* fields. What a student is shown of them
    is decided where they are shown (grader.run.visible, in the feedback files)."""
    return [{"name": r.check.name, "chapter": r.check.chapter, "task": r.check.task, "hidden": r.check.hidden,
             "status": r.status, "score": r.score, "max_score": r.check.points, "summary": r.check.summary,
             "diagnosis": r.diagnosis, "output": r.output, "verdict": r.verdict} for r in report.results]


def save_record(out: Path, record: dict) -> None:
    """The staff companion first, then the record: a record on disk is always complete."""
    record = dict(record)
    staff = record.pop("staff", None)
    path = record_path(out, record["upload"]["slug"])
    if staff is not None:
        write_json(staff_path(path), staff)
    write_json(path, record)


def _grading_key(settings: dict) -> dict:
    return {"chapters": settings["chapters"], "public_only": settings["public_only"]}


def _same_grading(record: dict, settings: dict) -> bool:
    """Graded by this kit, on this footing (stamp), with these flags."""
    return ((record.get("stamp") or {}).get("id") == settings["stamp"]["id"]
            and record.get("settings") == _grading_key(settings))


def _upload_seed(class_seed: int, content_hash: str) -> int:
    return int(hashlib.sha256(f"{class_seed}:{content_hash}".encode()).hexdigest(), 16) % 2**31


# ------------------------------------------------------------------- the class


class _ClassSandbox(Sandbox):
    """A sandbox that, once the run is stopped, starts no more workers (a closed Sandbox
    would otherwise boot a new zygote for the next check)."""

    stopped = False

    def worker(self):
        if self.stopped:
            raise RuntimeError("grading was interrupted")
        return super().worker()

    def close(self):
        self.stopped = True
        super().close()


class _Graders:
    """Where uploads are graded. Each worker is a fresh fork of the zygote; where the
    machine gives every worker namespaces of its own, no upload can reach another
    through a shared zygote, so one zygote serves the class. Elsewhere every upload
    gets a fresh sandbox, as before."""

    def __init__(self, budget: float, shared: bool | None):
        self.limits = Limits(submission_seconds=budget)
        self.shared_box = None
        self.shared = shared
        self.closing = threading.Event()
        self.open_boxes: set[Sandbox] = set()
        self.lock = threading.Lock()

    def start(self) -> None:
        if self.shared is False:
            return
        box = _ClassSandbox(self.limits)
        with self.lock:
            self.open_boxes.add(box)  # a Ctrl-C while it boots ends it too
        try:
            box.start()
            moment("sandbox boot")
            box.worker().kill()  # boots the zygote, which reports whether workers are isolated
        except Exception:  # noqa: BLE001 - each upload's own sandbox retries and reports
            box.close()
            self.shared = False
            return
        finally:
            with self.lock:
                self.open_boxes.discard(box)
        if self.shared is None:
            self.shared = box.isolated
        if self.shared:
            self.shared_box = box
        else:
            box.close()

    # An upload with checks the grader could not run is graded again this many times
    # before its record says so, after a pause: a machine short of processes for a moment
    # (another upload's import ending, say) has room again.
    RETRIES, RETRY_PAUSE = 1, 2.0

    def grade(self, upload, content_hash, settings, seed) -> dict:
        record = self._grade_once(upload, content_hash, settings, seed)
        for _ in range(self.RETRIES):
            if not record.get("infrastructure") or self.closing.is_set():
                break
            time.sleep(self.RETRY_PAUSE)
            record = self._grade_once(upload, content_hash, settings, seed)
        return record

    def _grade_once(self, upload, content_hash, settings, seed) -> dict:
        if self.shared_box is not None:
            return grade_upload(upload, content_hash, settings, seed, self.shared_box)
        box = _ClassSandbox(self.limits)
        with self.lock:
            self.open_boxes.add(box)
        try:
            if self.closing.is_set():
                raise KeyboardInterrupt
            return grade_upload(upload, content_hash, settings, seed, box)
        finally:
            with self.lock:
                self.open_boxes.discard(box)
            box.close()

    def close(self) -> None:
        """Ends every worker: uploads being graded stop at once (their results are dropped)."""
        self.closing.set()
        with self.lock:
            boxes = list(self.open_boxes)
        for box in boxes + ([self.shared_box] if self.shared_box else []):
            box.close()


class _ClassProgress:
    """What a TA watching grade-class sees: in a terminal, a bar counting uploads and
    naming those being graded; in a log (not a terminal), one whole line per upload
    graded, never a frame cut to the terminal's width."""

    def __init__(self, console: Console, total: int):
        self.console, self.total, self.done, self.started = console, total, 0, time.perf_counter()
        self.live = console.is_terminal
        self.grading: list[str] = []
        self.bar = None
        if self.live:
            self.progress = Progress(TextColumn("[bold]graded"), MofNCompleteColumn(), TextColumn("uploads"),
                                     BarColumn(), TimeElapsedColumn(), TextColumn("{task.fields[rate]}"),
                                     TimeRemainingColumn(), TextColumn("left; {task.description}"),
                                     console=console, transient=False)

    def __enter__(self):
        if self.live:
            self.progress.__enter__()
            self.bar = self.progress.add_task("", total=self.total, rate="")
        return self

    def __exit__(self, *exc):
        if self.live:
            self.progress.__exit__(*exc)

    def _now_grading(self) -> str:
        return "grading " + ", ".join(self.grading) if self.grading else ""

    def begin(self, label: str) -> None:
        self.grading.append(shown(label)[:40])
        if self.live:
            self.progress.update(self.bar, description=self._now_grading())

    def finished(self, label: str) -> None:
        name = shown(label)[:40]
        if name in self.grading:
            self.grading.remove(name)
        self.done += 1
        rate = f"{(time.perf_counter() - self.started) / self.done:.1f} s/upload"
        if self.live:
            self.progress.update(self.bar, advance=1, description=self._now_grading(), rate=rate)
        else:
            self.console.print(f"graded {self.done}/{self.total}: {name} ({rate})", soft_wrap=True)


def grade_class(source: Path, out: Path, *, roster: Path | None = None, fmt: str = "csv",
                chapters: list[str] | None = None, public_only: bool = False, seed: int | None = None,
                shard: tuple[int, int] | None = None, jobs: int | None = None, console: Console | None = None,
                budget: float = 600.0, assignment: str = "hero_transformer", assignment_id: str = "",
                columns: str = "total", csv_path: Path | None = None, json_dir: Path | None = None,
                share_sandbox: bool | None = None) -> list[dict]:
    """Grade every upload of `source` into `out`; returns the plain gradebook's rows.
    Raises InputError for input it cannot use and Interrupted on Ctrl-C."""
    from grader.grade_class import outputs as class_outputs

    console = console or Console()
    source, out = Path(source), Path(out)
    if jobs is not None and jobs < 1:
        raise InputError("--jobs takes a number of uploads to grade at once, 1 or more")
    if shard is not None and shard[1] > 1 and seed is None:
        # Each shard would draw a seed of its own, and merge refuses shards graded under
        # different seeds: say so now, not after every shard has run.
        raise InputError(f"--shard {shard[0]}/{shard[1]} needs --seed: the hidden checks draw their inputs from it, "
                         f"and the shards can be merged only when all of them were graded with the same one "
                         f"(e.g. --seed 4242 for every shard)")
    students = read_roster(Path(roster)) if roster else None
    out.mkdir(parents=True, exist_ok=True)
    previous = read_json(out / STATE) or {}
    class_seed = seed if seed is not None else previous.get("seed")
    if not isinstance(class_seed, int):
        class_seed = secrets.randbelow(2**31)
    # The stamp names the class's seed; each upload's own is drawn from it and its content.
    settings = {"chapters": chapters, "public_only": public_only, "kit": kit_version(), "stamp": stamp(class_seed)}
    options = {"format": fmt, "assignment": assignment, "assignment_id": assignment_id, "columns": columns,
               "roster_columns": roster_columns(Path(roster)) if roster else []}
    with tempfile.TemporaryDirectory(prefix="grade-class-") as work:
        intake = read_input(source, Path(work), students)
        mine = [u for u in intake.uploads if in_shard(u.slug, shard)]
        mine_slugs = {u.slug for u in mine}
        for entry in intake.entries:
            if entry.status == "to grade" and entry.upload not in mine_slugs:
                entry.status, entry.note = "other shard", f"graded by another shard than {shard[0]}/{shard[1]}"
        done = read_records(out)
        # Grades made under another stamp or other settings are kept, never overwritten:
        # they move to previous/<stamp>/ and regrade.csv compares them with the new ones.
        moved = archive(out, done, lambda r: _same_grading(r, settings), settings["stamp"])
        if moved:
            console.print(f"earlier grades kept in {', '.join(moved)} (graded under another stamp or other "
                          f"settings); regrading under {describe(settings['stamp'])}")
        write_json(out / STATE, {"format": RECORD_FORMAT, "kit": settings["kit"], "settings": _grading_key(settings),
                      "stamp": settings["stamp"], "seed": class_seed, "shard": list(shard) if shard else None,
                      "lms": intake.lms, "options": options, "roster": bool(students),
                      "students": [vars(s) for s in intake.students],
                      "entries": [vars(e) for e in intake.entries],
                      "uploads": sorted(mine_slugs)})
        done = read_records(out)
        todo = []
        unfinished = 0
        for upload in mine:
            content = upload.content_hash()
            old = done.get(upload.slug)
            if not (old and old.get("hash") == content and _same_grading(old, settings)):
                todo.append((upload, content))
            elif needs_grading(old):
                todo.append((upload, content))
                unfinished += 1
        skipped = len(mine) - len(todo)
        if skipped:
            console.print(f"{skipped} upload(s) unchanged since they were graded: kept, not regraded")
        if unfinished:
            console.print(f"{unfinished} upload(s) unchanged but with checks the grader could not run last time: "
                          f"graded again")
        _grade_all(todo, out, settings, class_seed, jobs, budget, console, share_sandbox)
    try:
        moment("gradebook written")
        rows = class_outputs.build([out], out, options)
        if csv_path is not None:
            csv_path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(out / "gradebook.csv", csv_path)
        if json_dir is not None:
            class_outputs.copy_results([out], json_dir)
    except KeyboardInterrupt:
        raise Stopped(f"Stopped (Ctrl-C) while the gradebook was written: every upload is graded and kept in "
                      f"{out}/results/. Run the same command again to write the gradebook (nothing is "
                      f"regraded).") from None
    return rows


def _grade_all(todo, out, settings, class_seed, jobs, budget, console, share_sandbox) -> None:
    if not todo:
        return
    if Reference.available() is not None:
        Reference.available().modules  # imported once, before grading threads race for it
    graders = _Graders(budget, share_sandbox)
    try:
        graders.start()
    except KeyboardInterrupt:
        graders.close()
        raise Interrupted(0, len(todo)) from None
    jobs = jobs or (max(1, min(2, (os.cpu_count() or 1))) if graders.shared else 1)
    where = ("one sandbox shared by the class (every worker a fresh fork in namespaces of its own)" if graders.shared
             else "a fresh sandbox per upload (this machine cannot give workers namespaces of their own)")
    console.print(f"grading {len(todo)} upload(s), {jobs} at a time, in {where}")
    finished = 0
    pool = ThreadPoolExecutor(max_workers=jobs)
    pending = set()
    try:
        with _ClassProgress(console, len(todo)) as progress:
            queue = list(todo)

            def submit():
                upload, content = queue.pop(0)
                progress.begin(upload.label)
                future = pool.submit(graders.grade, upload, content, settings, _upload_seed(class_seed, content))
                future.upload = upload
                pending.add(future)

            for _ in range(min(jobs, len(queue))):
                submit()
            while pending:
                ready = first_done(pending)
                for future in ready:
                    pending.discard(future)
                    record = future.result()
                    with whole():  # a record and its staff companion, both or neither
                        save_record(out, record)
                        finished += 1
                        moment("record written")
                    progress.finished(future.upload.label)
                    moment("between uploads")
                    if queue:
                        submit()
    except KeyboardInterrupt:
        graders.close()
        pool.shutdown(wait=True, cancel_futures=True)
        raise Interrupted(finished, len(todo) - finished) from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        graders.close()


def merge(folders: list[Path], out: Path, options: dict | None = None) -> list[dict]:
    """Join the results of several runs (the shards of one class) into one gradebook."""
    from grader.grade_class import outputs as class_outputs

    missing = [f for f in folders if not (f / STATE).is_file() and not (f / "results").is_dir()]
    if missing:
        raise InputError(f"{', '.join(shown(str(f)) for f in missing)} holds no grade-class results "
                         f"(no {STATE}, no results/); pass the folders given to --out")
    (out / "results").mkdir(parents=True, exist_ok=True)
    for folder in folders:
        if folder.resolve() != out.resolve():
            for path in sorted((folder / "results").glob("*.json")):
                if not path.name.startswith("."):
                    shutil.copyfile(path, out / "results" / path.name)
            copy_archives(folder, out)
    return class_outputs.build(folders, out, options)
