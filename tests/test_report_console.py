"""The terminal report on every console a student has: a cp1252 one (Windows, output piped
or PYTHONIOENCODING=cp1252), an ASCII one, a UTF-8 one, an 80-column one whose diagnoses
use the whole width; its closing line on the hidden checks still to come; and its
certified-parts line, which lists only what a chapter's checks used."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from grader.checks import catalogue
from grader.checks.ch05_block.block import formula, shape
from grader.run import report as report_module
from grader.run.results import FAILED, NOT_IMPLEMENTED, PASSED, CheckResult, GradeReport
from grader import console as console_module
from grader.console import ASCII_FALLBACKS, safe_stream
from grader.run.report import certified_line, parts_used, render, results_json

ROOT = Path(__file__).resolve().parent.parent


def _report(chapter: str = "05", hidden: bool = False, problem: str = "") -> GradeReport:
    checks = [c for c in catalogue.all_checks() if c.chapter == chapter and (hidden or not c.hidden)]
    statuses = [PASSED, FAILED, NOT_IMPLEMENTED]
    said = "position 1 changed → the future leaks in; γ ≈ 1 − ε ✓"
    results = [CheckResult(c, statuses[i % 3], diagnosis=said) for i, c in enumerate(checks)]
    return GradeReport("upload — Model.py", results, "bubblewrap", "none", elapsed=1.0, problem=problem)


def _rendered(report: GradeReport, encoding: str, width: int = 100) -> str:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding=encoding, errors="strict", write_through=True)
    render(report, Console(file=stream, width=width, force_terminal=False, color_system=None))
    stream.flush()
    return raw.getvalue().decode(encoding)


# ------------------------------------------------------------------ never raises


@pytest.mark.parametrize("encoding", ["cp1252", "ascii", "cp437", "latin-1"])
def test_the_report_renders_on_a_console_that_lacks_its_characters(encoding):
    shown = _rendered(_report(problem="Model.py — rename it → model.py ✗"), encoding)
    assert "Total:" in shown and _hidden_of("05") in shown
    if encoding in ("cp1252", "ascii"):  # both lack every character of the diagnosis
        assert "-> position 1 changed -> the future leaks in; gamma ~ 1 - eps ok" in shown
        assert "rename it -> model.py x" in shown
    else:  # what the encoding has is kept, the rest spelled out
        assert "position 1 changed -> the future leaks in" in shown and " ok" in shown
    assert "+----" in shown  # rich's panels, drawn in ASCII
    assert "?" not in shown


def test_a_utf8_console_keeps_the_characters():
    shown = _rendered(_report(), "utf-8")
    assert "↳ position 1 changed → the future leaks in; γ ≈ 1 − ε ✓" in shown
    assert "╭" in shown or "┌" in shown


def test_the_fallbacks_cover_every_character_the_grader_writes_outside_cp1252():
    """Every character of the grader's own text (diagnoses, summaries, titles) that
    cp1252 lacks has an ASCII spelling of its own, and rich's boxes and spinner too."""
    lacking = set()
    for path in (ROOT / "grader").rglob("*.py"):
        for character in path.read_text(encoding="utf-8"):
            try:
                character.encode("cp1252")
            except UnicodeEncodeError:
                lacking.add(character)
    assert lacking, "expected the grader to write some mathematics"
    assert not {c for c in lacking if c not in ASCII_FALLBACKS}, sorted(lacking - set(ASCII_FALLBACKS))
    from rich import box
    from rich.spinner import Spinner

    for drawn in (box.ROUNDED, box.HEAVY, box.SQUARE, box.DOUBLE):
        assert all(c in ASCII_FALLBACKS or c.isascii() for c in str(drawn))
    assert all(c in ASCII_FALLBACKS for frame in Spinner("dots").frames for c in frame)


def test_safe_stream_changes_nothing_on_utf8_and_is_idempotent():
    utf8 = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    safe_stream(utf8)
    assert utf8.errors == "strict"
    cp = io.TextIOWrapper(io.BytesIO(), encoding="cp1252")
    safe_stream(cp)
    safe_stream(cp)
    assert cp.errors == console_module.FALLBACK_ERRORS
    cp.write("✓ ↳ ⠋ │ Φ(a) é")
    cp.flush()
    assert cp.buffer.getvalue().decode("cp1252") == "ok -> . | Phi(a) é"


def _mutant_in(tmp_path: Path) -> Path:
    """The reference with chapter 06's GELU derivative missing its x·φ(x) term: its
    diagnosis quotes φ, which cp1252 and ASCII lack."""
    from grader.mutants import catalogue as mutants
    from grader.regions import package_sources

    entry = next(m for m in mutants()[0] if m.name == "gelu_backward_no_x_pdf")
    folder = tmp_path / "hero_transformer"
    for rel, text in entry.apply(package_sources(ROOT / "solutions" / "hero_transformer")).items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    return folder


