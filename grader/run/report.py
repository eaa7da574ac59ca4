"""How a grading run is shown: a rich terminal report and Gradescope's results.json."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from rich.console import Console, Group
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from grader.checks import catalogue
from grader.console import safe_console
from grader.files import write_atomic
from grader.run.results import LOAD_FAILED, PASSED, WAITING, GradeReport
from grader.run.dependencies import parts_used
from grader.run.stamp import stamp
from grader.run.visible import plain, visible_check, visible_verdict  # plain: the report's callers read it here too

STYLE = {"passed": "green", "failed": "red", "error": "magenta", "timeout": "magenta",
         "not implemented": "yellow", "forbidden": "red bold", "waiting": "cyan"}

# Markdown that could turn student text into emphasis, links, HTML, headings or tables.
_MARKDOWN = re.compile(r"([\\`*_\[\]<>#|~])")
_LINE_START = re.compile(r"^(\s*)([-+=])", re.MULTILINE)




def markdown_text(text) -> str:
    """plain(text) with markdown's syntax escaped: it renders as the characters it holds."""
    return _LINE_START.sub(r"\1\\\2", _MARKDOWN.sub(r"\\\1", plain(text)))


def code_block(text) -> list[str]:
    """plain(text) as a fenced code block whose fence is longer than any run of backticks
    inside, so the text cannot close it and write markdown of its own after it. Each line
    is also indented by two spaces: read as plain text (or by a renderer that ignores
    the fence's length) no line of it can pass for one of the grader's own lines."""
    text = plain(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, *("  " + line for line in text.splitlines()), fence]


def _chapter_titles() -> dict[str, str]:
    return {c.number: c.title for c in catalogue.chapters()}


def _by_chapter(report: GradeReport):
    grouped = defaultdict(list)
    for result in report.results:
        grouped[result.check.chapter].append(result)
    return dict(sorted(grouped.items()))


def _row(check_text: Text, points: str, status: Text) -> Table:
    """One line of a chapter: the check, its points, its status, in columns every row shares."""
    row = Table.grid(expand=True, padding=(0, 1))
    row.add_column("check", ratio=1, overflow="fold")
    row.add_column("points", justify="right", width=7, no_wrap=True)
    row.add_column("status", width=15, no_wrap=True)
    row.add_row(check_text, points, status)
    return row


def _note(text: Text) -> Padding:
    """A diagnosis under its check row, across the whole width of the terminal."""
    return Padding(text, (0, 0, 0, 4))


def _stood_in(chapter: str, results) -> set[str]:
    own = {r.check.task for r in results}
    stood_in = {t for r in results for t in r.certified} - own
    used = parts_used(chapter)
    return stood_in & used if used is not None else stood_in


def certified_line(chapter: str, results) -> str | None:
    """The certified parts that stood in while this chapter's checks ran: only the ones
    its checks use, not every task but the graded one."""
    stood_in = _stood_in(chapter, results)
    if not stood_in:
        return None
    return f"certified parts used by this chapter's checks: {', '.join(sorted(map(str, stood_in)))}"


def render(report: GradeReport, console: Console | None = None) -> None:
    console = safe_console(console or Console())
    if report.problem:
        console.print(Panel(Text(plain(report.problem)), title="[red]The submission could not be graded", border_style="red"))
    stopped = _stopped_by(report)
    if stopped:
        console.print(Panel(Text(plain(stopped)), title="[red]Fix this first", border_style="red"))
    titles = _chapter_titles()
    for chapter, results in _by_chapter(report).items():
        console.print(Group(*_chapter_lines(chapter, titles.get(chapter, ''), results, stopped)))
        if line := certified_line(chapter, results):
            console.print(Padding(Text(plain(line), style="dim"), (0, 0, 0, 2)))
        console.print()
    console.print(_summary(report))


def _chapter_lines(chapter: str, title: str, results, said_above: str | None) -> list:
    """A chapter's heading, a row per check (one per task not started yet) with the
    diagnosis under each check that did not pass, and its total. `said_above`: the
    sentence the panel on top gave, if any."""
    lines = [Text(f"Chapter {chapter} — {title}", style="bold"),
             _row(Text("check", style="bold"), Text("points", style="bold"), Text("status", style="bold"))]
    collapsed = set()
    for result in results:
        check = result.check
        same_task = [r for r in results if r.check.task == check.task]
        if all(r.status == "not implemented" for r in same_task):
            # A task not started yet is one line, not one line per check.
            if check.task not in collapsed:
                collapsed.add(check.task)
                lines.append(_not_started_row(check.task, same_task))
            continue
        label = Text(check.name.split(".", 1)[1])
        if check.hidden:
            label.append("  (hidden)", style="dim")
        # A gated check (its property held, its task's value check did not pass) says so.
        shown_status = f"{result.status} (gated)" if result.gated else result.status
        lines.append(_row(label, f"{result.score:g}/{check.points:g}",
                          Text(shown_status, style=STYLE.get(result.status, ""))))
        if result.status != PASSED:
            note, said_above = _diagnosis(result, said_above)
            lines.append(note)
    earned = sum(r.score for r in results)
    possible = sum(r.check.points for r in results)
    lines.append(_row(Text("chapter total", style="bold"), f"{earned:g}/{possible:g}", Text("")))
    return lines


