"""What a class run found, read from the records' verdicts (grader/run/verdicts.py): the
named mistakes by frequency with the students who made each, each task's right / wrong /
not started / could not run, each chapter's scores, who needs attention and why, and
look-alike pairs by student. summary.md and report.html are both drawn from `ClassView`;
the gradebook's note column takes its one-line causes (`attention_cause`)."""

from __future__ import annotations

import html
import statistics
from collections import Counter
from dataclasses import dataclass, field

from grader.checks import catalogue

# A task's state for one student, from its checks' verdicts.
RIGHT, WRONG, NOT_STARTED, COULD_NOT_RUN = "right", "wrong", "not started", "could not run"
TASK_STATES = (RIGHT, WRONG, NOT_STARTED, COULD_NOT_RUN)


def student_name(record: dict) -> str:
    names = [s.get("name") or s.get("login") or s.get("key", "") for s in record.get("students", [])]
    return ", ".join(n for n in names if n) or record["upload"]["label"]


def _verdicts(record: dict) -> list[dict]:
    return [c["verdict"] for c in record.get("checks", []) if c.get("verdict")]


def attention_cause(record: dict) -> str:
    """One line on why an upload needs a person's look, or "" when it does not: it did not
    load (file, line, error), it hung (the tasks), it could not be read, the grader could
    not run some of its checks, or a task passes its published inputs only."""
    if record["status"] != "graded":
        return record.get("problem") or record["status"]
    verdicts = _verdicts(record)
    loads = [v for v in verdicts if v["kind"] == "load_failed"]
    if loads:
        v = loads[0]
        where = " ".join(p for p in (v.get("file") or "", f"line {v['line']}" if v.get("line") else "") if p)
        error = v.get("error") or "an error"
        what = "is missing" if error == "missing" else f"raised {error}"
        return f"did not load: {where} {what}".replace("  ", " ") if where else f"did not load: {what}"
    imports = sorted({v["task"] for v in verdicts if v["kind"] == "timeout" and v.get("during") == "import"})
    if imports:
        return "did not load: importing the package took too long (code left at module level)"
    hung = sorted({v["task"] for v in verdicts if v["kind"] == "timeout"})
    if hung:
        return f"hung in {', '.join(hung)} (no answer within the time limit)"
    if any(v["kind"] == "runner_failed" for v in verdicts):
        return "some checks could not be run by the grader: run grade-class again"
    fitted = sorted({v["task"] for v in verdicts if v["kind"] == "public_only"})
    if fitted:  # a table of the published answers looks like this; so does code fitted to them
        return (f"passes the published inputs only in {', '.join(fitted)}: no hidden check, on inputs drawn for the "
                f"grading, gets an answer the code computed (the code may look the published answers up)")
    return ""


@dataclass
class Mistake:
    chapter: str
    task: str
    key: str  # a key of the task's MISTAKES; "" for a deviation no named mistake explains
    text: str
    students: list[str] = field(default_factory=list)


@dataclass
class ClassView:
    graded: int
    mistakes: list[Mistake]
    tasks: list[tuple[str, str, Counter]]  # (chapter, task, {state: students})
    chapters: list[tuple[str, float, list[float]]]  # (chapter, its points, graded uploads' scores)
    attention: list[tuple[str, str]]  # (student, cause)
    look_alikes: list[tuple[str, str, float, list[str]]]  # (first student, second student, alike, tasks)


def _mistake_text(task: str, key: str) -> str:
    """The mistake's sentence from the task's MISTAKES (a combination: each part's)."""
    texts = catalogue.mistake_texts().get(task, {})
    if key in texts:
        return texts[key]
    parts = [texts.get(part, part) for part in key.split("+")]
    return "; ".join(parts)


def task_state(verdicts: list[dict | None]) -> str:
    kinds = {(v or {}).get("kind", "") for v in verdicts}
    if kinds & {"load_failed", "runner_failed", "unanswered"}:
        return COULD_NOT_RUN
    if "not_implemented" in kinds:
        return NOT_STARTED
    if kinds <= {""}:
        return RIGHT
    return WRONG


