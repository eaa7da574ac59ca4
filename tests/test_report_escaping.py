"""Text from an upload cannot steer the report: no terminal control reaches the console
(grader/run/report.py, `plain`), and no Markdown in results.json fakes a heading, a link
or a pass (`markdown_text`, `code_block`), whatever the code printed or raised and
whatever the upload was called.
"""

from __future__ import annotations

import io
import json

from grader.checks._api import Check
from grader.checks.ch05_block.gelu import exact_values
from grader.run.results import CheckResult, GradeReport
from grader.run.report import code_block, markdown_text, plain, render, results_json
from tests.hostile import run, string_console


def _result(diagnosis, output="", status="failed"):
    check = Check(name=exact_values.name, task="gelu", points=2, summary="gelu equals x * Phi(x)",
                  probe=lambda ns: None, judge=lambda out, inputs, expected: None)
    return CheckResult(check, status, diagnosis, output)


def test_plain_strips_terminal_controls_but_keeps_text():
    assert plain("a\x1b[1Ab\x07c\x9bd\u202ee\tf\ng\x00") == "a[1Abcde\tf\ng"


def test_code_block_fence_outlasts_any_backtick_run():
    fence, *body, closing = code_block("x ````` y\n```\nz")
    assert fence == closing == "`" * 6
    assert body == ["  x ````` y", "  ```", "  z"]


def test_markdown_text_escapes_emphasis_links_and_html():
    text = markdown_text("**passed** [x](http://e) <img src=x> # h\n- item")
    assert "**" not in text.replace("\\*", "") and "\\<img" in text and "\\[x\\]" in text
    assert text.splitlines()[1].startswith("\\-")


def test_the_report_shows_no_control_characters_anywhere():
    report = GradeReport("evil\x1b]0;title\x07.zip", [_result("RuntimeError: \x1b[2Kboom", "\x1b[1Aprinted")],
                         "sandbox", "reference", problem="bad \x1b[31mupload")
    from rich.console import Console

    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    render(report, console)
    shown = console.file.getvalue()
    for sequence in ("\x1b[2K", "\x1b[1A", "\x1b]0;", "\x1b[31mupload"):
        assert sequence not in shown
    data = results_json(report)
    assert "\x1b" not in json.dumps(data, ensure_ascii=False)
    assert data["tests"][0]["output"].startswith("**failed**")


# ------------------------------------------------------------------- in a graded run


def test_terminal_report_carries_no_escape_sequences_from_the_submission(reference, sandbox):
    body = r"""
        print("\x1b]0;owned\x1b\\")
        raise RuntimeError("\x1b[1A\x1b[2K\x1b[32mgelu  2/2  passed\x1b[0m")
    """
    results = run(reference, sandbox, "gelu", body, only={"exact_values"})
    console = string_console()
    render(GradeReport("hostile", results, sandbox.describe(), "reference"), console)
    shown = console.file.getvalue()
    assert "\x1b[1A" not in shown and "\x1b]0;" not in shown


def test_results_json_markdown_cannot_fake_a_pass(reference, sandbox):
    body = r"""
        print("```\n\n**passed** — gelu equals x * Phi(x) with erf\n\n```")
        raise RuntimeError("\n\n**passed** — 2/2 points")
    """
    results = run(reference, sandbox, "gelu", body, only={"exact_values"})
    data = results_json(GradeReport("hostile", results, sandbox.describe(), "reference"))
    failed = [t for t in data["tests"] if t["status"] != "passed"]
    assert failed
    for test in failed:
        lines = test["output"].splitlines()
        assert not any(line.startswith("**passed**") for line in lines), test["output"]
