"""The reference must not leak through the report.

Every sandboxed worker holds certified parts (the reference for the parts the graded
task builds on), which the student's code may call but not read; and the upload itself
may carry the reference's text. A graded run therefore shows the student only the
grader's own words: no printed output, no exception message, no returned string, no
line the worker claims. Course staff keep all
of it in the staff companion file. `make check`, which runs without a reference, still
shows a student everything their code printed and raised.
"""

from __future__ import annotations

import csv
import io
import json
import re
import textwrap
from pathlib import Path

import pytest
from rich.console import Console

from grader.checks import catalogue
from grader.checks.ch05_block.gelu import exact_values, odd_part
from grader.grade_class.gradebook import grade_class
from grader.mutants import apply
from grader.run.results import FAILED, PASSED, GradeReport
from grader.run.engine import grade_task
from grader.run.worker_session import Grading
from grader.run.report import render, results_json, staff_path, write_json
from grader.run.submission import Submission

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "hero_transformer"
MARKER = "PRINTED-BY-THE-STUDENT"


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


REFERENCE_LINES = sorted({_squeezed(line) for path in SOLUTIONS.glob("*.py")
                          for line in path.read_text().splitlines() if len(line.strip()) >= 20})


def leaked_lines(text: str) -> list[str]:
    squeezed = _squeezed(text)
    return [line for line in REFERENCE_LINES if line in squeezed]


# Everything the submission can find of the certified parts, gathered once per worker.
GATHER = '''
def _everything_certified():
    import inspect, linecache, sys
    found = []
    for finder in list(sys.meta_path):
        sources = getattr(finder, "sources", None)
        if isinstance(sources, dict):
            found += [str(text) for text in sources.values()]
    for name, module in list(sys.modules.items()):
        if "hero_transformer" not in name:
            continue
        for loader in (getattr(module, "__loader__", None), getattr(getattr(module, "__spec__", None), "loader", None)):
            sources = getattr(loader, "sources", None)
            if isinstance(sources, dict):
                found += [str(text) for text in sources.values()]
        for value in list(vars(module).values()):
            try:
                found.append(inspect.getsource(value))
            except Exception:
                pass
            code = getattr(value, "__code__", None)
            if code is not None:
                found += [c for c in code.co_consts if isinstance(c, str)]
        filename = getattr(module, "__file__", None)
        if filename:
            found += linecache.getlines(filename)
    return "\\n".join(found)
'''

# Every way back to the student: print, stderr, flooding, exception messages and class
# names, returned strings and objects whose repr is the code.
GELU_BODY = f'''
import sys
text = _everything_certified()
assert "attention" in text, "the hostile code found nothing to leak"
print({MARKER!r})
print(text)
sys.stderr.write(text)
print("x" * 200_000)
print(text[-5000:])
if x.dim() == 1 and x.numel() == 13:
    raise type(text.splitlines()[-1][:200] or "Leak", (Exception,), {{}})(text)
if x.dim() == 1:
    raise RuntimeError(text)
class Leak:
    def __repr__(self):
        return text
return Leak()
'''

DECODE_BODY = '''
text = _everything_certified()
print(text)
if len(ids) > 3:
    return text
raise NotImplementedError(text)
'''


def _hostile_sources(reference) -> dict[str, str]:
    sources = dict(reference.sources)
    for task_name, body in (("gelu", GELU_BODY), ("decode", DECODE_BODY)):
        task = catalogue.tasks()[task_name]
        sources[f"{task.module}.py"] += "\n\n" + textwrap.dedent(GATHER) + "\n"
        sources = apply(sources, task.module, task.name, textwrap.dedent(body))
    return sources


def _checks(task_name):
    return [c for c in catalogue.chapter_of_task()[task_name].checks if c.task == task_name]


def _grade(reference, sandbox, sources, task_names, use_reference=True):
    results = []
    for task_name in task_names:
        # The static tamper scan would stop this submission before it ran: off, so the
        # output layer itself is what is tested.
        results += grade_task(catalogue.tasks()[task_name], _checks(task_name),
                              Grading(Submission("hostile", sources), reference if use_reference else None, sandbox, seed=7),
                              scan_for_tampering=False)
    return GradeReport("hostile", results, sandbox.describe(), "the reference")


@pytest.fixture(scope="module")
def hostile(reference, sandbox):
    return _grade(reference, sandbox, _hostile_sources(reference), ["gelu", "decode"])


def _visible_strings(data: dict) -> list[str]:
    strings = [data["output"]]
    for test in data["tests"]:
        strings.append(test["output"])
        if test["visibility"] == "visible":
            strings += [test["name"], *test["tags"]]
    return strings


def test_hostile_code_earns_nothing_and_was_heard_by_staff(hostile):
    assert hostile.results and all(r.status != PASSED for r in hostile.results)
    # The code really did find and say the certified code: the test below is not vacuous.
    said = "\n".join(r.staff_diagnosis + r.staff_output for r in hostile.results)
    assert leaked_lines(said), "the hostile submission never got hold of the certified code"


def test_results_json_carries_no_line_of_the_reference(hostile):
    data = results_json(hostile)
    for text in _visible_strings(data):
        assert not leaked_lines(text), text[:2000]
    assert MARKER not in json.dumps(data)
    assert not leaked_lines(json.dumps(data))


def test_terminal_report_carries_no_line_of_the_reference(hostile):
    console = Console(record=True, file=io.StringIO(), width=200)
    render(hostile, console)
    shown = console.export_text()
    assert "Total:" in shown
    assert not leaked_lines(shown), shown[:3000]
    assert MARKER not in shown