def class_view(records: dict, students: list, of: dict, look_alike_pairs, max_of_chapter) -> ClassView:
    """`records`: every record by slug; `students`, `of`: the gradebook's students and the
    record standing for each (ClassResults); `look_alike_pairs`: similarity.look_alikes'
    (slug, slug, alike, tasks)."""
    graded = [r for r in records.values() if r["status"] == "graded"]
    chapter_of = {task: c.number for task, c in catalogue.chapter_of_task().items()}
    found: dict[tuple[str, str], Mistake] = {}
    states: dict[str, Counter] = {}
    for record in graded:
        who = student_name(record)
        by_task: dict[str, list] = {}
        for c in record.get("checks", []):
            by_task.setdefault(c["task"], []).append(c.get("verdict"))
        # A task with a named mistake is counted by it alone: its other failing checks
        # are most likely that mistake seen from elsewhere (one missing mask, one row).
        named_tasks = {v["task"] for v in _verdicts(record) if v["kind"] == "mistake"}
        for v in _verdicts(record):
            if v["kind"] == "mistake" or (v["kind"] == "deviation" and v["task"] not in named_tasks):
                key = (v["task"], v.get("mistake", ""))
                mistake = found.setdefault(key, Mistake(chapter_of.get(v["task"], ""), v["task"], key[1],
                                                        _mistake_text(*key) if key[1] else
                                                        "wrong in a way no named mistake explains"))
                if who not in mistake.students:
                    mistake.students.append(who)
        for task, verdicts in by_task.items():
            states.setdefault(task, Counter())[task_state(verdicts)] += 1
    for mistake in found.values():
        mistake.students.sort(key=str.casefold)  # the same page from one run or from merged shards
    # A named mistake first, then by how many made it; a deviation after its task's named ones.
    mistakes = sorted(found.values(), key=lambda m: (not m.key, -len(m.students), m.chapter, m.task, m.key))
    order = {task: i for i, task in enumerate(catalogue.tasks())}
    tasks = [(chapter_of.get(t, ""), t, states[t]) for t in sorted(states, key=lambda t: order.get(t, len(order)))]
    numbers = sorted({n for r in graded for n in r.get("chapters", {})})
    chapters = [(n, max_of_chapter(n), [r["chapters"][n]["score"] for r in graded if n in r["chapters"]])
                for n in numbers]
    attention = []
    for s in students:
        record = of.get(s.key)
        who = s.name or s.login or s.key
        if record is None:
            attention.append((who, "missing: nothing was uploaded"))
        elif cause := attention_cause(record):
            attention.append((who, cause))
    by_slug = {r["upload"]["slug"]: r for r in records.values()}

    def first_then_second(a: str, b: str) -> tuple[str, str]:
        ra, rb = by_slug[a], by_slug[b]
        later = (rb["upload"].get("attempt") or [0]) < (ra["upload"].get("attempt") or [0])
        ra, rb = (rb, ra) if later else (ra, rb)
        return (f"{student_name(ra)} (upload {_when(ra)})", f"{student_name(rb)} (upload {_when(rb)})")

    pairs = [(*first_then_second(a, b), score, list(t)) for a, b, score, t in look_alike_pairs
             if a in by_slug and b in by_slug]
    return ClassView(len(graded), mistakes, tasks, chapters, attention, pairs)


def _when(record: dict) -> str:
    attempt = record["upload"].get("attempt") or []
    label = record["upload"]["label"]
    return f"#{attempt[0]}, {label}" if attempt and attempt[0] < 10**12 else label


# ------------------------------------------------------------------ pictures


def strip_plot(view: ClassView) -> str:
    """Each chapter's scores as dots on a line from 0 to its points, with the median marked:
    an SVG of its own, so the page needs nothing fetched."""
    rows = view.chapters
    width, left, right, row = 560, 60, 20, 34
    height = 30 + row * max(1, len(rows))
    span = width - left - right
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
             f'height="{height}" role="img" aria-label="scores per chapter">',
             f'<text x="{left}" y="14" font-size="11" fill="#555">0</text>',
             f'<text x="{width - right}" y="14" font-size="11" fill="#555" text-anchor="end">all points</text>']
    for i, (number, points, scores) in enumerate(rows):
        y = 30 + i * row + row / 2
        parts.append(f'<text x="{left - 8}" y="{y + 4}" font-size="12" text-anchor="end">ch{number}</text>')
        parts.append(f'<line x1="{left}" y1="{y}" x2="{left + span}" y2="{y}" stroke="#ccc"/>')
        seen: Counter = Counter()
        for score in scores:
            x = left + span * (score / points if points else 0)
            offset = (seen[round(x)] % 5 - 2) * 4  # equal scores stand side by side, not on top
            seen[round(x)] += 1
            parts.append(f'<circle class="score" cx="{x:.1f}" cy="{y + offset:.1f}" r="3.5" fill="#4c72b0" '
                         f'fill-opacity="0.75"><title>{score:g} / {points:g}</title></circle>')
        if scores:
            x = left + span * (statistics.median(scores) / points if points else 0)
            parts.append(f'<line class="median" x1="{x:.1f}" y1="{y - 10}" x2="{x:.1f}" y2="{y + 10}" '
                         f'stroke="#c44e52" stroke-width="2"/>')
    parts.append("</svg>")
    return "\n".join(parts)


# ------------------------------------------------------------------ words


