"""What `make check` and a graded run tell a student: a crash as a sentence that names
their file as they know it, an 80-column report whose diagnoses use the whole width, and
a certified-parts line that lists only what a chapter's checks used."""

from __future__ import annotations

import io
import textwrap

import pytest
from rich.console import Console

from grader.checks import catalogue
from grader.checks.ch05_block.block import formula, shape
from grader.mutants import apply
from grader.run.results import ERROR, GradeReport
from grader.run.engine import grade_task
from grader.run.worker_session import Grading
from grader.run.report import certified_line, parts_used, render, results_json
from grader.run.submission import Submission

CRASHING_GELU = """
    scale = 1.0 / math.sqrt(2.0)
    raise RuntimeError(f"a private note {scale}")
"""


def _graded(reference, sandbox, task_name, body, use_reference=True):
    task = catalogue.tasks()[task_name]
    sources = apply(reference.sources, task.module, task.name, textwrap.dedent(body))
    checks = [c for c in catalogue.all_checks() if c.task == task_name]
    return grade_task(task, checks,
                      Grading(Submission("upload", sources), reference if use_reference else None, sandbox, seed=3)), sources


def test_a_crash_is_a_sentence_naming_the_students_file(reference, sandbox):
    results, sources = _graded(reference, sandbox, "gelu", CRASHING_GELU)
    line = next(n for n, text in enumerate(sources["model.py"].splitlines(), start=1)
                if "a private note" in text)
    for result in results:
        assert result.status == ERROR
        shown = result.diagnosis
        # Beside certified parts the line is one the code could pick by what it read: staff keep it.
        assert shown.startswith("gelu raised RuntimeError (hero_transformer/model.py)"), shown
        assert f" line {line}" not in shown and "submission/" not in shown
        assert f"line {line}" in result.staff_diagnosis
        assert f"while this check ran ({result.check.summary})" in shown
        # The message is the code's own words: staff see it, the student does not.
        assert "a private note" in result.staff_diagnosis and "a private note 0.7" not in shown


def test_make_check_shows_the_message_and_the_same_place(reference, sandbox):
    results, _ = _graded(reference, sandbox, "gelu", CRASHING_GELU, use_reference=False)
    for result in results:
        assert "RuntimeError: a private note 0.7" in result.diagnosis
        assert "(hero_transformer/model.py line " in result.diagnosis and "submission/" not in result.diagnosis


def _result(check_name, status, diagnosis, certified=()):
    from grader.run.results import CheckResult

    check = next(c for c in catalogue.all_checks() if c.name == check_name)
    return CheckResult(check, status, diagnosis, certified=tuple(certified))


def test_the_diagnosis_gets_the_full_width_of_an_80_column_terminal():
    diagnosis = ("the feed-forward branch reads X instead of U = X + A(LN1(X)), the residual stream after the "
                 "attention branch, so each position's second branch sees the wrong input")
    results = [_result(shape.name, "passed", ""), _result(formula.name, "failed", diagnosis)]
    console = Console(record=True, file=io.StringIO(), width=80)
    render(GradeReport("upload", results, "sandbox", "reference"), console)
    lines = console.export_text().splitlines()
    assert all(len(line) <= 80 for line in lines)
    start = next(i for i, line in enumerate(lines) if "↳" in line)
    assert lines[start - 1].lstrip().startswith("block.formula") and "0/2" in lines[start - 1]
    # Under its row, across the width: the words run on beyond the check column's 45 characters.
    used = [line for line in lines[start:start + 3] if line.strip()]
    assert max(len(line.rstrip()) for line in used) > 70
    shown = " ".join(line.strip() for line in used).replace("↳ ", "")
    assert diagnosis in shown


def test_the_certified_parts_line_lists_only_what_the_chapter_used():
    everything = tuple(t for t in catalogue.tasks() if not t.startswith(("layer_norm", "gelu", "feedforward",
                                                                            "block")))
    results = [_result(formula.name, "failed", "x", certified=everything)]
    line = certified_line("05", results)
    assert line is not None
    listed = set(line.split(": ", 1)[1].split(", "))
    assert {"attention", "attention_init", "split_heads", "merge_heads"} <= listed
    assert not listed & {"micro_backward", "build_vocab", "adamw_step", "lm_forward", "cross_entropy"}
    assert listed == set(everything) & parts_used("05")
    assert results_json(GradeReport("u", results, "s", "r"))["extra_data"]["chapters"]["05"]["certified"] == \
        sorted(listed)


@pytest.mark.parametrize("chapter, needs, never", [
    ("00", set(), {"layer_norm", "decode", "adamw_step"}),
    ("06", {"layer_norm", "gelu"}, {"attention", "micro_backward"}),
    ("09", {"lm_forward", "lm_init", "attention", "block"}, {"adamw_step", "micro_sample", "windows"}),
])
def test_parts_used_follow_the_code_the_checks_run(chapter, needs, never):
    used = parts_used(chapter)
    assert needs <= used and not used & never, sorted(used)