def _hidden_of(chapter: str) -> str:
    hidden = [c for c in catalogue.all_checks() if c.chapter == chapter and c.hidden]
    return f"Still to come: {len(hidden)} hidden checks worth {sum(c.points for c in hidden):g} points"


@pytest.mark.parametrize("encoding", ["cp1252", "ascii"])
def test_grader_check_under_a_narrow_encoding_prints_the_report(tmp_path, encoding):
    """`python -m grader check` piped, as Windows runs it in CI or into a file: no
    UnicodeEncodeError, the report reads in the console's own encoding."""
    folder = _mutant_in(tmp_path)
    env = {**os.environ, "PYTHONIOENCODING": encoding, "COLUMNS": "120"}
    env.pop("PYTHONUTF8", None)
    done = subprocess.run([sys.executable, "-m", "grader", "check", str(folder), "--chapters", "06"], cwd=ROOT,
                          env=env, capture_output=True, timeout=600)
    out, err = done.stdout.decode(encoding), done.stderr.decode(encoding, errors="replace")
    assert "UnicodeEncodeError" not in err and "Traceback" not in err, err
    assert done.returncode == 1
    assert re.search(r"Total: \d+ / \d+ points", out), out
    assert "Chapter 06 " in out and "phi(x)" in out and "+----" in out
    assert _hidden_of("06") in out


def test_grader_check_on_a_cp1252_terminal(tmp_path):
    """A console (a terminal, so rich animates its 'grading...' spinner) whose encoding is
    cp1252: nothing raises."""
    folder = _mutant_in(tmp_path)
    env = {**os.environ, "PYTHONIOENCODING": "cp1252", "COLUMNS": "120", "TERM": "xterm"}
    env.pop("PYTHONUTF8", None)
    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "grader", "check", str(folder), "--chapters", "06"], cwd=ROOT,
                               env=env, stdin=follower, stdout=follower, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 600)
        if not ready:
            process.kill()
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    code = process.wait(timeout=60)
    shown = b"".join(chunks).decode("cp1252", errors="replace")
    assert "UnicodeEncodeError" not in shown and "Traceback" not in shown, shown[-3000:]
    assert code == 1 and "Total: " in shown and "phi(x)" in shown


# ------------------------------------------------------------------ the hidden checks to come


def test_a_public_run_ends_with_the_hidden_checks_still_to_come():
    shown = _rendered(_report("05"), "utf-8", width=200)
    hidden = [c for c in catalogue.all_checks() if c.chapter == "05" and c.hidden]
    points = sum(c.points for c in hidden)
    assert hidden and points > 0  # chapter 05 keeps hidden checks: the line has something to say
    assert f"Still to come: {len(hidden)} hidden checks worth {points:g} points run when your course grades this" \
        in shown


def test_a_run_with_the_hidden_checks_says_nothing_of_them():
    assert "Still to come" not in _rendered(_report("05", hidden=True), "utf-8", width=200)


def test_two_chapters_add_up():
    checks = [c for c in catalogue.all_checks() if c.chapter in ("05", "07") and not c.hidden]
    report = GradeReport("x", [CheckResult(c, PASSED) for c in checks], "bubblewrap", "none")
    hidden = [c for c in catalogue.all_checks() if c.chapter in ("05", "07") and c.hidden]
    assert report_module.hidden_line(report).startswith(
        f"Still to come: {len(hidden)} hidden checks worth {sum(c.points for c in hidden):g} points")


def test_without_hidden_checks_the_counts_come_from_the_release_file(tmp_path, monkeypatch):
    counts = tmp_path / "hidden_counts.json"
    counts.write_text(json.dumps({"05": {"checks": 1, "points": 2.0}}))
    public = [c for c in catalogue.all_checks() if not c.hidden]
    monkeypatch.setattr(catalogue, "all_checks", lambda: public)
    monkeypatch.setattr(catalogue, "HIDDEN_COUNTS", counts)
    assert catalogue.hidden_counts() == {"05": {"checks": 1, "points": 2.0}}
    report = GradeReport("x", [CheckResult(c, PASSED) for c in public if c.chapter == "05"], "b", "none")
    assert report_module.hidden_line(report).startswith("Still to come: 1 hidden check worth 2 points")
    counts.unlink()
    assert catalogue.hidden_counts() == {} and report_module.hidden_line(report) is None


def test_the_release_ships_the_counts_of_its_chapters(tmp_path):
    from grader.generate import release

    folder, _, _ = release.build(tmp_path, ["05", "07"], run_scan=False)
    shipped = json.loads((folder / "grader" / "checks" / "hidden_counts.json").read_text())
    assert set(shipped) == {"05", "07"}
    assert shipped == {k: v for k, v in catalogue.hidden_counts().items() if k in ("05", "07")}


# ------------------------------------------------ 80 columns, and the certified-parts line


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
