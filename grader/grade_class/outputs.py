"""Everything grade-class writes besides the per-upload results, built from those
results (and the run's class.json, when there is one) alone: so a single run, a rerun
and a merge of shards all write the same files.

    gradebook.csv          every student: total, maximum, one column per chapter, status, note
    canvas.csv | moodle.csv | gradebook.db (nbgrader)   as --format asks
    entries.csv            every entry of the input and what became of it
    feedback/NAME.md|.html what each student may see of their grading
    summary.md, report.html, histogram.png, scores.svg   for course staff (naming the stamp graded
                           under): the mistakes by frequency, each task's states, each chapter's
                           scores, who needs attention and why, look-alike pairs (class_report.py)
    regrade.csv            where earlier grades were replaced by a regrade under another stamp:
                           every student's old and new score and the checks whose outcome changed

No cell of any CSV starts a formula; names are escaped wherever they are shown.
"""

from __future__ import annotations

import html
import io
import json
import re
import statistics
import textwrap
from collections import Counter
from pathlib import Path

from grader.checks import catalogue
from grader.grade_class.class_report import (ClassView, attention_cause, class_view, report_html, strip_plot,
                                             summary_sections)
from grader.grade_class.uploads import InputError, Student, shown, slug, student_from
from grader.files import read_json, write_atomic, write_json
from grader.grade_class.lms_gradebooks import FORMATS, INCOMPLETE, chapter_max, csv_text, number, write_lms_gradebook
from grader.grade_class.records import STATE, needs_grading, read_records, record_path, replaced
from grader.run.report import code_block, markdown_text, staff_path
from grader.run.stamp import describe
from grader.run.visible import visible_fields



def _write(path: Path, text: str | bytes) -> None:
    write_atomic(path, text)


# ------------------------------------------------------------------ gathering


