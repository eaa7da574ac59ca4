"""One grading as a command runs it: the runner chosen and booted, the upload loaded,
graded (grader.run.engine), the results file written whatever happens, and the report
shown. The command line (grader/__main__.py), the pytest entry and the LMS back ends all
start a grading here."""

from __future__ import annotations

import time
import traceback
from typing import Callable, NamedTuple

from rich.console import Console

from grader.run.stopping import Stopped, moment, whole


def parse_chapters(text: str | None) -> list[str] | None:
    """The command line's chapter list ("05,07", "ch5") as chapter numbers; exits with the
    reason when one is unknown."""
    from grader.checks import catalogue

    try:
        return catalogue.parse_chapters(text)
    except ValueError as unknown:
        raise SystemExit(f"error: {unknown}") from None


WEAK_SANDBOX = ("bubblewrap is not usable here, and without it the code being graded could read "
                "solutions/ and the grader's files. Install it (`apt-get install bubblewrap`), or pass "
                "--allow-weak-sandbox to grade anyway with process isolation only.")


STOPPED = ("Grading was stopped (Ctrl-C) before it finished, so nothing was graded. "
           "Run the same command again to grade.")


def run_grading(path: str, chapters, public_only: bool, json_path: str | None, console: Console,
                seed: int | None = None, use_reference: bool = True, allow_weak_sandbox: bool = True,
                budget: float = 600.0, runner_kind: str | None = None, grouped: bool = True,
                for_the_author: bool = False, parallel: int | None = None):
    """`chapters` may be the command line's text ("05,07"): it is read once the runner
    boots, since reading it imports the checks and so torch. `runner_kind` is "sandbox",
    "portable" or None (the best this machine offers). `for_the_author`: the report goes
    to whoever wrote the code and nowhere else (`check`), so it shows everything the code
    said, as a run with no certified parts does."""
    from grader.run.processes import Limits, RunnerRefused
    from grader.run.reference import Reference
    from grader.run.results import GradeReport
    from grader.run.runners import choose, open_runner

    from grader.profile import PHASES, seconds_since_process_start

    started = time.perf_counter()  # the report's time is the student's wait, runner start-up included
    before = seconds_since_process_start()
    if before is not None:
        PHASES.add("interpreter and imports", before)
    kind = choose(runner_kind)
    if seed is None and json_path:
        import secrets

        seed = secrets.randbelow(2**31)  # chosen here, so the results file's stamp can name it
    if kind == "portable" and public_only:
        use_reference = False  # it holds no reference: the student's own parts stand in, as in a release
    needs_reference = (use_reference and Reference.present()) or not public_only
    report, runner = None, None
    try:
        with PHASES.phase("sandbox boot"):
            try:
                # Boot the runner first: it imports torch while this process does the same.
                # A grade (make grade, Gradescope's run_autograder) also ends by the wall clock at its
                # budget, before a platform's timeout; the author's own check keeps the later caps.
                limits = Limits(submission_seconds=budget, submission_wall_seconds=None if for_the_author else budget)
                runner = open_runner(runner_kind, limits, with_reference=needs_reference)
            except RunnerRefused as refused:
                report = GradeReport(str(path), [], f"{kind}: refused", "none", problem=str(refused))
            if runner is not None:
                try:
                    runner.start()
                except Exception:  # noqa: BLE001 - grade() retries, and reports the failure per check
                    pass
        moment("sandbox boot")
        chapters, engine = _import_the_grading(chapters)
        if runner is not None:
            report = _grade_upload(path, chapters, runner, console, engine, allow_weak_sandbox, dict(
                public_only=public_only, seed=seed, use_reference=use_reference, grouped=grouped,
                for_the_author=for_the_author, parallel=parallel))
    except KeyboardInterrupt:
        raise _stopped(runner, path, json_path, seed, started) from None
    except BaseException:
        _close(runner)
        raise
    _close(runner)
    report.elapsed = time.perf_counter() - started
    _write_and_show(report, json_path, seed, console, engine)
    return report


