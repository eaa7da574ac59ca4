"""The public checks as pytest items, for `pytest` and the editors' test panels that run it.

In a student's copy `pytest` collects one item per public check, under the lesson that
explains it and the task it checks:

    assignments/ch05_block/README.md::layer_norm::example_figures

marked with its chapter and its task (`pytest -m ch05`, `pytest -m layer_norm`, `pytest -k
layer_norm`). An item's path is a real file so that a test panel can run one item again by
its id, and the lesson is the file that says what the check means: the panel's "go to test"
opens the lesson at the check's row of its table.

Running the items grades once per session, for the chapters of the items selected, through
`python -m grader check` itself (the command check.py runs): the statuses are check.py's,
check for check, and a failing item's message is the diagnosis check.py prints under the
check, never a traceback. A check that is not `passed` fails: a task not started fails
each of its checks with "not implemented" and the task's id, a check waiting on a part says
which. The terminal summary ends with check.py's total, what waits on what, and the hidden
checks still to come (which never appear as items).

Collection imports neither torch nor the checks in a student's copy: the release writes
grader/checks/public_checks.json (public_checks() below) from the catalogue. In the course's
kit, where that file is absent, the catalogue is read instead:

    python -m pytest -p grader.pytest_plugin assignments/ch05_block      # ./hero_transformer
    python -m pytest -p grader.pytest_plugin assignments --hero-package solutions/hero_transformer

`python -m grader.pytest_plugin [package] [--chapters 05] --statuses FILE` is a public run
as `python -m grader check` prints it that also writes each check's status to FILE:
check.py --watch runs it after each save to say what changed since the run before.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import sys
from pathlib import Path

import pytest

from grader.files import write_atomic
from grader.run.stopping import install, moment, whole

# Written by the release (grader/generate/release.py), read by collection: no torch needed.
PUBLIC_CHECKS = Path(__file__).resolve().parent / "checks" / "public_checks.json"
LESSON = re.compile(r"assignments/ch(\d\d)_\w+/README\.md")
_GRADING = pytest.StashKey["Grading"]()
_REGISTERED = pytest.StashKey[set]()
_MANIFEST = pytest.StashKey[dict]()


# ------------------------------------------------------------------ what is collected


def public_checks(chapters: list[str] | None = None) -> dict[str, dict]:
    """{chapter: {"lesson": path of its README from the copy's root, "title": ...,
    "tasks": [[task, [check names without chapter and task]], ...]}} for the public
    checks, in the catalogue's order (the order check.py reports them in)."""
    from grader.checks import catalogue

    found = {}
    for chapter in catalogue.chapters():
        if chapters and chapter.number not in chapters:
            continue
        tasks: dict[str, list[str]] = {}
        for check in chapter.checks:
            if not check.hidden:
                tasks.setdefault(check.task, []).append(check.name.removeprefix(f"ch{chapter.number}.{check.task}."))
        found[chapter.number] = {"lesson": f"assignments/{chapter.module}/README.md", "title": chapter.title,
                                 "tasks": [[task, names] for task, names in tasks.items()]}
    return found


def _manifest(config: pytest.Config) -> dict[str, dict]:
    if _MANIFEST not in config.stash:
        try:
            config.stash[_MANIFEST] = json.loads(PUBLIC_CHECKS.read_text(encoding="utf-8"))
        except OSError:
            config.stash[_MANIFEST] = public_checks()  # the kit: read from the catalogue itself
    return config.stash[_MANIFEST]


def _register_markers(config: pytest.Config, manifest: dict[str, dict]) -> None:
    registered = config.stash.setdefault(_REGISTERED, set())
    for number, chapter in manifest.items():
        for name, what in [(f"ch{number}", f"chapter {number}'s public checks ({chapter['title']})")] + [
                (task, f"the public checks of task {task} (chapter {number})") for task, _ in chapter["tasks"]]:
            if name not in registered:
                registered.add(name)
                config.addinivalue_line("markers", f"{name}: {what}")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hero_transformer", "the course's public checks")
    group.addoption("--hero-package", default=None,
                    help="the package the checks grade, from the copy's root (default: hero_transformer)")
    parser.addini("hero_package", "the package the public checks grade, from the rootdir", default="hero_transformer")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_GRADING] = Grading(config)
    if PUBLIC_CHECKS.exists():  # cheap in a student's copy; the kit registers on collection
        _register_markers(config, _manifest(config))


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    try:
        relative = file_path.resolve().relative_to(parent.config.rootpath.resolve()).as_posix()
    except ValueError:
        return None
    lesson = LESSON.fullmatch(relative)
    if lesson is None:
        return None
    chapter = _manifest(parent.config).get(lesson.group(1))
    if chapter is None or chapter["lesson"] != relative:
        return None
    return LessonFile.from_parent(parent, path=file_path, chapter=lesson.group(1))


