"""The student's own check tells the course's verdict, task by task: in the release there
is no reference, so each task runs on the student's own parts, and a wrong part must not
fail the right tasks built on it. A task whose formula allows it is judged on its own
parts (what each part received and returned while it ran); any other check that can
only be judged with right parts waits on the part that fails its own checks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grader.checks import catalogue as checks_catalogue
from grader.checks.ch05_block.block import example_1, formula as block_formula, shape
from grader.checks.ch05_block.gelu import exact_values
from grader.checks.ch05_block.layer_norm import example_figures
from grader.checks.ch06_backward.residual_backward import matches_autograd
from grader.checks.ch07_model.lm_forward import cache_matches_full, causal_invariance, formula as lm_forward_formula
from grader.checks.ch07_model.lm_init import forward_runs, parameter_ledger
from grader.qa import own_parts
from grader.qa.catch_table import SEED
from grader.mutants import catalogue as accuracy_catalogue
from grader.run.dependencies import build_order, task_graph
from grader.run.engine import grade
from grader.run.verdicts import apply_waits
from grader.run.processes import Limits
from grader.run.reference import Reference
from grader.run.report import results_json, waiting_line
from grader.run.results import ERROR, FAILED, NOT_IMPLEMENTED, PASSED, WAITING, CheckResult, GradeReport
from grader.run.sandbox import Sandbox
from grader.run.submission import Submission
from grader.run.inside.messages import Failure
from tests.timing import limit

MUTANTS, VARIANTS = accuracy_catalogue()
BY_NAME = {entry.name: entry for entry in [*MUTANTS, *VARIANTS]}
BUILT_ON = sorted({m.task for m in own_parts.entries()}, key=list(checks_catalogue.tasks()).index)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(Limits(check_seconds=limit(5.0))) as box:
        yield box


def released(sources, sandbox, tasks) -> dict[str, CheckResult]:
    """The public checks of these tasks as the release grades them: no reference."""
    report = grade(Submission("test", sources), public_only=True, runner=sandbox, seed=SEED, use_reference=False,
                   tasks=set(tasks))
    return {r.check.name: r for r in report.results}


# ------------------------------------------------------------ the task graph


def test_the_graph_knows_what_each_composing_task_builds_on():
    graph = task_graph()
    assert {"layer_norm", "attention", "feedforward", "block_init"} <= set(graph["block"])
    assert "gelu" in graph["feedforward"]
    assert {"layer_norm", "gelu", "layer_norm_backward", "gelu_backward", "linear_backward"} <= set(
        graph["residual_backward"])
    assert {"block", "embedding", "positions"} <= set(graph["lm_forward"])
    assert {"lm_forward", "sample_next"} <= set(graph["generate"])
    # Chapter 00's primitives are read with the kit's own chain rule, and backward is judged
    # on graphs built with the constructor: neither builds on the other, so neither waits.
    assert graph["micro_value_add"] == () and graph["micro_backward"] == ()
    # Python's operators run chapter 00's primitives where no text names them (traced).
    assert {"micro_value_mul", "micro_value_add"} <= set(graph["micro_rmsnorm"])
    # A leaf builds on nothing, and no task on itself.
    assert graph["layer_norm"] == () and graph["gelu"] == ()
    assert all(task not in parts for task, parts in graph.items())


def test_parts_come_before_what_builds_on_them():
    graph = task_graph()
    order = {task: i for i, task in enumerate(build_order(graph))}
    assert set(order) == set(checks_catalogue.tasks())
    for task, parts in graph.items():
        for part in parts:
            if task not in graph.get(part, ()):  # not a pair that builds on each other
                assert order[part] < order[task], (part, task)


def test_the_release_ships_the_graph(tmp_path):
    from grader.generate import release

    folder, _, _ = release.build(tmp_path, ["05", "07"], run_scan=False)
    shipped = json.loads((folder / "grader" / "checks" / "task_graph.json").read_text(encoding="utf-8"))
    assert set(shipped) == {t.name for c in checks_catalogue.chapters() if c.number in ("05", "07") for t in c.tasks}
    assert "layer_norm" in shipped["block"] and "attention" not in shipped["lm_forward"]  # chapter 04 not opened
    # The bundle reads it, having no reference to compute it from.
    script = ("from grader.run.dependencies import task_graph; import json; "
              "print(json.dumps(task_graph()['block']))")
    shown = subprocess.run([sys.executable, "-c", script], cwd=folder, capture_output=True, text=True,
                           timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == shipped["block"]


# ------------------------------------------------------------ waiting, as data


def _result(name: str, status: str, own: bool = False) -> CheckResult:
    check = next(c for c in checks_catalogue.all_checks() if c.name == name)
    return CheckResult(check, status, "a diagnosis about the block", on_own_parts=own)


def test_a_failure_waits_on_the_failing_part_and_nothing_else():
    graph = task_graph()
    results = [_result(example_figures.name, FAILED), _result(exact_values.name, PASSED),
               _result(example_1.name, FAILED), _result(block_formula.name, FAILED, own=True),
               _result(cache_matches_full.name, ERROR)]
    apply_waits(results, graph)
    statuses = {r.check.name: (r.status, r.waiting_on) for r in results}
    assert statuses[example_figures.name] == (FAILED, ())
    assert statuses[example_1.name] == (WAITING, ("layer_norm",))
    # Judged on its own parts: its failure is the block's own, and it makes later tasks wait on the block
    # (while a check that raised, was refused or could not judge the wiring waits like any other).
    assert statuses[block_formula.name] == (FAILED, ())
    assert statuses[cache_matches_full.name] == (WAITING, ("layer_norm", "block"))
    assert "'layer_norm'" in results[2].diagnosis and "block" not in results[2].diagnosis


def test_a_task_that_only_waits_makes_nothing_wait():
    results = [_result(example_figures.name, FAILED), _result(example_1.name, FAILED),
               _result(cache_matches_full.name, FAILED)]
    apply_waits(results, task_graph())
    assert results[2].waiting_on == ("layer_norm",)


def test_a_task_not_started_keeps_its_status_and_makes_later_checks_wait():
    results = [_result(example_figures.name, NOT_IMPLEMENTED),
               _result(example_1.name, NOT_IMPLEMENTED), _result(shape.name, ERROR)]
    apply_waits(results, task_graph())
    assert [r.status for r in results] == [NOT_IMPLEMENTED, NOT_IMPLEMENTED, WAITING]


def test_waiting_is_in_the_totals_and_the_json():
    results = [_result(example_figures.name, FAILED), _result(example_1.name, FAILED),
               _result(matches_autograd.name, FAILED)]
    apply_waits(results, task_graph())
    report = GradeReport("test", results, "portable", "none")
    assert waiting_line(report).startswith("5 points wait on layer_norm: fix it first")
    data = results_json(report)
    assert data["score"] == 0
    assert "waiting on layer_norm" in data["tests"][1]["tags"] and data["tests"][1]["status"] == "failed"
    assert data["extra_data"]["chapters"]["05"]["waiting"] == 1
    assert "wait on layer_norm" in data["output"]


# ------------------------------------------------------- judged on own parts


def _two_mistakes(part: str, task: str) -> list[tuple[object, dict]]:
    return [(entry, entry.apply(BY_NAME[part].apply(Reference.available().sources)))
            for entry in [*MUTANTS, *VARIANTS] if entry.task == task]


# Mutants the wiring among recorded parts cannot tell on a wrong part, and why.
OUT_OF_REACH = {
    "block_attention_tuple_added": "the block raises (a pair added to a tensor): nothing was recorded to judge, "
                                   "so it waits on the failing part",
    "lm_forward_logits_to_float32": "a precision slip: on a wrong part the float64 answer is out of reach, so "
                                    "float32 logits cannot be told from float64 ones",
}


@pytest.mark.parametrize(("part", "task", "check"), [
    ("layer_norm_variance_d_minus_1", "block", block_formula.name),
    ("gelu_tanh", "block", block_formula.name),
    ("layer_norm_variance_d_minus_1", "lm_forward", lm_forward_formula.name),
    ("block_post_ln", "lm_forward", lm_forward_formula.name),
])
def test_the_wiring_judge_names_the_tasks_own_mistake_on_wrong_parts(part, task, check, sandbox):
    """Every mutant of the task that its formula check catches with certified parts is
    caught and named by that check on a wrong part too (but those OUT_OF_REACH); every
    right body passes it."""
    for entry, sources in _two_mistakes(part, task):
        result = released(sources, sandbox, {task, BY_NAME[part].task})[check]
        if entry.name in OUT_OF_REACH:
            continue
        if entry in VARIANTS or check not in entry.expect:
            if entry in VARIANTS:
                assert result.status == PASSED, (entry.name, result.diagnosis)
            continue
        assert result.status == FAILED, (entry.name, result.status, result.diagnosis)
        assert entry.keyword.lower() in result.diagnosis.lower(), (entry.name, result.diagnosis)


def test_a_block_that_hides_a_part_from_the_recording_is_told_so_or_waits(sandbox):
    sources = dict(BY_NAME["layer_norm_variance_d_minus_1"].apply(Reference.available().sources))
    model = sources["model.py"]
    direct = model.replace("self.feedforward(self.ln_feedforward(hidden))",
                           "self.feedforward.forward(self.ln_feedforward(hidden))", 1)
    assert direct != model
    sources["model.py"] = direct
    # LayerNorm not checked in this run (a run of some tasks, not of whole chapters):
    # nothing to wait on, and the block is told why it cannot be judged.
    alone = released(sources, sandbox, {"block"})[block_formula.name]
    assert alone.status == FAILED
    assert "self.feedforward(...)" in alone.diagnosis and "not its .forward" in alone.diagnosis
    # Checked with it: the wrong LayerNorm fails its own checks, and the block waits on it.
    beside = released(sources, sandbox, {"block", "layer_norm"})[block_formula.name]
    assert (beside.status, beside.waiting_on) == (WAITING, ("layer_norm",))


# ------------------------------------------------------- one chapter at a time


@pytest.mark.parametrize(("mutant", "chapter", "part_chapter"), [
    ("layer_norm_variance_d_minus_1", "06", "05"),
    ("attention_no_causal_mask", "05", "04"),
])
def test_a_chapter_alone_gives_the_whole_runs_verdicts_and_names_the_part(mutant, chapter, part_chapter, sandbox):
    """`check.py 06` with a wrong chapter 05 LayerNorm: the part's chapter is not in the
    run, yet its checks are run quietly, so chapter 06's verdicts are those of a run of
    both chapters, and what waits names the part and where to see why."""
    submission = Submission("test", BY_NAME[mutant].apply(Reference.available().sources))
    alone = grade(submission, [chapter], public_only=True, runner=sandbox, seed=SEED, use_reference=False)
    both = grade(submission, [part_chapter, chapter], public_only=True, runner=sandbox, seed=SEED,
                 use_reference=False)
    assert {r.check.chapter for r in alone.results} == {chapter}
    seen = {r.check.name: r.status for r in alone.results}
    assert seen == {r.check.name: r.status for r in both.results if r.check.chapter == chapter}
    waiting = [r for r in alone.results if r.status == WAITING]
    assert waiting and all(r.waiting_on == (BY_NAME[mutant].task,) for r in waiting)
    task = BY_NAME[mutant].task
    assert all(f"'{task}' (chapter {part_chapter})" in r.diagnosis and f"CH={part_chapter}" in r.diagnosis
               for r in waiting), waiting[0].diagnosis
    assert f"wait on {task} (chapter {part_chapter})" in waiting_line(alone)


def test_a_package_that_does_not_import_is_one_finding_and_nothing_waits(sandbox):
    from grader.run.report import render
    from grader.run.results import LOAD_FAILED
    from rich.console import Console

    sources = dict(Reference.available().sources)
    sources["model.py"] = sources["model.py"].replace("centred = x - mean", "centred = x - mean)", 1)
    report = grade(Submission("test", sources), ["05"], public_only=True, runner=sandbox, seed=SEED,
                   use_reference=False)
    assert report.results and all(r.cause == LOAD_FAILED for r in report.results)
    assert {r.status for r in report.results} == {ERROR} and waiting_line(report) is None
    assert len({r.diagnosis for r in report.results}) == 1 and "SyntaxError" in report.results[0].diagnosis
    console = Console(record=True, width=120)
    render(report, console)
    shown = console.export_text()
    assert shown.count("SyntaxError") == 1 and "Fix this first" in shown and "wait" not in shown


def test_a_crash_inside_another_tasks_function_names_that_task():
    from grader.run.feedback import Audience, remote_failure

    sources = dict(Reference.available().sources)
    line = sources["model.py"].splitlines().index("        centred = x - mean") + 1
    audience = Audience(Submission("test", sources), None, for_the_author=True)
    block = checks_catalogue.tasks()["block"]
    error = Failure(type="ValueError", message="not enough values to unpack", where=f"submission/model.py:{line}",
                    line="centred = x - mean")
    _, shown, _ = remote_failure(block, error, audience)
    assert "in LayerNorm.forward: task 'layer_norm' of chapter 05" in shown
    # Raised in the task's own function: nothing more to say.
    _, own, _ = remote_failure(checks_catalogue.tasks()["layer_norm"], error, audience)
    assert "task 'layer_norm'" not in own


# ------------------------------------------ the whole catalogue, as the release grades it


@pytest.mark.slow
@pytest.mark.parametrize("task", BUILT_ON)
def test_a_wrong_part_fails_no_right_task(task, sandbox):
    """A mutant of every task others build on, graded as the release grades it: each check
    of another task that does not pass passes as the course grades it (certified parts),
    and here waits on the mutated task. The first of each task's mutants here, to keep
    the suite within CI's time; `make mutants` runs every one of the 210
    (python -m grader.qa.own_parts), in about five minutes of two cores."""
    reference = Reference.available()
    found = [own_parts.downstream(m, sandbox, reference) for m in own_parts.entries({task})[:1]]
    for entry in found:
        assert all(row[3] == PASSED for row in entry.not_passed), (entry.mutant, entry.not_passed)
        assert not entry.wrong(), (entry.mutant, entry.wrong())


def test_the_stub_package_scores_nothing_and_waits_on_nothing(sandbox):
    from tests.conftest import STUDENT_PACKAGE
    from grader.regions import package_sources

    report = grade(Submission("stubs", package_sources(STUDENT_PACKAGE)), public_only=True, runner=sandbox,
                   seed=SEED, use_reference=False, tasks={"layer_norm", "gelu", "feedforward", "block"})
    assert report.score == 0
    assert {r.status for r in report.results} <= {NOT_IMPLEMENTED, ERROR, WAITING}
    # What waits, waits on a part the block builds on (chapter 04's attention, checked
    # quietly since the block builds on it), never on a task of another kind.
    assert all(set(r.waiting_on) <= {"layer_norm", "gelu", "feedforward", *task_graph()["block"]}
               for r in report.results)


def test_the_recorder_keeps_copies_not_the_parts_own_tensors():
    from grader.checks._api import PartCalls

    norm = torch.nn.LayerNorm(3)
    x = torch.randn(2, 3)
    with PartCalls({"norm": norm}) as parts:
        y = norm(x)
        norm.forward(x)  # not seen: the judge says so rather than judging blind
    x.add_(1.0)
    assert len(parts.calls) == 1 and parts.calls[0]["part"] == "norm"
    assert torch.equal(parts.calls[0]["output"], y.detach()) and not torch.equal(parts.calls[0]["input"], x)
    norm(x)
    assert len(parts.calls) == 1  # the hooks are gone once the probe is done


def test_a_layer_norm_that_unpacks_three_axes_keeps_every_point_wherever_it_is_called(sandbox):
    """The chapter 05 lesson promises LayerNorm [B, T, d], so `B, T, C = x.shape` is right:
    every chapter that runs the student's own LayerNorm (the block, the half-block's
    backward, the model) gives it full marks in the bundle's check."""
    sources = BY_NAME["layer_norm_unpacks_b_t_c"].apply(Reference.available().sources)
    assert "B, T, C = x.size()" in sources["model.py"]
    report = grade(Submission("test", sources), ["05", "06", "07"], public_only=True, runner=sandbox, seed=SEED,
                   use_reference=False)
    assert report.results and report.score == report.max_score, [
        (r.check.name, r.status, r.diagnosis) for r in report.results if r.status != PASSED]