class ClassResults:
    """The states and records of one or more runs, joined."""

    def __init__(self, folders: list[Path], options: dict | None):

        self.states = [s for s in (read_json(Path(f) / STATE) for f in folders) if s]
        records: dict[str, dict] = {}
        for folder in folders:
            records.update(read_records(Path(folder)))
        kits = {(s.get("kit"), (s.get("stamp") or {}).get("id"), json.dumps(s.get("settings"), sort_keys=True))
                for s in self.states}
        if len(kits) > 1:
            raise InputError("these folders were graded with different kit versions, stamps (torch, Python, "
                             "--seed) or settings (--chapters, --public-only); grade every shard with the same kit, "
                             "the same --seed and the same flags, then merge")
        if self.states:
            kit, settings = self.states[0]["kit"], self.states[0]["settings"]
            self.stamp = self.states[0].get("stamp")
            planned = {slug for s in self.states for slug in s.get("uploads", [])}
            self.records = {k: r for k, r in records.items() if k in planned and r.get("kit") == kit
                            and r.get("settings") == settings
                            and (self.stamp is None or (r.get("stamp") or {}).get("id") == self.stamp.get("id"))}
        else:
            settings = next(iter(records.values()))["settings"] if records else {"chapters": None,
                                                                                 "public_only": False}
            self.stamp = next(iter(records.values())).get("stamp") if records else None
            self.records = records
        self.settings = settings
        self._earlier(folders)
        self.options = {"format": "csv", "assignment": "hero_transformer", "assignment_id": "", "columns": "total",
                        "roster_columns": []}
        for state in self.states:
            self.options.update({k: v for k, v in (state.get("options") or {}).items() if v not in (None, "", [])})
        self.options.update({k: v for k, v in (options or {}).items() if v not in (None, "", [])})
        if self.options["format"] not in FORMATS:
            raise InputError(f"--format {self.options['format']!r}: choose one of {', '.join(FORMATS)}")
        chapters = settings.get("chapters")
        self.numbers = [c.number for c in catalogue.chapters() if not chapters or c.number in chapters]
        self.lms = next((s.get("lms") for s in self.states), "plain")
        self._students()
        self._entries()

    def _earlier(self, folders: list[Path]):
        """The grades this run's stamp replaced (kept in previous/), by upload, the latest
        archive last; and the stamps they were graded under."""
        self.earlier: dict[str, dict] = {}
        self.earlier_stamps: list[dict | None] = []
        self.earlier_folders: list[str] = []
        for folder in folders:
            for info, records in replaced(Path(folder), (self.stamp or {}).get("id")):
                if info.get("stamp") not in self.earlier_stamps:
                    self.earlier_stamps.append(info.get("stamp"))
                if info["folder"] not in self.earlier_folders:
                    self.earlier_folders.append(info["folder"])
                self.earlier.update(records)

    def _students(self):
        on_roster = any(s.get("roster") for s in self.states)
        students: dict[str, Student] = {}
        for state in self.states:
            for data in state.get("students", []):
                students.setdefault(data["key"], student_from(data))
        self.of: dict[str, dict] = {}
        for record in sorted(self.records.values(), key=lambda r: (r["upload"].get("attempt", []), r["upload"]["slug"])):
            for data in record["students"]:
                if not on_roster:
                    students.setdefault(data["key"], student_from(data))
                self.of[data["key"]] = record  # the latest attempt last
        order = list(students.values())
        if not on_roster:
            order.sort(key=lambda s: (shown(s.name).casefold(), s.key))
        self.students = order
        self.file_names = {}
        taken = set()
        for s in order:
            name = s.short if re.fullmatch(r"[A-Za-z0-9._-]{1,64}", s.short) else slug(s.key)
            if name.casefold() in taken:
                name = slug(s.key)
            taken.add(name.casefold())
            self.file_names[s.key] = name

    def _entries(self):
        entries: dict[str, dict] = {}
        for state in self.states:
            for entry in state.get("entries", []):
                known = entries.get(entry["name"])
                if known is None or known["status"] == "other shard":
                    entries[entry["name"]] = dict(entry)
        if not self.states:
            for record in self.records.values():
                for name in record["upload"]["entries"]:
                    entries[name] = {"name": name, "status": "to grade", "upload": record["upload"]["slug"],
                                     "student": ", ".join(s.get("name", "") for s in record["students"]), "note": ""}
        for entry in entries.values():
            if entry["status"] == "to grade":
                record = self.records.get(entry["upload"])
                if record is None:
                    entry["status"], entry["note"] = "not graded yet", "the run stopped first: rerun it to resume"
                else:
                    entry["status"], entry["note"] = record["status"], record.get("problem", "")
        self.entries = [entries[name] for name in sorted(entries)]

    def max_score(self) -> float:
        from grader.run.schedule import possible_points

        return possible_points(self.settings.get("chapters"), self.settings.get("public_only", False))


# --------------------------------------------------------------------- writers


def build(folders: list[Path], out: Path, options: dict | None = None) -> list[dict]:

    data = ClassResults([Path(f) for f in folders], options)
    out = Path(out)
    if len(folders) > 1 or Path(folders[0]).resolve() != out.resolve():
        merged = dict(data.states[0]) if data.states else {}
        merged.update({"entries": data.entries, "uploads": sorted(data.records), "shard": None,
                       "options": data.options, "students": [vars(s) for s in data.students]})
        if data.states:
            write_json(out / STATE, merged)
    rows = plain_rows(data)
    header = ["student", "id", "email", "total", "max", *[f"ch{n}" for n in data.numbers], "status", "late",
              "attempts", "upload", "note"]
    _write(out / "gradebook.csv", csv_text(header, [[row[h] for h in header] for row in rows]))
    _write(out / "entries.csv", csv_text(["entry", "status", "student", "upload", "note"],
                                     [[e["name"], e["status"], e["student"], e["upload"], e["note"]]
                                      for e in data.entries]))
    write_lms_gradebook(data.options["format"], data, out)
    write_feedback(data, out / "feedback")
    write_regrade(data, out)
    write_summary(data, out)
    return rows


# --------------------------------------------------------------------- regrade

REGRADE_HEADER = ["student", "id", "old_score", "new_score", "old_max", "new_max", "changed_checks", "old_upload",
                  "new_upload", "note"]


def _latest_by_student(records) -> dict[str, dict]:
    of = {}
    for record in sorted(records, key=lambda r: (r["upload"].get("attempt", []), r["upload"]["slug"])):
        for student in record["students"]:
            of[student["key"]] = record
    return of