def test_student_sees_a_builtin_type_and_the_file_not_the_line(hostile, reference):
    raised = [r for r in hostile.results if r.check.name == exact_values.name][0]
    assert raised.status == "error"
    # Python's type and the course's file; the line (which the code picks as it runs) for staff only.
    line = next(l.strip() for l in _hostile_sources(reference)["model.py"].splitlines()
                if l.strip().startswith("raise RuntimeError(text)"))
    assert "raised RuntimeError (hero_transformer/model.py)" in raised.diagnosis, raised.diagnosis
    assert " line " not in raised.diagnosis and line not in raised.diagnosis
    assert "model.py:" in raised.staff_diagnosis
    assert "attention" not in raised.diagnosis
    made_up = [r for r in hostile.results if r.check.name == odd_part.name][0]
    assert made_up.diagnosis.startswith("gelu raised an exception of its own class (hero_transformer/model.py)"), \
        made_up.diagnosis


def test_not_implemented_with_a_made_up_name_is_not_echoed(hostile):
    unfinished = [r for r in hostile.results if r.check.task == "decode" and r.status == "error"
                  and "NotImplementedError" in r.diagnosis]
    assert unfinished, [(r.check.name, r.status, r.diagnosis) for r in hostile.results]
    for result in unfinished:
        assert "which is not implemented yet" not in result.diagnosis
        assert not leaked_lines(result.diagnosis)


def test_staff_file_keeps_what_the_code_printed_and_said(hostile, tmp_path):
    out = tmp_path / "results.json"
    write_json(results_json(hostile), out)
    staff = json.loads(staff_path(out).read_text())
    assert staff_path(out).name == "results.staff.json"
    printed = "\n".join(c["output"] for c in staff["checks"])
    assert MARKER in printed
    said = "\n".join(c["staff_diagnosis"] for c in staff["checks"])
    assert "RuntimeError: " in said and leaked_lines(said)
    assert MARKER not in out.read_text()


def test_gradebook_csv_carries_no_line_of_the_reference(reference, tmp_path):
    uploads = tmp_path / "uploads"
    package = uploads / "mallory" / "hero_transformer"
    package.mkdir(parents=True)
    for name, text in _hostile_sources(reference).items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    table = tmp_path / "gradebook.csv"
    rows = grade_class(uploads, tmp_path / "out", csv_path=table, json_dir=tmp_path / "json", chapters=["05"], seed=3,
                       console=Console(file=io.StringIO()))
    assert len(rows) == 1 and float(rows[0]["total"]) < float(rows[0]["max"])
    text = table.read_text()
    assert list(csv.DictReader(io.StringIO(text)))[0]["student"] == "mallory"
    assert not leaked_lines(text)
    assert not leaked_lines((tmp_path / "json" / "mallory.json").read_text())
    for written in (tmp_path / "out").rglob("*"):  # feedback, summary, every gradebook
        if written.is_file() and written.suffix in (".md", ".html", ".csv") or written.name.endswith(
                ".json") and not written.name.endswith(".staff.json"):
            assert not leaked_lines(written.read_text(errors="replace")), written


def test_check_without_a_reference_still_shows_a_student_their_own_words(reference, sandbox):
    body = '''
        print("debugging: x has shape", tuple(x.shape))
        raise ValueError("my own " + "message about x")
    '''
    task = catalogue.tasks()["gelu"]
    sources = apply(reference.sources, task.module, task.name, textwrap.dedent(body))
    report = _grade(reference, sandbox, sources, ["gelu"], use_reference=False)
    assert all(r.status == "error" for r in report.results)
    assert all("ValueError: my own message about x" in r.diagnosis for r in report.results), \
        [r.diagnosis for r in report.results]
    assert "debugging: x has shape" in report.results[-1].output
    console = Console(record=True, file=io.StringIO(), width=200)
    render(report, console)
    shown = console.export_text()
    assert "ValueError: my own message about x" in shown
    # Only a hidden check printed here, and what a hidden check's code printed is shown on
    # no platform (grader/run/visible.py), reference or not.
    assert "debugging: x has shape" not in shown
    # The same code graded beside certified parts shows neither.
    graded = _grade(reference, sandbox, sources, ["gelu"])
    assert all("my own message" not in r.diagnosis and "my own message" in r.staff_diagnosis
               for r in graded.results)
    assert not graded.results[-1].output and "debugging" in graded.results[-1].staff_output


# ------------------------------------------------- nothing visible hints at hidden checks

HIDDEN_ONLY_BUG = """
    y = 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    return y * 1.01 if x.dim() >= 3 else y
"""


def test_visible_results_do_not_reveal_hidden_failures(reference, sandbox):
    task = catalogue.tasks()["gelu"]
    buggy = apply(reference.sources, task.module, task.name, textwrap.dedent(HIDDEN_ONLY_BUG))
    right = _grade(reference, sandbox, dict(reference.sources), ["gelu"])
    wrong = _grade(reference, sandbox, buggy, ["gelu"])
    assert all(r.status == PASSED for r in right.results)
    assert {r.status for r in wrong.results if r.check.hidden} == {FAILED}
    assert all(r.status == PASSED for r in wrong.results if not r.check.hidden)
    assert wrong.score < right.score
    seen_right, seen_wrong = results_json(right), results_json(wrong)
    assert seen_right["output"] == seen_wrong["output"]
    assert "Public checks: 4 / 4 points." in seen_wrong["output"] and "Hidden checks" in seen_wrong["output"]
    assert seen_wrong["score"] == wrong.score  # the true total, which Gradescope holds back
    visible = lambda data: [(t["name"], t["output"], t["tags"], t["score"], t["status"])  # noqa: E731
                            for t in data["tests"] if t["visibility"] == "visible"]
    assert visible(seen_right) == visible(seen_wrong) and visible(seen_wrong)
    assert all(t["visibility"] == "after_published" for t in seen_wrong["tests"] if "hidden" in t["tags"])