def _rows(text: str) -> tuple[dict[str, int], dict[str, int]]:
    """(line of each check's row in the lesson's table, line of each task's section), 0-based."""
    checks, tasks = {}, {}
    for number, line in enumerate(text.splitlines()):
        if row := re.match(r"\|\s*`(ch\d\d\.[\w.]+)`\s*\|", line):
            checks.setdefault(row.group(1), number)
        elif heading := re.match(r"#+ .*?\(`(\w+)`", line):
            tasks.setdefault(heading.group(1), number)
    return checks, tasks


class LessonFile(pytest.File):
    """A chapter's lesson: its public checks, by task."""

    def __init__(self, *, chapter: str, **kwargs):
        super().__init__(**kwargs)
        self.chapter = chapter

    def collect(self):
        manifest = _manifest(self.config)
        _register_markers(self.config, {self.chapter: manifest[self.chapter]})
        checks, tasks = _rows(self.path.read_text(encoding="utf-8", errors="replace"))
        for task, names in manifest[self.chapter]["tasks"]:
            yield TaskNode.from_parent(self, name=task, chapter=self.chapter, checks=names,
                                       line=tasks.get(task, 0), rows=checks)


class TaskNode(pytest.Class):
    """A task's public checks. A pytest.Class, so that a test panel nests the checks under
    their task as it nests methods under a class; it holds no Python class of the course."""

    def __init__(self, *, chapter: str, checks: list[str], line: int, rows: dict[str, int], **kwargs):
        super().__init__(**kwargs)
        self.chapter, self.check_names, self.line, self.rows = chapter, checks, line, rows

    def _getobj(self):
        return type(self.name, (), {"__module__": __name__})

    def collect(self):
        for name in self.check_names:
            full = f"ch{self.chapter}.{self.name}.{name}"
            yield CheckItem.from_parent(self, name=name, check=full, chapter=self.chapter, task=self.name,
                                        line=self.rows.get(full, self.line))

    def reportinfo(self):
        return self.path, self.line, self.name


# ------------------------------------------------------------------ running


class CheckItem(pytest.Item):
    """One public check. Its verdict comes from the session's one grading (Grading)."""

    def __init__(self, *, check: str, chapter: str, task: str, line: int, **kwargs):
        super().__init__(**kwargs)
        self.check, self.chapter, self.task, self.line = check, chapter, task, line
        self.status = ""
        self._failure: AssertionError | None = None
        self.add_marker(f"ch{chapter}")
        self.add_marker(task)

    def runtest(self) -> None:
        status, text = self.config.stash[_GRADING].verdict(self.session, self.check)
        self.status = status
        # For tools that read pytest's reports (JUnit XML): the check and check.py's word for it.
        self.user_properties += [("check", self.check), ("status", status)]
        if status != "passed":
            # An AssertionError, as a test's failure is: editors tell a failure from an
            # error by that name (VS Code's panel shows anything else as "errored").
            self._failure = AssertionError(text)
            raise self._failure

    def repr_failure(self, excinfo, style=None):
        if self._failure is not None and excinfo.value is self._failure:
            return str(self._failure)
        # Not a check's verdict: the grading itself broke. Said in a sentence, as check.py would.
        return f"the checks could not run: {type(excinfo.value).__name__}: {excinfo.value}; please report it"

    def reportinfo(self):
        return self.path, self.line, f"{self.task}::{self.name}"