# ------------------------------------- a check that runs a task taught after its own

def test_every_check_that_runs_a_later_task_names_it():
    """Traced on the reference: a public check whose probe runs the function of a task the
    lessons teach after its own declares that task (Check.runs_later), so that a wrong
    later part makes it wait instead of costing its right task; and nothing else is
    declared. (lm_init's forward_runs runs lm_forward; chapter 00's primitives once ran
    the student's backward, and now run the kit's own chain rule.)"""
    from grader.run.dependencies import traced_parts

    reference = Reference.available()
    taught = list(checks_catalogue.tasks())
    wrong = {}
    for check in checks_catalogue.all_checks():
        if check.hidden:
            continue
        ran = traced_parts(reference, check)
        later = {t for t in ran if taught.index(t) > taught.index(check.task)}
        if later != set(check.runs_later):
            wrong[check.name] = (sorted(later), check.runs_later)
    assert not wrong, wrong
    assert any(c.runs_later for c in checks_catalogue.all_checks())


def test_a_check_that_runs_a_later_task_waits_on_it_and_blames_nothing_before_it():
    results = [_result(forward_runs.name, ERROR), _result(parameter_ledger.name, PASSED),
               _result(causal_invariance.name, FAILED)]
    apply_waits(results, task_graph())
    statuses = {r.check.name: (r.status, r.waiting_on) for r in results}
    assert statuses[forward_runs.name] == (WAITING, ("lm_forward",))
    assert statuses[causal_invariance.name] == (FAILED, ())
    # When the later task is right, the check's failure is its own task's.
    alone = [_result(forward_runs.name, FAILED), _result(causal_invariance.name, PASSED)]
    apply_waits(alone, task_graph())
    assert alone[0].status == FAILED and not alone[0].waiting_on


