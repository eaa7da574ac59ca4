"""Diagnoses from what ran: the precision a check speaks of is the dtype the code's own
operators used (never a guess from the size of an error), a crash on a shape says what the
call passed and what the lesson promises, a slip the kit can set aside does not hide the
others, a small steady offset is told with its size, and an operator that raised in a probe
run without the recorder is named from the probe run again under it."""

from __future__ import annotations

import pytest
import torch

from grader.checks import _api
from grader.checks._api import (
    SetAside, as_int64, float32_close, int64_ids_problem, precision_known, small_offset, steady_offset,
)
from grader.checks.ch00_micro.micro_value_log import value_and_gradient
from grader.checks.ch04_attention.attention import float64_precision as attention_float64_precision
from grader.checks.ch05_block.gelu import exact_values
from grader.checks.ch05_block.gelu import float64_precision as gelu_float64_precision
from grader.checks.ch06_backward.layer_norm_backward import finite_differences, matches_autograd
from grader.checks.ch06_backward.layer_norm_backward.hidden import matches_reference
from grader.checks.ch09_sampling.generate import cached_equals_recompute
from grader.checks.ch09_sampling.sample_next import follows_softmax, seeded_draws_repeat
from grader.mutants import catalogue as accuracy_catalogue, mutant, patch
from grader.run import worker_session
from grader.run.inside import op_rules
from grader.run.reference import Reference
from tests.hostile import assert_no_points, run_body

F64 = torch.float64


def _grade(entry, sandbox):
    from grader.qa.catch_table import run_entry
    outcome = run_entry(entry, Reference.available(), sandbox)
    return {r.check.name: r for r in outcome.failed}, outcome


def _catalogued(name):
    return next(m for m in accuracy_catalogue()[0] if m.name == name)


# ------------------------------------------------------------------ the recorder


def _compiled(source: str, filename: str):
    scope: dict = {}
    exec(compile(source, filename, "exec"), {"torch": torch}, scope)
    return scope["run"]


def test_the_recorder_notes_the_codes_first_float32_operator():
    run = _compiled("def run(x):\n    return (x.float() * 2).double()\n", "submission/model.py")
    with op_rules.noting_precision(True):
        run(torch.ones(2, 3, dtype=F64))
    assert op_rules.LOW_PRECISION == [{"op": "aten._to_copy", "dtype": "float32", "shape": [2, 3], "made": True}]


def test_the_recorder_leaves_out_what_is_not_the_codes_own():
    """A probe's or a certified part's float32 (model parameters made before .double())
    is not the code's."""
    run = _compiled("def run(x):\n    return x.float()\n", "/kit/grader/checks/probe.py")
    with op_rules.noting_precision(True):
        run(torch.ones(3, dtype=F64))
    assert op_rules.LOW_PRECISION == []
    own = _compiled("def run(x):\n    return x * 2\n", "submission/model.py")
    with op_rules.noting_precision(True):
        own(torch.ones(3, dtype=F64))
    assert op_rules.LOW_PRECISION == []


