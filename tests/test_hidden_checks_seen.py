"""What every back end shows a student of a hidden check: its name, points, status and a
diagnosis holding no input and no expected value (grader/run/visible.py). One scan runs
over every back end's student-facing output: Gradescope's results.json (hidden tests are
shown once grades are published), PrairieLearn's results.json, Autolab's feedback and
semantic line, the report an nbgrader cell prints, a class run's feedback files.

Two reports go through it: every check of the catalogue with a diagnosis written to leak
(the check's own summary, numbers of its real inputs, an expected value), and a real
grading of a block that registers three parameters too many, whose hidden ledger check
says what the ledger gives for the hidden sizes."""

from __future__ import annotations

import io
import json
import re
from types import SimpleNamespace

import pytest
import torch
from rich.console import Console

from grader.checks import catalogue
from grader.checks.ch05_block.block_init.hidden import parameter_ledger_wide
from grader.checks.ch05_block.layer_norm.hidden import matches_reference
from grader.run.results import FAILED, PASSED, CheckResult, GradeReport

NUMBER = re.compile(r"\d[\d,._]*")
# What the hidden checks' summaries gave away before (PrairieLearn's results.json).
KNOWN_LEAKS = ("d=64, h=4, f=256", "49,728", "16,384", "(d=12, h=3)", "x [3, 2, 6]", "f = 10")


def _hidden_checks():
    return [c for c in catalogue.all_checks() if c.hidden]