def _not_started_row(task: str, results) -> Table:
    """The one row of a task whose checks all found it not implemented."""
    qualname = catalogue.tasks()[task].qualname if task in catalogue.tasks() else task
    possible = sum(r.check.points for r in results)
    checks = "1 check" if len(results) == 1 else f"{len(results)} checks"
    return _row(Text(f"{task} ({checks}): fill in {qualname}", style="dim"),
                f"0/{possible:g}", Text("not implemented", style=STYLE["not implemented"]))


def _diagnosis(result, said_above: str | None) -> tuple[Padding, str]:
    """(the note under a check that did not pass, the sentence it stands for): "as above"
    where the row above (or the panel on top) already said it, and the last lines the
    code printed."""
    seen = visible_check(result)  # what every platform shows of it
    said = seen.note
    shown = "as above" if said == said_above else said
    note = Text("↳ " + plain(shown),
                style="dim" if result.status in ("not implemented", WAITING) or shown == "as above" else "")
    if seen.output:
        excerpt = seen.output.strip().splitlines()[-3:]
        note.append("\nprinted: " + " | ".join(excerpt)[:300], style="dim")
    return _note(note), said


def _summary(report: GradeReport) -> Panel:
    """The total, what waits and what is hidden, the certified parts and where it ran."""
    failed = sum(1 for r in report.results if r.status != PASSED)
    summary = Text()
    if report.submission:
        summary.append(plain(f"Submission: {report.submission}") + "\n", style="dim")
    summary.append(f"Total: {report.score:g} / {report.max_score:g} points", style="bold")
    summary.append(f"   ({len(report.results) - failed} of {len(report.results)} checks passed, {report.elapsed:.1f} s)\n")
    if line := waiting_line(report):
        summary.append(line + "\n", style="cyan")
    if line := hidden_line(report):
        summary.append(line + "\n")
    summary.append(plain(f"Certified parts: {report.certified}") + "\n", style="dim")
    summary.append(f"Ran in: {report.sandbox}", style="dim")
    return Panel(summary, border_style="green" if failed == 0 and report.results else "yellow")


def _stopped_by(report: GradeReport) -> str | None:
    """The one reason every check failed for, where a single cause stopped them all (a
    forbidden module, say): said once, on top, instead of under each check."""
    reasons = {r.diagnosis for r in report.results}
    if len(report.results) > 1 and len(reasons) == 1 and all(r.status == "forbidden" for r in report.results):
        return next(iter(reasons))
    # A package that does not import is one finding, however many checks it stopped.
    unloaded = {r.diagnosis for r in report.results if r.cause == LOAD_FAILED}
    if len(unloaded) == 1:
        return next(iter(unloaded))
    return None


def waiting_line(report: GradeReport) -> str | None:
    """What waits on which part, and the part to fix first: "10 points wait on layer_norm"."""
    waiting: dict[str, float] = {}
    for result in report.results:
        if result.status == WAITING and result.waiting_on:
            waiting[result.waiting_on[0]] = waiting.get(result.waiting_on[0], 0.0) + result.check.points
    if not waiting:
        return None
    chapter = {task: c.number for task, c in catalogue.chapter_of_task().items()}
    shown = {r.check.chapter for r in report.results}

    def named(task: str) -> str:
        return task if chapter.get(task) in shown | {None} else f"{task} (chapter {chapter[task]})"

    said = "; ".join(f"{points:g} point{'' if points == 1 else 's'} wait{'s' * (points == 1)} on {named(task)}"
                     for task, points in waiting.items())
    return f"{said}: fix {'it' if len(waiting) == 1 else 'those'} first; what waits is judged again on the next run."


def hidden_line(report: GradeReport) -> str | None:
    """For a run of the public checks only: the hidden checks of the chapters checked
    that grading will add, from the catalogue (or the release's counts of them)."""
    if not report.results or any(r.check.hidden for r in report.results):
        return None
    counts = catalogue.hidden_counts()
    chapters = {r.check.chapter for r in report.results}
    checks = sum(counts[c]["checks"] for c in chapters if c in counts)
    points = sum(counts[c]["points"] for c in chapters if c in counts)
    if not checks:
        return None
    what = "1 hidden check worth" if checks == 1 else f"{checks} hidden checks worth"
    return (f"Still to come: {what} {points:g} point{'' if points == 1 else 's'} run when your course grades "
            f"this (random inputs, compared with the course's reference); the total above counts the public "
            f"checks only.")