def _grade_upload(path, chapters, runner, console: Console, engine: _Engine, allow_weak_sandbox: bool,
                  options: dict):
    """The upload loaded and graded on `runner`, `options` passed on to grade(); where it
    could not be, a report that says why."""
    from grader.profile import PHASES
    from grader.run.reference import Reference
    from grader.run.results import GradeReport

    try:
        with PHASES.phase("reference and plan"):
            submission = engine.load(path)
        if runner.kind != "bwrap" and not allow_weak_sandbox and options["use_reference"] and Reference.present():
            raise engine.SubmissionError(WEAK_SANDBOX)
        with console.status("grading…"):
            return engine.grade(submission, chapters, runner=runner, **options)
    except engine.SubmissionError as problem:
        return GradeReport(str(path), [], "not started", "none", problem=str(problem))
    except KeyboardInterrupt:
        raise
    except Exception as crash:  # noqa: BLE001 - the results file must be written regardless
        report = GradeReport(str(path), [], "not started", "none",
                             problem=f"the grader hit an internal error; please report it: {crash!r}")
        traceback.print_exc()
        return report


def _stopped(runner, path, json_path: str | None, seed, started: float) -> Stopped:
    """Ctrl-C while grading: the workers ended, and a results file that says the grading
    stopped (an older one left in its place would be taken for this upload's); the Stopped
    that says what was kept."""
    _close(runner)
    if not json_path:
        return Stopped("Stopped (Ctrl-C) before the checks finished. Run the same command again to see them.")
    from grader.run.report import results_json, write_json
    from grader.run.results import GradeReport

    stopped = GradeReport(str(path), [], "stopped", "none", time.perf_counter() - started, problem=STOPPED)
    with whole():
        write_json(results_json(stopped, seed), json_path)
    return Stopped(f"Stopped (Ctrl-C) before the grading finished: {json_path} says so and holds no "
                   f"check. Run the same command again to grade.")


def _write_and_show(report, json_path: str | None, seed, console: Console, engine: _Engine) -> None:
    """The results file written (where asked) and the report shown."""
    from grader.profile import PHASES

    try:
        if json_path:
            with PHASES.phase("report"), whole():
                moment("results written")
                engine.write_json(engine.results_json(report, seed), json_path)
        with PHASES.phase("report"):
            moment("report")
            engine.render(report, console)
    except KeyboardInterrupt:
        raise Stopped(f"Stopped (Ctrl-C) after the grading finished: {json_path} holds its results."
                      if json_path else "Stopped (Ctrl-C) while the report was shown. Run the same command "
                                        "again to see it.") from None
    if json_path:
        console.print(f"[dim]results written to {json_path}[/]")


class _Engine(NamedTuple):
    """The engine's entry points, imported while the runner boots."""

    grade: Callable
    load: Callable
    SubmissionError: type
    render: Callable
    results_json: Callable
    write_json: Callable


def _import_the_grading(chapters) -> tuple[list[str] | None, _Engine]:
    """(chapters, and the engine's entry points), imported while the runner boots."""
    import gc

    from grader.profile import PHASES

    # Importing torch builds a large heap, which the collector would walk over and over as it
    # grows; what is imported now lives until the end, so it is frozen, never walked again.
    collecting = gc.isenabled()
    gc.disable()
    try:
        with PHASES.phase("torch and the checks imported"):
            chapters = parse_chapters(chapters) if isinstance(chapters, str) else chapters
            from grader.run.engine import grade
            from grader.run.report import render, results_json, write_json
            from grader.run.submission import SubmissionError, load

            gc.freeze()
    finally:
        if collecting:
            gc.enable()
    return chapters, _Engine(grade, load, SubmissionError, render, results_json, write_json)


def _close(runner) -> None:
    from grader.profile import PHASES

    if runner is not None:
        with PHASES.phase("shutdown"), whole():
            runner.close()


def check_package(package: str, chapters, console: Console, budget: float = 600.0,
                  runner_kind: str | None = None, json_path: str | None = None):
    """`check`: the public checks on the author's own package, shown on `console`;
    (the report, the exit status). The pytest entry (grader/pytest_plugin.py) calls it too,
    so its verdicts are check.py's. `json_path`: the results also written there, as the
    course's grader writes them (a verdict per check under extra_data)."""
    report = run_grading(package, chapters, True, json_path, console, budget=budget, runner_kind=runner_kind,
                         for_the_author=True)
    return report, 0 if report.results and all(r.status == "passed" for r in report.results) else 1