def test_the_recorder_climbs_through_a_probes_own_mode():
    """Chapter 04's probe watches the code's operators with a mode of its own: its handler
    stands between the code and the operator."""

    class Watching(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    run = _compiled("def run(x):\n    return torch.tensor(0.5) * x\n", "submission/model.py")
    with op_rules.noting_precision(True), Watching():
        run(torch.ones(4, dtype=F64))
    assert op_rules.LOW_PRECISION and op_rules.LOW_PRECISION[0]["op"] == "aten.lift_fresh"


def test_nothing_is_noted_unless_asked():
    run = _compiled("def run(x):\n    return x.float()\n", "submission/model.py")
    with op_rules.noting_precision(False):
        run(torch.ones(3, dtype=F64))
    assert op_rules.LOW_PRECISION == []


# ------------------------------------------------------------ judging with it


def test_float32s_leniency_follows_what_ran():
    right = torch.linspace(-3, 3, 7, dtype=F64)
    float32_result = right.float().double() + 1e-7
    with precision_known() as leaned:  # not known: lenient, and the leaning noted
        assert float32_close(float32_result, right)
    assert leaned
    with precision_known(False) as leaned:  # every operator ran in float64: the check's own tolerance
        assert not float32_close(float32_result, right)
    with precision_known({"op": "aten.mul", "dtype": "float32", "shape": [7], "made": False}):
        assert float32_close(float32_result, right)
        assert "(aten.mul on a float32 tensor of shape [7])" in _api.float32_verdict(
            "y", "your code", "x's dtype", float32_result, right)
    with precision_known() as leaned:  # float64's own rounding needs no word from the worker
        assert float32_close(right + 1e-15, right)
    assert not leaned


def test_a_right_float64_answer_is_never_probed_again(sandbox, monkeypatch):
    """The probe runs again only where a judge leaned on float32: never for the reference."""
    again = []
    original = worker_session.TaskRun._precision_ran
    monkeypatch.setattr(worker_session.TaskRun, "_precision_ran",
                        lambda self, check, sent: again.append(check.name) or original(self, check, sent))
    entry = next(v for v in accuracy_catalogue()[1] if v.task == "gelu")
    _, outcome = _grade(entry, sandbox)
    assert outcome.score == outcome.max_score and again == []


def test_a_rounded_constant_in_float64_is_a_formula_deviation(sandbox):
    failed, _ = _grade(_catalogued("gelu_rounded_constant"), sandbox)
    said = failed[exact_values.name].diagnosis
    assert "every operation of your code ran in float64" in said and "1e-09" in said
    assert "float32" not in said
    assert all("computes in float32" not in r.diagnosis for r in failed.values())


def test_float32_is_named_by_the_operator_that_ran(sandbox):
    failed, _ = _grade(_catalogued("gelu_float32_constant"), sandbox)
    assert set(failed) == {gelu_float64_precision.name}
    assert "torch.tensor(...) without a dtype made a float32 number: aten.lift_fresh" in \
        failed[gelu_float64_precision.name].diagnosis
    failed, _ = _grade(_catalogued("attention_softmax_in_float32"), sandbox)
    assert set(failed) == {attention_float64_precision.name}
    assert "aten._to_copy" in failed[attention_float64_precision.name].diagnosis


# ----------------------------------------------------------- a crash explained


def test_a_crash_on_unpacking_says_what_the_lesson_promises(sandbox):
    failed, _ = _grade(_catalogued("layer_norm_backward_unpacks_b_t_c"), sandbox)
    public = failed[finite_differences.name].diagnosis
    assert ("unpacks a sequence into 3 names there, the lesson promises x of any leading shape ([..., d]), and "
            "this call passed x of shape [3, 4]: read the axes you need by index (x.shape[-1])") in public
    assert "its message is kept for course staff" in public
    hidden = failed[matches_reference.name]
    assert hidden.check.hidden and "x of shape [2, 2, 3, 7]" in hidden.diagnosis


def test_the_unpacking_is_read_from_the_instruction_not_the_message(sandbox):
    """A ValueError raised with unpacking's words is no unpacking."""
    entry = mutant("lnb_raises_unpacking_words", "layer_norm_backward", """
        raise ValueError("too many values to unpack (expected 2)")
    """, matches_autograd, "ValueError", "a ValueError in unpacking's words")
    failed, _ = _grade(entry, sandbox)
    assert failed and all("unpacks" not in r.diagnosis for r in failed.values())


# ------------------------------------------------------- one slip, the others too


def test_ids_of_another_integer_dtype_are_judged_again_as_int64(sandbox):
    failed, outcome = _grade(_catalogued("sample_int32_ids"), sandbox)
    said = failed[follows_softmax.name].diagnosis
    assert said.startswith("the ids at temperature 1.0 should be int64 ids (torch.long), got torch.int32")
    assert said.endswith("with that fixed, the rest of this check holds")
    assert outcome.score < outcome.max_score  # the points stay as they are
    no_generator = mutant("int32_ids_global_generator", "sample_next", patch("""
        - return torch.multinomial(probs, 1, generator=generator).reshape(lead)
        + return torch.multinomial(probs, 1).reshape(lead).int()
    """), seeded_draws_repeat, "global random state", "int32 ids drawn without the generator")
    failed, _ = _grade(no_generator, sandbox)
    said = failed[seeded_draws_repeat.name].diagnosis
    assert "got torch.int32; with that fixed: sample_next used or reseeded torch's global random state" in said


def test_set_aside_helpers():
    assert int64_ids_problem(torch.tensor([1, 2])) is None
    problem = int64_ids_problem(torch.tensor([1, 2], dtype=torch.int32))
    assert isinstance(problem, SetAside)
    fixed = problem.corrected({"value": torch.tensor([1], dtype=torch.int16), "p": torch.ones(2), "b": [True]})
    assert fixed["value"].dtype == torch.long and fixed["p"].dtype == torch.float32 and fixed["b"] == [True]
    assert not isinstance(int64_ids_problem(torch.tensor([1.0])), SetAside)  # floats are no ids to correct
    assert as_int64((torch.tensor([True]),))[0].dtype == torch.bool


# ------------------------------------------------------------- small offsets


def test_steady_offsets_and_scales_are_told_with_their_size():
    right = torch.linspace(-2, 2, 9, dtype=F64)
    assert steady_offset(right + 1e-6, right).startswith("everywhere by about +1e-06: one constant added")
    assert steady_offset(right * (1 + 2e-7), right).startswith("everywhere by a factor of about 1 + 2e-07: a small")
    assert steady_offset(right * 4, right).startswith("everywhere 4 times the right value: a factor missing")
    assert steady_offset(right + 0.5, right).endswith("(a constant term, a bias)")
    assert steady_offset(right + 1e-6 * right**2, right) == ""  # no steady slip: nothing said
    assert steady_offset(right, right) == "" and steady_offset(torch.ones(1), torch.zeros(1)) == ""
    assert small_offset(0.9162911319, 0.9162907319).startswith(" (off by +4e-07, a relative +4.4e-07")
    assert small_offset(1.5, 1.0) == "" and small_offset(1.0, 1.0) == ""


def test_an_eps_in_a_log_is_told_its_size(sandbox):
    failed, _ = _grade(_catalogued("log_with_eps"), sandbox)
    said = failed[value_and_gradient.name].diagnosis
    assert "gave 0.9162911319, expected 0.9162907319 (off by +4e-07" in said


@pytest.mark.parametrize("name", ["gelu_constant_offset"])
def test_a_stray_constant_is_named(sandbox, name):
    failed, _ = _grade(_catalogued(name), sandbox)
    assert "everywhere by about +1e-06: one constant added where none belongs" in \
        failed[exact_values.name].diagnosis


def test_a_crash_on_a_batched_prompt_says_what_the_lesson_promises(sandbox):
    """Code written for a 1-D prompt, given a [B, T] one: the sentence puts the lesson's
    promise beside the shape the call passed (values the kit chose, never the message)."""
    entry = mutant("generate_one_row_prompt", "generate", patch("""
        - ids = torch.as_tensor(prompt_ids, dtype=torch.long)
        + ids = torch.cat([torch.as_tensor(prompt_ids, dtype=torch.long), torch.zeros(1, dtype=torch.long)])
    """), cached_equals_recompute, "[T] or [B, T]", "a prompt taken as one row")
    failed, _ = _grade(entry, sandbox)
    crashes = [r for r in failed.values() if "raised RuntimeError" in r.diagnosis and not r.check.hidden]
    assert crashes, {name: r.diagnosis for name, r in failed.items()}
    assert all("the lesson promises prompt of shape [T] or [B, T], and this call passed prompt of shape [" in r.diagnosis
               for r in crashes)


# ------------------------------------------- the operator that raised, from a second run


def test_a_failing_operator_is_named_from_the_probe_run_again(reference, sandbox):
    # merge_heads keeps no operator rule: its probes run without the recorder, and the
    # probe that raised runs once more with it, to name the operator that raised.
    body = """
        B, _, T, _ = x.shape
        return x.transpose(1, 2).reshape(B, T, self.n_heads * self.d_head + 1)
    """
    results = run_body(reference, sandbox, "merge_heads", body)
    assert_no_points(results)
    said = [r.diagnosis for r in results if r.status == "error"]
    # (a size torch refuses before any operator runs is named by no operator)
    assert any(", in aten.view on a float64 tensor of shape [2, 5, 3, 4]" in text for text in said), said