def _listed(names: list[str], most: int = 12) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def summary_sections(view: ClassView, md) -> list[str]:
    """summary.md's sections on what the class got wrong (`md` escapes Markdown)."""
    lines = ["## Needs attention", ""]
    if view.attention:
        lines += ["| student | why |", "| --- | --- |"]
        lines += [f"| {md(who)} | {md(cause)} |" for who, cause in view.attention]
    else:
        lines.append("Nobody: every student on the list uploaded, and every upload loaded and ran.")
    lines += ["", "## Mistakes, most made first", ""]
    if view.mistakes:
        lines += ["| ch | task | mistake | students |", "| --- | --- | --- | --- |"]
        for m in view.mistakes:
            lines.append(f"| {m.chapter} | {md(m.task)} | {md(m.text)} | {len(m.students)}: "
                         f"{md(_listed(m.students))} |")
    else:
        lines.append("No mistake: every graded check passed or waited on another part.")
    lines += ["", "## Tasks", "", f"Of {view.graded} graded uploads:", "",
              "| ch | task | right | wrong | not started | could not run |", "| --- | --- | ---: | ---: | ---: | ---: |"]
    lines += [f"| {ch} | {md(task)} | " + " | ".join(str(states[s]) for s in TASK_STATES) + " |"
              for ch, task, states in view.tasks]
    lines.append("")
    return lines


def report_html(view: ClassView, title: str, stamp: str) -> str:
    """report.html: one page, opened from disk, nothing fetched."""
    e = html.escape
    parts = [f"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{e(title)}</title>",
             "<style>", _STYLE, "</style></head><body>", f"<h1>{e(title)}</h1>",
             f"<p class=\"stamp\">{view.graded} uploads graded; {e(stamp)}</p>",
             "<h2>Needs attention</h2>"]
    if view.attention:
        parts.append("<table id=\"attention\"><tr><th>student</th><th>why</th></tr>")
        parts += [f"<tr><td>{e(who)}</td><td>{e(cause)}</td></tr>" for who, cause in view.attention]
        parts.append("</table>")
    else:
        parts.append("<p>Nobody.</p>")
    parts.append("<h2>Mistakes, most made first</h2>")
    if view.mistakes:
        parts.append("<table id=\"mistakes\"><tr><th>ch</th><th>task</th><th>mistake</th><th class=\"n\">how many</th>"
                     "<th>students</th></tr>")
        for m in view.mistakes:
            css = "named" if m.key else "deviation"
            parts.append(f"<tr class=\"{css}\"><td class=\"key\">{m.chapter}</td><td class=\"key\">{e(m.task)}</td>"
                         f"<td>{e(m.text)}</td>"
                         f"<td class=\"n\">{len(m.students)}</td><td>{e(', '.join(m.students))}</td></tr>")
        parts.append("</table>")
    else:
        parts.append("<p>No mistake: every graded check passed.</p>")
    parts.append("<h2>Scores per chapter</h2>")
    parts.append("<p>Graded uploads only; the red mark is the median.</p>")
    parts.append(strip_plot(view))
    parts.append("<table id=\"chapters\"><tr><th>ch</th><th class=\"n\">mean</th><th class=\"n\">median</th>"
                 "<th class=\"n\">of</th></tr>")
    for number, points, scores in view.chapters:
        mean = f"{statistics.fmean(scores):.1f}" if scores else "–"
        median = f"{statistics.median(scores):g}" if scores else "–"
        parts.append(f"<tr><td>{number}</td><td class=\"n\">{mean}</td><td class=\"n\">{median}</td>"
                     f"<td class=\"n\">{points:g}</td></tr>")
    parts.append("</table><h2>Tasks</h2><table id=\"tasks\"><tr><th>ch</th><th>task</th>"
                 + "".join(f"<th class=\"n\">{s}</th>" for s in TASK_STATES) + "</tr>")
    for ch, task, states in view.tasks:
        cells = "".join(f"<td class=\"n {s.replace(' ', '-')}\">{states[s] or ''}</td>" for s in TASK_STATES)
        parts.append(f"<tr><td class=\"key\">{ch}</td><td class=\"key\">{e(task)}</td>{cells}</tr>")
    parts.append("</table><h2>Look-alike pairs</h2>")
    if view.look_alikes:
        parts.append("<p>For a person to look at, not a verdict. The earlier upload first.</p>"
                     "<table id=\"pairs\"><tr><th>first</th><th>then</th><th>alike</th><th>tasks</th></tr>")
        parts += [f"<tr><td>{e(a)}</td><td>{e(b)}</td><td class=\"n\">{score:.0%}</td><td>{e(', '.join(t))}</td></tr>"
                  for a, b, score, t in view.look_alikes]
        parts.append("</table>")
    else:
        parts.append("<p>No pair stands out.</p>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 64em; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: .5em 0 1.5em; width: 100%; table-layout: auto; }
th, td { text-align: left; padding: .3em .6em; border-bottom: 1px solid #ddd; vertical-align: top;
         overflow-wrap: break-word; }
th { background: #f3f3f3; }
td.key { white-space: nowrap; }
th.n { text-align: right; }
#pairs td, #attention td { overflow-wrap: anywhere; }  /* file names: break anywhere, never widen the page */
td.n { text-align: right; white-space: nowrap; }
tr.deviation td { color: #666; }
#attention td:first-child { font-weight: 600; }
td.right { color: #2a7d2a; } td.wrong { color: #b02a2a; } td.not-started { color: #8a6d00; }
td.could-not-run { color: #6a3d9a; }
.stamp { color: #666; font-size: .9em; }
svg { max-width: 100%; height: auto; }
"""