def changed_checks(old: dict, new: dict) -> list[str]:
    """`name: old status -> new status` for every check whose outcome differs (a check
    graded on one side only is `not graded` on the other), in the catalogue's order."""
    before = {c["name"]: c["status"] for c in old.get("checks", [])}
    after = {c["name"]: c["status"] for c in new.get("checks", [])}
    order = [c.name for c in catalogue.all_checks()]
    names = sorted(set(before) | set(after), key=lambda n: (order.index(n) if n in order else len(order), n))
    return [f"{n}: {before.get(n, 'not graded')} -> {after.get(n, 'not graded')}" for n in names
            if before.get(n) != after.get(n)]


def regrade_rows(data: ClassResults) -> list[dict]:
    """One row per student whose earlier grade a regrade replaced (or is about to)."""
    old_of = _latest_by_student(data.earlier.values())
    rows = []
    for s in data.students:
        old = old_of.get(s.key)
        if old is None:
            continue
        new = data.of.get(s.key)
        note = ""
        if new is None:
            note = "not regraded yet: the run stopped first, or the upload is no longer in the input"
        elif new.get("hash") != old.get("hash"):
            note = "a different upload was graded this time"
        rows.append({"student": s.name or s.login or s.key, "id": s.id or s.sis_user_id or s.identifier,
                     "old_score": number(old["score"]), "new_score": number(new["score"]) if new else "",
                     "old_max": number(old["max_score"]), "new_max": number(new["max_score"]) if new else "",
                     "changed_checks": "; ".join(changed_checks(old, new)) if new else "",
                     "old_upload": old["upload"]["label"], "new_upload": new["upload"]["label"] if new else "",
                     "note": note})
    return rows


def write_regrade(data: ClassResults, out: Path) -> None:
    """regrade.csv where this run's stamp replaced earlier grades; otherwise none (an old
    one belongs to an earlier comparison, whose archive keeps its own copy)."""
    path = out / "regrade.csv"
    if not data.earlier:
        path.unlink(missing_ok=True)
        return
    rows = regrade_rows(data)
    _write(path, csv_text(REGRADE_HEADER, [[row[h] for h in REGRADE_HEADER] for row in rows]))


def plain_rows(data: ClassResults) -> list[dict]:
    rows = []
    for s in data.students:
        record = data.of.get(s.key)
        row = {"student": s.name or s.login or s.key, "id": s.id or s.sis_user_id or s.identifier, "email": s.email,
               "max": number(data.max_score()), "status": "no upload", "late": "", "attempts": "", "upload": "",
               "total": "", "note": "nothing was uploaded"}
        for n in data.numbers:
            row[f"ch{n}"] = ""
        if record is not None:
            upload = record["upload"]
            incomplete = needs_grading(record)
            note = record["problem"] or (INCOMPLETE.format(record["infrastructure"]) if incomplete
                                         else attention_cause(record))
            row.update({"total": "" if incomplete else number(record["score"]),
                        "status": "incomplete" if incomplete else record["status"], "note": note,
                        "late": "late" if upload.get("late") else "", "attempts": upload.get("attempts", 1),
                        "upload": upload["label"]})
            for n in data.numbers:
                row[f"ch{n}"] = number(record["chapters"].get(n, {}).get("score", 0))
        rows.append(row)
    return rows


# -------------------------------------------------------------------- feedback