def test_a_wrong_forward_costs_the_right_init_nothing(sandbox):
    """As the release grades it: a language model's forward that returns its logits cut to
    one position keeps lm_init's points (its forward_runs waits on lm_forward), and
    lm_forward's own checks fail without waiting on lm_init."""
    reference = Reference.available()
    sources = dict(reference.sources)
    text = sources["model.py"]
    marker = "### END SOLUTION"
    start = text.index("### BEGIN SOLUTION lm_forward")
    end = text.index(marker, start)
    body = text[start:end]
    assert "return logits, loss, presents" in body, body
    cut = body.replace("return logits, loss, presents", "return logits[:, -1:], loss, presents")
    sources["model.py"] = text[:start] + cut + text[end:]
    results = released(sources, sandbox, {"lm_init", "lm_forward"})
    init = {name: r for name, r in results.items() if ".lm_init." in name}
    forward = {name: r for name, r in results.items() if ".lm_forward." in name}
    assert init[forward_runs.name].status == WAITING, init[forward_runs.name].diagnosis
    assert init[forward_runs.name].waiting_on == ("lm_forward",)
    assert all(r.status == PASSED for name, r in init.items() if name != forward_runs.name), \
        {n: r.diagnosis for n, r in init.items() if r.status != PASSED}
    assert any(r.status == FAILED for r in forward.values())
    assert not any(r.waiting_on for r in forward.values())