def _test_output(result) -> str:
    """Markdown: the status line first, then the diagnosis as escaped text and what the
    code printed in a fence it cannot close, so no part of it can pass for a status line."""
    seen = visible_check(result)  # a hidden check: no summary, no output, no value in the diagnosis
    lines = [f"**{seen.status}**" + (f" — {seen.summary}" if seen.summary else "")]
    if seen.diagnosis:
        lines.append("")
        lines.append(markdown_text(seen.diagnosis))
    if seen.output and seen.status != PASSED:
        lines += ["", "Your code printed (excerpt):", *code_block(seen.output.strip()[-800:])]
    return "\n".join(lines)


def results_json(report: GradeReport, seed: int | None = None) -> dict:
    """Gradescope's results.json: score, execution_time, output, tests, extra_data. Its
    stamp (grader/run/stamp.py: kit, check table, torch, Python, `seed`) goes under
    extra_data, the one key of Gradescope's format that holds data of one's own, and at
    the top of the staff companion."""
    found = stamp(seed)
    tests = []
    for number, result in enumerate(report.results, start=1):
        check = result.check
        tests.append({
            "name": check.name,
            "number": str(number),
            "score": result.score,
            "max_score": check.points,
            "status": "passed" if result.status == PASSED else "failed",
            "output": _test_output(result),
            "output_format": "md",
            "visibility": "after_published" if check.hidden else "visible",
            "tags": [f"ch{check.chapter}", check.task, "hidden" if check.hidden else "public", result.status,
                     *(["gated"] if result.gated else []), *(f"waiting on {t}" for t in result.waiting_on)],
            # What the check found, as data (grader/run/verdicts.py): the class report reads it.
            "extra_data": {"verdict": visible_verdict(result.verdict, check.hidden)},
        })
    chapters = {}
    for chapter, results in _by_chapter(report).items():
        chapters[chapter] = {"score": sum(r.score for r in results),
                             "max_score": sum(r.check.points for r in results),
                             "passed": sum(r.status == PASSED for r in results), "checks": len(results),
                             "waiting": sum(r.status == WAITING for r in results),
                             "certified": sorted(_stood_in(chapter, results))}
    # Students see this at once, before grades are published: it must not give away the
    # hidden checks, so it counts the public ones only ("score" is the true total, and
    # Gradescope holds it back until publication).
    public = [r for r in report.results if not r.check.hidden]
    output = [f"Public checks: {sum(r.score for r in public):g} / {sum(r.check.points for r in public):g} points."]
    if line := waiting_line(report):
        output.append(line)
    if len(public) < len(report.results):
        output.append("Hidden checks are shown when grades are published.")
    if report.problem:
        output.insert(0, markdown_text(report.problem))
    results = _Results({
        "score": report.score,
        "execution_time": round(report.elapsed, 3),
        "output": "\n".join(output),
        "output_format": "md",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {"chapters": chapters, "max_score": report.max_score, "sandbox": report.sandbox,
                       "certified": report.certified, "submission": plain(report.submission),
                       "stamp": found},
    })
    results.staff = staff_json(report, found)
    return results


class _Results(dict):
    """results.json, carrying its staff-only companion (see staff_json) outside the dict:
    json.dump never writes it into the student's file, and every caller of write_json
    (grade --json, grade-class --json-dir) writes the companion beside it unasked."""

    staff: dict | None = None


def staff_json(report: GradeReport, found: dict | None = None) -> dict:
    """For course staff only, never shown to the student: every check with what the
    student's code said (exception messages, reprs, the line its traceback named) and
    what it printed, which the student-facing report leaves out wherever the code ran
    beside certified parts it could have copied from."""
    return {
        "submission": plain(report.submission),
        "score": report.score,
        "max_score": report.max_score,
        "problem": report.problem,
        "checks": [{"name": r.check.name, "status": r.status, "hidden": r.check.hidden,
                    "waiting_on": list(r.waiting_on),
                    "diagnosis": r.diagnosis, "staff_diagnosis": r.staff_diagnosis or r.diagnosis,
                    "output": r.staff_output or r.output, "certified": list(r.certified)}
                   for r in report.results],
        "stamp": found if found is not None else stamp(None),
    }


def staff_path(path: str | Path) -> Path:
    """Where the staff companion of a results file goes: results.json -> results.staff.json."""
    path = Path(path)
    return path.with_name(f"{path.stem}.staff.json")


def write_json(data: dict, path: str | Path) -> None:
    """Write atomically, so a reader never sees half a file; results_json's staff
    companion goes beside it (staff_path)."""
    staff = getattr(data, "staff", None)
    if staff is not None:
        _write_one(staff, staff_path(path))
    _write_one(data, Path(path))


def _write_one(data: dict, path: Path) -> None:
    write_atomic(path, json.dumps(data, indent=2))