class Grading:
    """The one grading of a session, for the chapters of the items it runs, made when the
    first item runs; every item reads its verdict from it."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.report = None
        self.crash: str | None = None
        self.chapters: list[str] = []

    def _package(self) -> str:
        given = self.config.getoption("hero_package") or self.config.getini("hero_package")
        return str((self.config.rootpath / given).resolve())

    def verdict(self, session: pytest.Session, check: str) -> tuple[str, str]:
        if self.report is None and self.crash is None:
            self.chapters = sorted({item.chapter for item in session.items if isinstance(item, CheckItem)})
            try:
                self.report, _ = grade_as_check(self._package(), self.chapters)
            except (Exception, SystemExit) as crash:  # noqa: BLE001 - said on every item, never a traceback
                self.crash = f"{type(crash).__name__}: {crash}"
        if self.crash is not None:
            return "error", f"the checks could not run: {self.crash}; please report it"
        if self.report.problem and not self.report.results:
            return "error", f"the checks did not run: {self.report.problem}"
        result = next((r for r in self.report.results if r.check.name == check), None)
        if result is None:
            return "error", (f"{check} is not among the checks this copy's grader ran: the list of checks "
                             f"(grader/checks/public_checks.json) and the checks themselves disagree")
        return ("failed (gated)" if result.gated and result.status == "failed" else result.status), failure_text(result)


def grade_as_check(package: str, chapters: list[str], console_file=None):
    """(report, exit code) of `python -m grader check PACKAGE --chapters ...`, run in this
    process through the very function that command runs (grader.run.session.check_package),
    so nothing here can drift from it. Its report is printed to `console_file` (thrown
    away when None)."""
    from rich.console import Console

    from grader.run.session import check_package

    console = Console(file=console_file) if console_file is not None else Console(file=io.StringIO(), width=100)
    return check_package(package, ",".join(chapters) if chapters else None, console)


def failure_text(result) -> str:
    """What check.py prints under a check that did not pass; for a task not started (one
    line for the whole task there), that it is not implemented, with the task's id."""
    from grader.checks import catalogue
    from grader.run.report import plain
    from grader.run.results import NOT_IMPLEMENTED

    check = result.check
    if result.status == NOT_IMPLEMENTED:
        task = catalogue.tasks().get(check.task)
        where = f"fill in {task.qualname} (hero_transformer/{task.module}.py)" if task else "fill it in"
        return f"not implemented: task {check.task} — {where}"
    text = plain(result.diagnosis or check.summary)
    if result.output:
        excerpt = plain(result.output).strip().splitlines()[-3:]
        text += "\nprinted: " + " | ".join(excerpt)[:300]
    return text


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    report = yield
    if isinstance(item, CheckItem) and call.when == "call":
        report.check_status = item.status
    return report


def pytest_report_teststatus(report, config):
    """check.py's status word under `pytest -v` and in the summary, where a check did not
    pass: "NOT IMPLEMENTED", "WAITING", "FAILED (GATED)", "FORBIDDEN", ... (still counted
    as failed)."""
    status = getattr(report, "check_status", "")
    if report.when != "call" or not report.failed or status in ("", "failed"):
        return None
    letter = {"not implemented": "N", "waiting": "W"}.get(status, "F")
    return "failed", letter, (status.upper(), {"yellow" if status in ("not implemented", "waiting") else "red": True})


def summary_lines(report) -> list[str]:
    """check.py's closing lines: the total, what waits on which part, and the hidden checks still to come."""
    from grader.run.report import hidden_line, plain, waiting_line

    lines = []
    if report.problem:
        lines.append(plain(report.problem))
    if report.results:
        passed = sum(r.status == "passed" for r in report.results)
        chapters = sorted({r.check.chapter for r in report.results})
        lines.append(f"Chapter{'s' * (len(chapters) > 1)} {', '.join(chapters)}: {report.score:g} / "
                     f"{report.max_score:g} points ({passed} of {len(report.results)} checks passed, "
                     f"graded in {report.elapsed:.1f} s)")
    lines += [line for line in (waiting_line(report), hidden_line(report)) if line]
    return lines


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    grading = config.stash.get(_GRADING, None)
    if grading is None or (grading.report is None and grading.crash is None):
        return
    terminalreporter.write_sep("-", "hero_transformer's public checks")
    if grading.crash is not None:
        terminalreporter.write_line(f"the checks could not run: {grading.crash}")
        return
    for line in summary_lines(grading.report):
        terminalreporter.write_line(line)


# ------------------------------------------------------------------ check.py --watch's run


def statuses(report) -> dict:
    return {"checks": {r.check.name: r.status for r in report.results},
            "score": report.score, "max_score": report.max_score}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.pytest_plugin",
                                     description="The public checks as `python -m grader check` prints them; "
                                                 "each check's status is also written to --statuses.")
    parser.add_argument("package", nargs="?", default="hero_transformer")
    parser.add_argument("--chapters")
    parser.add_argument("--statuses", required=True, help="a JSON file to write each check's status to")
    args = parser.parse_args(argv)
    chapters = [c for c in re.split(r"[,\s]+", args.chapters or "") if c]
    try:
        report, code = grade_as_check(args.package, chapters, console_file=sys.stdout)
        with whole():
            moment("statuses written")
            write_atomic(args.statuses, json.dumps(statuses(report)))
    except KeyboardInterrupt:
        return 130  # check.py --watch was stopped: it says so itself
    return code


if __name__ == "__main__":
    install()
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no wait at exit for a grading thread a Ctrl-C left on a worker's answer