def feedback_markdown(student: Student, record: dict, assignment: str) -> str:
    """What the student may see: each check as grader.run.visible shows it on every
    platform (a hidden check by name, points, status and a diagnosis with no value in
    it), never what only staff may read."""
    titles = {c.number: c.title for c in catalogue.chapters()}
    upload = record["upload"]
    lines = [f"# {markdown_text(assignment)}: your grading", "",
             f"Student: {markdown_text(student.name or student.login)}  ",
             f"Upload: {markdown_text(upload['label'])}" + (" (late)" if upload.get("late") else "") + "  ",
             f"**Total: {number(record['score'])} / {number(record['max_score'])} points**", ""]
    if upload.get("attempts", 1) > 1:
        lines += [f"You uploaded {upload['attempts']} attempts; the latest was graded.", ""]
    if record["problem"]:
        lines += ["The upload could not be graded:", "", markdown_text(record["problem"]), ""]
    if first := fix_first(record):
        lines += ["## Fix first", "", *(f"- {markdown_text(line)}" for line in first), ""]
    for number_, chapter in sorted(record["chapters"].items()):
        checks = [c for c in record["checks"] if c["chapter"] == number_]
        if not checks:
            continue
        lines += [f"## Chapter {number_}: {markdown_text(titles.get(number_, ''))} "
                  f"({number(chapter['score'])} / {number(chapter['max_score'])})", "",
                  "| check | points | status |", "| --- | ---: | --- |"]
        notes, loads = [], set()
        for c in checks:
            seen = visible_fields(c["name"], c["hidden"], c["status"], c["score"], c["max_score"], c["diagnosis"],
                                  c["summary"], c.get("output", ""), verdict=c.get("verdict"))
            label = markdown_text(seen.name.split(".", 1)[-1]) + (" (hidden)" if seen.hidden else "")
            lines.append(f"| {label} | {number(seen.score)}/{number(seen.points)} | {seen.status} |")
            unloaded = (c.get("verdict") or {}).get("kind") == "load_failed"
            if seen.status != "passed" and unloaded and seen.note in loads:
                continue  # a package that did not load: said once, at its first check
            if unloaded:
                loads.add(seen.note)
            if seen.status != "passed":
                notes.append(f"- **{label}**: {markdown_text(seen.note or seen.status)}")
                if seen.output:
                    notes += ["", "  Your code printed:", "", *("  " + line for line in code_block(seen.output[-800:]))]
        lines.append("")
        if notes:
            lines += ["What to fix:", "", *notes, ""]
    return "\n".join(lines) + "\n"


def fix_first(record: dict) -> list[str]:
    """Per chapter, the one thing to fix first, from the checks' verdicts: the package's
    load failure (once, not once per check), else the first named mistake, else the first
    check that failed, else the first task not started."""
    from grader.grade_class.class_report import attention_cause

    said, lines = set(), []
    texts = catalogue.mistake_texts()
    for number_ in sorted(record["chapters"]):
        checks = [c for c in record["checks"] if c["chapter"] == number_ and c.get("verdict")]
        kinds = [c["verdict"]["kind"] for c in checks]
        line = ""
        if "load_failed" in kinds:
            line = attention_cause({"status": "graded", "checks": [c for c in checks
                                                                 if c["verdict"]["kind"] == "load_failed"]})
            line = f"your package {line}" if line else ""
        elif "mistake" in kinds:
            v = checks[kinds.index("mistake")]["verdict"]
            line = f"{v['task']}: {texts.get(v['task'], {}).get(v['mistake']) or checks[kinds.index('mistake')]['diagnosis']}"
        else:
            failing = [c for c in checks if c["verdict"]["kind"] in ("deviation", "crash", "timeout", "forbidden")]
            started = [c for c in checks if c["verdict"]["kind"] == "not_implemented"]
            if failing:
                c = failing[0]
                seen = visible_fields(c["name"], c["hidden"], c["status"], c["score"], c["max_score"], c["diagnosis"],
                                      c["summary"], c.get("output", ""), verdict=c.get("verdict"))
                line = f"{c['task']}: {seen.note or seen.status}"
            elif started:
                line = f"{started[0]['task']} is not implemented yet"
        if line and line not in said:
            said.add(line)
            lines.append(f"chapter {number_}: {line}")
    return lines


_STATUS_CELL = re.compile(r"<td>(passed|failed|error|timeout|not implemented|forbidden|waiting)</td>")


def feedback_html(markdown: str, title: str) -> str:
    try:
        import mistune

        body = mistune.create_markdown(escape=True, plugins=["table"])(markdown)
    except ImportError:
        body = f"<pre>{html.escape(markdown)}</pre>"
    body = _STATUS_CELL.sub(lambda m: f'<td class="status {m[1].replace(" ", "-")}">{m[1]}</td>', body)
    return (f"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>body{{font-family:system-ui,sans-serif;max-width:50em;margin:2em auto;padding:0 1em}}"
            f"table{{border-collapse:collapse}}td,th{{padding:.2em .6em;border-bottom:1px solid #ddd;"
            f"overflow-wrap:anywhere}}td.passed{{color:#2a7d2a}}td.failed,td.error,td.timeout,td.forbidden"
            f"{{color:#b02a2a;font-weight:600}}td.not-implemented,td.waiting{{color:#8a6d00}}"
            f"h2:first-of-type+ul{{background:#fff6e0;padding:.6em 2em;border-left:4px solid #e0a000}}"
            f"</style></head>\n<body>\n{body}</body></html>\n")