def _numbers_of(value, found: list[str], depth: int = 0) -> None:
    """Numbers as a diagnosis would print them: scalars, and a tensor's leading entries."""
    if depth > 3 or len(found) > 12:
        return
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        found.append(f"{value:g}" if isinstance(value, float) else str(value))
    elif isinstance(value, torch.Tensor):
        found.extend(f"{float(v):.6f}" for v in value.flatten()[:3].tolist())
        found.append(str(list(value.shape)))
    elif isinstance(value, dict):
        for item in value.values():
            _numbers_of(item, found, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in list(value)[:4]:
            _numbers_of(item, found, depth + 1)


def _inputs_shown(check) -> list[str]:
    try:
        inputs = check.make_inputs(torch.Generator().manual_seed(1234))
    except Exception:  # noqa: BLE001 - a check whose inputs need more than a generator: its summary stands in
        inputs = {}
    found: list[str] = []
    _numbers_of(inputs, found)
    return found


def _leaky_report() -> tuple[GradeReport, dict[str, list[str]]]:
    """Every check failed; a hidden check's diagnosis holds its summary, its inputs and an
    expected value, which no student may read. The secrets, by check."""
    results, secrets = [], {}
    for index, check in enumerate(catalogue.all_checks()):
        if check.hidden:
            expected = f"{987_000 + index * 13 + 0.25:.2f}"
            shown = _inputs_shown(check)
            secrets[check.name] = [expected, *shown]
            diagnosis = (f"{check.summary}: got 1.5 where the reference gives {expected} for the inputs "
                         f"{', '.join(shown)}")
        else:
            diagnosis = "the output differs from the one the lesson works out"
        results.append(CheckResult(check, FAILED, diagnosis))
    return GradeReport("your upload", results, "sandbox", "the reference"), secrets


def _students_see(report: GradeReport) -> dict[str, str]:
    """Everything a student reads of this report, per back end."""
    from grader.grade_class.gradebook import record_checks
    from grader.grade_class.outputs import feedback_html, feedback_markdown
    from grader.grade_class.uploads import Student
    from grader.lms.autolab import feedback as autolab_feedback
    from grader.lms.prairielearn import results as prairielearn_results
    from grader.run.report import render, results_json

    gradescope = dict(results_json(report, 7))
    gradescope.pop("extra_data")  # Gradescope never shows it
    numbers = sorted({r.check.chapter for r in report.results})
    lines, semantic, scores = autolab_feedback(report, numbers)
    console = Console(file=io.StringIO(), force_terminal=False, width=100)
    render(report, console)
    by_chapter = {}
    for r in report.results:
        by_chapter.setdefault(r.check.chapter, {"score": 0.0, "max_score": 0.0})
        by_chapter[r.check.chapter]["score"] += r.score
        by_chapter[r.check.chapter]["max_score"] += r.check.points
    record = {"upload": {"label": "upload.zip"}, "score": report.score, "max_score": report.max_score,
              "problem": report.problem, "chapters": by_chapter, "checks": record_checks(report)}
    student = Student(key="ann", name="Ann")
    markdown = feedback_markdown(student, record, "hero_transformer")
    return {"gradescope": json.dumps(gradescope, ensure_ascii=False),
            "prairielearn": json.dumps(prairielearn_results(report, {"kit": "k"}), ensure_ascii=False),
            "autolab": "\n".join(lines) + "\n" + json.dumps(semantic, ensure_ascii=False) + json.dumps(scores),
            "nbgrader cell": console.file.getvalue(),
            "class feedback": markdown + feedback_html(markdown, "feedback")}


def _unescaped(text: str) -> str:
    """The text as read: markdown's and JSON's escapes undone, lines rejoined."""
    return re.sub(r"\\(.)", r"\1", text).replace("\n", " ")


def _neutral(report: GradeReport) -> GradeReport:
    """The same report with every hidden check's diagnosis in words that hold nothing: what
    a back end shows anyway (public summaries name published sizes such as d=64)."""
    return GradeReport(report.submission, [
        CheckResult(r.check, r.status, "the output differs from the reference's" if r.check.hidden else r.diagnosis,
                    output=r.output) for r in report.results], report.sandbox, report.certified)


def _count(text: str, value: str) -> int:
    if re.fullmatch(r"[-\d.,]+", value):
        return len(re.findall(rf"(?<![\d.]){re.escape(value)}(?![\d])", text))
    return text.count(value)


def _leaks(text: str, baseline: str, report: GradeReport, secrets: dict[str, list[str]]) -> list[str]:
    """What the text shows that the same back end does not show when the hidden checks'
    diagnoses hold nothing: their summaries, inputs and expected values."""
    text, baseline = _unescaped(text), _unescaped(baseline)
    wanted = [(leak, leak) for leak in KNOWN_LEAKS]
    for result in report.results:
        if result.check.hidden:
            wanted.append((f"{result.check.name}'s summary", re.sub(r"\s+", " ", result.check.summary)))
            wanted += [(f"{result.check.name}: {value}", value) for value in secrets.get(result.check.name, [])]
    return [what for what, value in wanted if _count(text, value) > _count(baseline, value)]


@pytest.mark.parametrize("backend", ["gradescope", "prairielearn", "autolab", "nbgrader cell", "class feedback"])
def test_no_back_end_shows_a_hidden_checks_summary_inputs_or_expected_values(backend):
    report, secrets = _leaky_report()
    seen, baseline = _students_see(report)[backend], _students_see(_neutral(report))[backend]
    leaks = _leaks(seen, baseline, report, secrets)
    assert not leaks, f"{backend} shows {leaks[:10]}"
    # The scan finds what it looks for: the same report with the hidden checks made public leaks.
    exposed = GradeReport(report.submission, [
        CheckResult(SimpleNamespace(**{**vars_of(r.check), "hidden": False}), r.status, r.diagnosis)
        for r in report.results], report.sandbox, report.certified)
    assert len(_leaks(_students_see(exposed)[backend], baseline, report, secrets)) > len(secrets)


def vars_of(check) -> dict:
    from dataclasses import fields

    return {f.name: getattr(check, f.name) for f in fields(check)} | {"chapter": check.chapter}


def test_a_hidden_check_shows_name_points_status_and_words():
    from grader.run.visible import visible_check

    check = next(c for c in _hidden_checks() if c.name == parameter_ledger_wide.name)
    result = CheckResult(check, FAILED, "the block registers 49,731 parameters; the ledger 4d² + 2df + f + 5d "
                                        "gives 49728 for d=64, f=256")
    seen = visible_check(result)
    assert (seen.name, seen.points, seen.status, seen.score) == (check.name, check.points, FAILED, 0.0)
    assert seen.summary == "" and seen.output == ""
    assert seen.diagnosis == "the block registers … parameters; the ledger 4d² + 2df + f + 5d gives … for d=…, f=…"
    assert visible_check(CheckResult(check, PASSED, "")).said == PASSED


@pytest.mark.slow
def test_a_real_grading_shows_no_hidden_value_anywhere(tmp_path):
    """A block with three parameters too many, graded for real: the hidden ledger check
    fails with the hidden sizes and counts in its words, and no back end shows them."""
    from grader.lms.external import grade_upload

    from grader import KIT_ROOT

    solutions = KIT_ROOT / "solutions" / "hero_transformer"
    package = tmp_path / "hero_transformer"
    package.mkdir()
    for source in solutions.glob("*.py"):
        text = source.read_text()
        if source.name == "model.py":
            line = "        self.ln_feedforward = LayerNorm(cfg.d_model)\n"
            assert line in text
            text = text.replace(line, line + "        self.spare = torch.nn.Parameter(torch.zeros(3))\n")
        (package / source.name).write_text(text)
    outcome = grade_upload(tmp_path, "your upload", ["05"], 4242, 300.0)
    report = outcome.report
    assert report is not None, outcome
    wide = next(r for r in report.results if r.check.name == parameter_ledger_wide.name)
    from grader.checks.ch05_block.hidden.oracles import block_parameters

    # The sizes the check drew for this grading's seed, and the counts they give.
    sizes = wide.check.make_inputs(torch.Generator().manual_seed(4242 + sum(map(ord, wide.check.name))))["sizes"]
    d, f = sizes["d_model"], sizes["d_ff"]
    ledger = block_parameters(d, f)
    assert wide.status == FAILED and str(ledger) in wide.diagnosis and f"d={d}" in wide.diagnosis, wide.diagnosis
    secrets = {wide.check.name: [str(ledger), str(ledger + 3), f"{ledger + 3:,}", f"d={d}", f"f={f}"]}
    baseline = _students_see(_neutral(report))
    for backend, text in _students_see(report).items():
        leaks = _leaks(text, baseline[backend], report, secrets)
        assert not leaks, f"{backend} shows {leaks}"
        assert "parameter_ledger_wide" in text, backend  # the check itself is still named


# ------------------------------------------- what a published hidden check reads whole

def _graded(entry_names: list[str], seed: int, box) -> dict[str, list]:
    """Each catalogue entry's task graded with every check, hidden ones included."""
    from grader.mutants import catalogue as entries
    from grader.run.engine import grade_task
    from grader.run.worker_session import Grading
    from grader.run.reference import Reference
    from grader.run.submission import Submission

    reference = Reference.available()
    mutants, _ = entries()
    by_name = {m.name: m for m in mutants}
    graded = {}
    for name in entry_names:
        entry = by_name[name]
        checks = [c for c in catalogue.all_checks() if c.task == entry.task]
        graded[name] = grade_task(catalogue.tasks()[entry.task], checks,
                                  Grading(Submission(name, entry.apply(reference.sources)), reference, box, seed=seed))
    return graded


# A named mistake in its task's own words, in chapters 04 to 09 (hidden checks name them too).
NAMED = ["layer_norm_variance_d_minus_1", "adamw_coupled_weight_decay", "adamw_decay_after_update",
         "gelu_tanh", "attention_no_causal_mask", "cross_entropy_one_global_max"]


def _under_two_seeds(wanted: list[str], at_least: int) -> tuple[dict, dict]:
    """The catalogue entries named (those it holds, at least `at_least`), graded under seeds 1 and 2."""
    from grader.mutants import catalogue as entries
    from grader.run.processes import Limits
    from grader.run.sandbox import Sandbox

    known = {m.name for m in entries()[0]}
    names = [n for n in wanted if n in known]
    assert len(names) >= at_least, names
    with Sandbox(Limits()) as box:
        return _graded(names, 1, box), _graded(names, 2, box)


@pytest.fixture(scope="module")
def two_seeds():
    return _under_two_seeds(NAMED, 4)


def test_a_hidden_checks_named_mistake_is_published_in_its_own_words(two_seeds):
    """The issue's case: LayerNorm dividing by d - 1, and AdamW's decay in the gradient,
    fail hidden checks that name the mistake; the published sentence keeps the kit's
    constants ("d - 1", "(1 - lr * weight_decay)") instead of withholding them."""
    from grader.run.visible import WITHHELD, visible_check

    first, _ = two_seeds
    shown = {(entry, r.check.name): visible_check(r).diagnosis for entry, results in first.items() for r in results
             if r.check.hidden and r.status != PASSED}
    d_minus_1 = shown["layer_norm_variance_d_minus_1", matches_reference.name]
    assert "d - 1" in d_minus_1, d_minus_1
    coupled = [text for (entry, _), text in shown.items() if entry == "adamw_coupled_weight_decay"]
    assert any("(1 - lr * weight_decay)" in text for text in coupled), coupled
    whole = [text for text in shown.values() if WITHHELD not in text]
    assert len(whole) >= 4, shown


def test_what_a_hidden_check_publishes_whole_is_the_same_under_every_seed(two_seeds):
    """A sentence published whole (grader.run.visible.reads_whole) holds nothing of the
    hidden inputs or expected values: graded under two seeds, whose hidden inputs differ,
    each such sentence is the same word for word; and a sentence that differs between the
    seeds is published with its numbers withheld."""
    from grader.run.visible import WITHHELD, reads_whole, visible_check

    first, second = two_seeds
    compared = 0
    for name in first:
        for a, b in zip(first[name], second[name]):
            if not a.check.hidden or PASSED in (a.status, b.status):
                continue
            if reads_whole(a.diagnosis, a.verdict) and (a.verdict or {}).get("kind") != "timeout":
                compared += 1
                assert visible_check(a).diagnosis == visible_check(b).diagnosis, (a.check.name, a.diagnosis,
                                                                                  b.diagnosis)
            if a.diagnosis != b.diagnosis:
                assert not reads_whole(a.diagnosis, a.verdict), (a.check.name, a.diagnosis, b.diagnosis)
                assert WITHHELD in visible_check(a).diagnosis or not NUMBER.search(a.diagnosis)
    assert compared >= 4


def test_a_load_failure_and_a_time_out_read_whole_in_a_hidden_check():
    """The student's own file and line, and the kit's time limit, are no hidden values."""
    from grader.run.visible import visible_check

    check = next(c for c in _hidden_checks() if c.task == "adamw_step")
    syntax = CheckResult(check, "error", "SyntaxError: expected ':' (hero_transformer/train.py line 118), which "
                                         "reads: def zero_grad(self) -> None",
                         verdict={"kind": "load_failed", "file": "hero_transformer/train.py", "line": 118,
                                  "error": "SyntaxError"})
    assert "line 118" in visible_check(syntax).diagnosis
    late = CheckResult(check, "timeout", "it used its 10 s of processor time without answering",
                       verdict={"kind": "timeout", "task": "adamw_step", "during": "probe"})
    assert "its 10 s" in visible_check(late).diagnosis
    # Without a verdict that vouches for it, the numbers go.
    assert "118" not in visible_check(CheckResult(check, FAILED, syntax.diagnosis)).diagnosis


# One mistake of each kind of sentence a hidden check says: a kit's sentence after a case's
# number, a formula with the kit's constants, a static library call on the student's line,
# a crash, a shape, a deviation with sizes computed from hidden inputs.
SENTENCES = ["add_gradient_to_one_side", "log_gradient_is_log", "relu_gradient_for_negative_inputs",
             "rmsnorm_no_eps", "adam_no_bias_correction", "vocab_bos_zero", "decode_keeps_bos",
             "windows_targets_not_shifted", "positions_offset_ignored", "embedding_library_call",
             "attention_cache_wrong_axis", "clip_by_value", "train_step_loss_after_update", "bigram_in_bits",
             "sample_multiplies_by_temperature", "generate_forgets_the_cache", "layer_norm_backward_unpacks_b_t_c",
             "layer_norm_variance_of_raw_x"]


@pytest.fixture(scope="module")
def two_seeds_of_every_sentence():
    return _under_two_seeds(SENTENCES, 15)


def test_no_hidden_value_reaches_a_published_sentence(two_seeds_of_every_sentence):
    """Graded under two seeds, whose hidden inputs differ, two sentences of a hidden check
    that differ only in their numbers are published the same word for word: whatever the
    published one keeps (the kit's constants, the student's own line, the MISTAKES' words)
    holds nothing a hidden input decides, and what such an input decides is withheld or
    said in words."""
    from grader.run.visible import visible_check

    first, second = two_seeds_of_every_sentence
    compared = 0
    for name in first:
        for a, b in zip(first[name], second[name]):
            if not a.check.hidden or PASSED in (a.status, b.status):
                continue
            if NUMBER.sub("#", a.diagnosis) != NUMBER.sub("#", b.diagnosis):
                continue  # two judgements in other words (one seed's draw shows another slip)
            compared += 1
            assert visible_check(a).diagnosis == visible_check(b).diagnosis, (name, a.check.name, a.diagnosis,
                                                                              b.diagnosis)
    assert compared >= 15, compared


def test_a_published_sentence_keeps_the_kits_constants_and_the_students_line(two_seeds_of_every_sentence):
    """Where a sentence quotes the kit's own figures or the student's own line, the published
    hidden check keeps them; a case's number is said in words; a crash's inputs are said
    in words."""
    from grader.run.visible import HIDDEN_INPUTS, WITHHELD, visible_check

    first, _ = two_seeds_of_every_sentence
    shown = {}
    for name, results in first.items():
        for r in results:
            if r.check.hidden and r.status != PASSED:
                shown.setdefault(name, []).append(visible_check(r).diagnosis)

    def said(name: str, *parts: str) -> None:
        assert any(all(p in text for p in parts) for text in shown[name]), (name, parts, shown[name])

    said("add_gradient_to_one_side", "with local gradients (1, 1)")
    said("log_gradient_is_log", "d log(x)/dx is 1/x")
    said("relu_gradient_for_negative_inputs", "relu's local gradient is 0 where x <= 0")
    said("adam_no_bias_correction", "1 - beta1^(t+1)")
    said("windows_targets_not_shifted", "ids[p + 1]")
    said("embedding_library_call", "uses line ")
    assert not any(WITHHELD in text for text in shown["embedding_library_call"]), shown["embedding_library_call"]
    said("bigram_in_bits", "a call: the loss is in bits")
    said("layer_norm_backward_unpacks_b_t_c", HIDDEN_INPUTS)
    said("layer_norm_variance_of_raw_x", f"off by up to {WITHHELD}")


def test_a_hidden_checks_verdict_tells_no_place_or_length_in_its_sentence(two_seeds_of_every_sentence):
    """results.json's extra_data: a hidden check's slots keep their kind and words (a kept
    one its text), never where they stand in the sentence the student does not see."""
    from grader.run.visible import visible_verdict

    first, _ = two_seeds_of_every_sentence
    seen = 0
    for results in first.values():
        for r in results:
            if r.check.hidden and r.verdict and r.verdict.get("slots"):
                seen += 1
                for slot in visible_verdict(r.verdict, True)["slots"]:
                    assert "at" not in slot and "length" not in slot, slot
                    assert slot["kind"] != "hidden" or "text" not in slot, slot
    assert seen >= 5, seen


def test_text_the_code_returned_cannot_pose_as_a_slot():
    """A sentence that quotes what the student's code returned cannot make a value of it
    kept: the marks carry a key drawn when the grader starts."""
    from grader.checks import _slots
    from grader.run.results import CheckResult
    from grader.run.visible import WITHHELD, visible_check

    check = next(c for c in _hidden_checks() if c.task == "decode")
    real = _slots.constant("0.25")
    forged = real.replace(real[1:13], "\ue100" * 12)  # the same shape, another key
    result = CheckResult(check, FAILED, f"decode returned '{forged}' for 0.75 and kept {real}",
                         verdict={"kind": "deviation", "task": "decode"})
    shown = visible_check(result).diagnosis
    assert "\ue100" not in result.diagnosis and "\ue000" not in result.diagnosis
    assert shown == f"decode returned '{WITHHELD}' for {WITHHELD} and kept 0.25", shown