def write_feedback(data: ClassResults, folder: Path) -> None:
    assignment = data.options["assignment"]
    for s in data.students:
        record = data.of.get(s.key)
        if record is None:
            continue
        text = feedback_markdown(s, record, assignment)
        name = data.file_names[s.key]
        _write(folder / f"{name}.md", text)
        _write(folder / f"{name}.html", feedback_html(text, f"{assignment}: {s.name}"))


def copy_results(folders: list[Path], json_dir: Path) -> None:
    """Each student's Gradescope-shaped results.json as NAME.json, its staff companion beside it."""

    data = ClassResults(folders, None)
    for s in data.students:
        record = data.of.get(s.key)
        if record is None:
            continue
        name = data.file_names[s.key]
        write_json(json_dir / f"{name}.json", record["results"])
        for folder in folders:
            staff = read_json(staff_path(record_path(Path(folder), record["upload"]["slug"])))
            if staff is not None:
                write_json(json_dir / f"{name}.staff.json", staff)
                break


# --------------------------------------------------------------------- summary


def histogram(scores: list[float], maximum: float, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, axes = plt.subplots(figsize=(6, 3.2), dpi=100)
    # Bins a few points wide, so that two scores a student would call different stand apart.
    bins = max(10, min(120, int((maximum or 1) // 3)))
    axes.hist(scores, bins=bins, range=(0, maximum or 1), color="#4c72b0", edgecolor="white")
    axes.set_xlabel(f"points (of {maximum:g})")
    axes.set_ylabel("students")
    axes.set_title("score distribution")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    plt.close(figure)
    _write(path, buffer.getvalue())
    return True


def write_summary(data: ClassResults, out: Path) -> None:
    md = markdown_text
    graded = [r for r in data.records.values() if r["status"] == "graded"]
    rows = [data.of[s.key] for s in data.students if s.key in data.of]
    scores = [r["score"] for r in rows]
    maximum = data.max_score()
    statuses = Counter(e["status"] for e in data.entries)
    lines = [f"# {md(data.options['assignment'])}: grading summary", "",
             f"- input: {len(data.entries)} entries ({data.lms} layout); {len(data.records)} uploads graded or "
             f"tried, {len(graded)} graded",
             f"- students in the gradebook: {len(data.students)}, of whom {len(rows)} have a result",
             f"- late: {sum(bool(r['upload'].get('late')) for r in rows)}; more than one attempt (the latest "
             f"counts): {sum(r['upload'].get('attempts', 1) > 1 for r in rows)}", "",
             "| entries | count |", "| --- | ---: |", *[f"| {md(k)} | {v} |" for k, v in sorted(statuses.items())], ""]
    unfinished = [r for r in data.records.values() if needs_grading(r)]
    if unfinished:
        lines += [f"**{len(unfinished)} upload(s) are incomplete: some of their checks the grader could not run** "
                  f"(the machine was too busy, or had no process for them; they are `error`, never the student's "
                  f"failure). The gradebooks leave these students' grades blank, so an import sets none; run the "
                  f"same command again and only these uploads are graded again: "
                  f"{', '.join(md(r['upload']['label']) for r in unfinished[:20])}"
                  f"{' and others' if len(unfinished) > 20 else ''}.", ""]
    lines += ["## Stamp", "", f"Graded under stamp {md(describe(data.stamp))}.", ""]
    if data.earlier:
        regraded = regrade_rows(data)
        moved = sum(r["old_score"] != r["new_score"] and r["new_score"] != "" for r in regraded)
        lines += [f"This is a regrade. The earlier grades, made under stamp "
                  f"{'; '.join(md(describe(found)) for found in data.earlier_stamps)}, are kept in "
                  f"{', '.join(md(folder + '/') for folder in data.earlier_folders)}; "
                  f"regrade.csv lists all {len(regraded)} students they covered: {moved} score(s) changed, "
                  f"{sum(bool(r['changed_checks']) for r in regraded)} with a check whose outcome changed, "
                  f"{sum(r['new_score'] == '' for r in regraded)} not regraded yet.", ""]
    view = class_view_of(data)
    graded_scores = [r["score"] for r in graded]
    lines += summary_sections(view, md)
    lines += ["## Scores", ""]
    if scores:
        if histogram(scores, maximum, out / "histogram.png"):
            lines += ["![score histogram](histogram.png)", ""]
        _write(out / "scores.svg", strip_plot(view))
        if graded_scores:
            lines += [f"Over the {len(graded_scores)} graded uploads: mean {statistics.fmean(graded_scores):.1f}, "
                      f"median {statistics.median(graded_scores):g}, lowest {min(graded_scores):g}, highest "
                      f"{max(graded_scores):g} (of {maximum:g}). An upload that could not be graded is left out "
                      f"here, and scores 0 in the gradebook.", ""]
        lines += ["![scores per chapter](scores.svg)", "",
                  "| chapter | mean | median | of |", "| --- | ---: | ---: | ---: |"]
        for number_, points, chapter_scores in view.chapters:
            if chapter_scores:
                lines.append(f"| {number_} | {statistics.fmean(chapter_scores):.1f} | "
                             f"{statistics.median(chapter_scores):g} | {points:g} |")
        lines.append("")
    else:
        lines += ["No results yet.", ""]
    failed: dict[str, list[str]] = {}
    for record in graded:
        for c in record["checks"]:
            # A property that holds but waits for its value check, or a check waiting on
            # another part, is no failure of its own.
            # So is one whose package did not load, or that the grader could not run: those
            # are under "Needs attention", once per upload.
            if c["status"] not in ("passed", "waiting") and (c.get("verdict") or {}).get("kind") not in (
                    "gated", "public_only", "load_failed", "runner_failed"):
                failed.setdefault(c["name"], []).append(c["diagnosis"] or c["status"])
    lines += ["## Most-failed checks", ""]
    if failed:
        lines += ["| check | failed | most common diagnosis |", "| --- | ---: | --- |"]
        for name, reasons in sorted(failed.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:15]:
            reason, times = Counter(reasons).most_common(1)[0]
            lines.append(f"| {md(name)} | {len(reasons)} of {len(graded)} | "
                         f"{md(textwrap.shorten(reason, 240, placeholder=' …'))} ({times}×) |")
    else:
        lines.append("Every graded check passed.")
    lines += ["", "## Look-alike uploads", "",
              "Pairs whose graded functions have the most alike syntax trees (names, comments and the parts "
              "shared with the reference or the stub left out): for a person to look at, not a verdict. The "
              "earlier upload first.", ""]
    if view.look_alikes:
        lines += ["| first | then | alike | tasks |", "| --- | --- | ---: | --- |"]
        lines += [f"| {md(a)} | {md(b)} | {score:.0%} | {md(', '.join(tasks))} |"
                  for a, b, score, tasks in view.look_alikes]
    else:
        lines.append("No pair stands out.")
    left = [e for e in data.entries if e["status"] not in ("graded",)]
    lines += ["", "## Entries not graded, and why", ""]
    if left:
        lines += ["| entry | status | note |", "| --- | --- | --- |"]
        lines += [f"| {md(e['name'])} | {md(e['status'])} | {md(e['note'][:200])} |" for e in left]
    else:
        lines.append("None: every entry was graded.")
    _write(out / "summary.md", "\n".join(lines) + "\n")
    _write(out / "report.html", report_html(view, f"{data.options['assignment']}: class report",
                                            f"graded under stamp {describe(data.stamp)}"))


def class_view_of(data: ClassResults) -> ClassView:
    from grader.grade_class.similarity import look_alikes

    graded = [r for r in data.records.values() if r["status"] == "graded"]
    prints = {r["upload"]["slug"]: r.get("fingerprints") or {} for r in graded}
    return class_view(data.records, data.students, data.of, look_alikes(prints), lambda n: chapter_max(data, n))
