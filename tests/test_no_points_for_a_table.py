"""A task's public checks use inputs every student can read, so code that only looks their
answers up (a table computed elsewhere) passes them. When graded, code that answers the
published inputs only earns none of its task's public points
(grader.run.verdicts.published_inputs_only): it answers none of the hidden checks (inputs
drawn for each grading), and either passes every public check or gives a trivial answer
(an input handed back, zeros) on a drawn input. A slip computes a wrong answer somewhere,
or crashes on a published input too, and keeps what passed. The kit's own table of every task (grader.qa.trivial_bodies, kind "table")
scores 0 beside the other bodies that compute nothing (tests/test_gating_and_confusions.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grader.checks import catalogue
from grader.checks.ch05_block.gelu import exact_values, odd_part
from grader.checks.ch05_block.gelu.hidden import matches_reference
from grader.qa.trivial_bodies import trivial_entries
from grader.run.verdicts import gated, kind_of_answer, published_inputs_only
from grader.run.reference import Reference
from grader.run.results import COMPUTED, ERROR, FAILED, GRADER_FAILED, PASSED, RAISED, TRIVIAL, CheckResult

ROOT = Path(__file__).resolve().parent.parent


def _upload_with(entry, root: Path) -> Path:
    """The reference with the entry's body in place, as a folder a TA would grade."""
    package = root / "hero_transformer"
    package.mkdir(parents=True)
    for rel, text in entry.apply(Reference.available().sources).items():
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        (package / rel).write_text(text, encoding="utf-8")
    return root


def test_a_table_of_the_published_gelu_answers_earns_no_point_when_graded(tmp_path):
    table = next(t for t in trivial_entries() if t.name == "gelu_table")
    upload = _upload_with(table, tmp_path / "upload")
    out = tmp_path / "results.json"
    done = subprocess.run([sys.executable, "-m", "grader", "grade", str(upload), "--chapters", "05", "--json", str(out),
                           "--allow-weak-sandbox"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.is_file(), done.stdout + done.stderr
    tests = {t["name"]: t for t in json.loads(out.read_text())["tests"]}
    gelu = {name: t for name, t in tests.items() if name.startswith("ch05.gelu.")}
    public = {name: t for name, t in gelu.items() if t["visibility"] == "visible" and "hidden" not in t["tags"]}
    assert public and sum(t["score"] for t in gelu.values()) == 0
    for name, t in public.items():
        assert t["extra_data"]["verdict"] == {"kind": "public_only", "task": "gelu",
                                              "on": [matches_reference.name]}, name
        assert "published inputs only" in t["output"], name
    # Every other task of the chapter is the reference's, and keeps every point.
    others = [t for name, t in tests.items() if not name.startswith("ch05.gelu.")]
    assert others and all(t["score"] == t["max_score"] for t in others)


def test_the_table_passes_the_students_own_check(tmp_path):
    """No hidden check runs in `check`: the public checks pass there (the student's own check
    says what the public inputs show; what they cannot show costs points when graded)."""
    table = next(t for t in trivial_entries() if t.name == "gelu_table")
    upload = _upload_with(table, tmp_path / "upload")
    out = tmp_path / "check.json"
    subprocess.run([sys.executable, "-m", "grader", "check", str(upload / "hero_transformer"), "--chapters", "05",
                    "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    tests = {t["name"]: t for t in json.loads(out.read_text())["tests"]}
    gelu = [t for name, t in tests.items() if name.startswith("ch05.gelu.")]
    assert gelu and all(t["status"] == "passed" for t in gelu)


@pytest.mark.parametrize("task", sorted(catalogue.tasks()))
def test_every_task_has_a_check_on_inputs_drawn_for_each_grading(task):
    """Where a task had none, a table of its public answers would keep every point."""
    def drawn(check, seed):
        return check.make_inputs(torch.Generator().manual_seed(seed + sum(map(ord, check.name))))

    def differ(a, b) -> bool:
        if isinstance(a, torch.Tensor):
            return not (isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b))
        if isinstance(a, dict):
            return a.keys() != b.keys() or any(differ(a[k], b[k]) for k in a)
        if isinstance(a, (list, tuple)):
            return len(a) != len(b) or any(differ(x, y) for x, y in zip(a, b))
        return a != b

    hidden = [c for c in catalogue.all_checks() if c.task == task and c.hidden]
    assert any(differ(drawn(c, 1), drawn(c, 2)) for c in hidden), task


def _result(name: str, status: str, verdict: dict | None = None, answer: str = COMPUTED,
            cause: str = "") -> CheckResult:
    check = next(c for c in catalogue.all_checks() if c.name == name)
    return CheckResult(check, status, cause=cause, verdict=verdict, answer=answer)


def test_public_points_wait_for_a_computation_on_inputs_drawn_for_the_grading():
    public = [_result(exact_values.name, PASSED), _result(odd_part.name, PASSED)]
    crashed = _result(matches_reference.name, ERROR, {"kind": "crash", "task": "gelu"})
    caught = _result(matches_reference.name, FAILED, {"kind": "deviation", "task": "gelu"}, RAISED)
    input_back = _result(matches_reference.name, FAILED, {"kind": "mistake", "task": "gelu",
                                                                 "mistake": "identity"})
    zeros = _result(matches_reference.name, FAILED, {"kind": "deviation", "task": "gelu"}, TRIVIAL)
    skipped = _result(odd_part.name, FAILED, {"kind": "deviation", "task": "gelu"})
    # Every public check passes, and the drawn inputs get no answer the code computed.
    for hidden in (crashed, caught, input_back, zeros):
        withheld = published_inputs_only([*public, hidden])
        assert set(withheld) == {exact_values.name, odd_part.name}, hidden.verdict
        said = gated(public[0], {}, withheld[exact_values.name])
        assert said.status == FAILED and said.verdict["kind"] == "public_only"
        assert "published inputs only" in said.diagnosis
        assert gated(hidden, {}, withheld.get(hidden.check.name, ())) is hidden  # keeps its own verdict
    # A public check failed on purpose changes nothing where a drawn input got a trivial answer.
    for hidden in (input_back, zeros):
        assert exact_values.name in published_inputs_only([public[0], skipped, hidden])
    # A slip computes a wrong answer on the drawn inputs (named or not), or crashes there
    # and fails a published check too: what passed keeps its points.
    tanh = _result(matches_reference.name, FAILED, {"kind": "mistake", "task": "gelu", "mistake": "tanh"})
    off = _result(matches_reference.name, FAILED, {"kind": "deviation", "task": "gelu"})
    assert published_inputs_only([*public, tanh]) == {} and published_inputs_only([*public, off]) == {}
    assert published_inputs_only([public[0], skipped, crashed]) == {}
    # So does code that passes a hidden check, a run without hidden checks (the student's
    # own check), and a run where the grader failed on a check of its own.
    assert published_inputs_only([*public, _result(matches_reference.name, PASSED)]) == {}
    assert published_inputs_only(public) == {}
    broken = _result(matches_reference.name, ERROR, cause=GRADER_FAILED)
    assert published_inputs_only([*public, broken]) == {}


def test_what_an_answer_was_is_told_beside_the_right_one():
    x = torch.randn(3, 4, dtype=torch.float64)
    inputs, right = {"x": x}, {"y": x.exp()}
    assert kind_of_answer({"y": x.exp() + 1}, inputs, right) == COMPUTED
    assert kind_of_answer({"y": x.clone()}, inputs, right) == TRIVIAL
    assert kind_of_answer({"y": 0.5 * x}, inputs, right) == TRIVIAL
    assert kind_of_answer({"y": torch.zeros(3, 4)}, inputs, right) == TRIVIAL
    assert kind_of_answer(None, inputs, right) == TRIVIAL
    assert kind_of_answer({"raised": {"type": "LookupError"}}, inputs) == RAISED
    assert kind_of_answer({"error": "LookupError", "cats": []}, inputs) == RAISED
    # Where the right answer looks trivial itself, or the check has none to tell by,
    # nothing is told from the answer: an optimizer keeps the tensors it was given.
    assert kind_of_answer({"params": [x]}, inputs, {"params": [x]}) == COMPUTED
    assert kind_of_answer({"y": x.clone()}, inputs) == COMPUTED
    # Plain Python's numbers (chapter 00's): a list of floats, and each key's numbers across
    # a list of cases, are told as tensors are; a check with no expected answer asks the
    # reference's, only of an answer that looks trivial.
    logits = {"logits": [0.5, -1.2, 2.0]}
    probabilities = {"data": [0.28, 0.05, 0.67]}
    assert kind_of_answer({"data": [0.0, 0.0, 0.0]}, logits, probabilities) == TRIVIAL
    assert kind_of_answer({"data": [0.0, 0.0, 0.0]}, logits, None, lambda: {"data": [1 / 3] * 3}) == COMPUTED
    assert kind_of_answer({"data": [0.5, -1.2, 2.0]}, logits, None, lambda: probabilities) == TRIVIAL
    assert kind_of_answer({"data": [0.3, 0.1, 0.6]}, logits, None, lambda: 1 / 0) == COMPUTED  # never asked
    # A multiple of the input is no sign there: a right RMSNorm gives one.
    assert kind_of_answer({"data": [0.25, -0.6, 1.0]}, logits, probabilities) == COMPUTED
    cases = {"cases": [{"op": "add", "x": [1.5, -2.0]}, {"op": "add", "x": [0.25, 3.0]}]}
    sums = [{"data": -0.5}, {"data": 3.25}]
    assert kind_of_answer([{"data": 1.5}, {"data": 0.25}], cases, sums) == TRIVIAL  # a handed back
    assert kind_of_answer([{"data": -0.5}, {"data": 3.0}], cases, sums) == COMPUTED
    # Token ids (ints) are no measure of computing.
    assert kind_of_answer({"ids": [3, 3, 3]}, {"text": "aaa"}, {"ids": [1, 2, 3]}) == COMPUTED


# What a student who reads the checks writes: the answers of the public inputs, computed
# elsewhere, and on every other input something cheap that one public check accepts (or
# nothing at all), failing another public check on purpose so that not every one passes.
GELU_TABLE_SKIPPING_A_CHECK = """
table = {}
for published in (torch.tensor([-4.0, -3.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 3.0, 4.0], dtype=torch.float64),
                  torch.linspace(-4.0, 4.0, 33, dtype=torch.float64).reshape(3, 11)):
    table[tuple(published.reshape(-1).tolist())] = 0.5 * published * (1.0 + torch.erf(published / math.sqrt(2.0)))
key = tuple(x.reshape(-1).tolist())
if key in table:
    return table[key].to(x.dtype).reshape(x.shape)
return x
"""

GELU_TABLE_THEN_ZEROS = GELU_TABLE_SKIPPING_A_CHECK.replace("return x\n", "return torch.zeros_like(x)\n")

# A fallback that breaks the grader's reading of the answer (a dict the wire's own objects
# are told by) is no computation either.
ADD_TABLE_THEN_A_FORGED_TENSOR = """
if (self.data, getattr(other, "data", other)) in {(1.5, -2.25), (1.5, 2.5), (-0.75, 2.5), (1.5, 1.5)}:
    other = other if isinstance(other, Value) else Value(other)
    return Value(self.data + other.data, (self, other), (1.0, 1.0))
out = Value(0.0, (self, self), (0.0, 0.0))
out.data = {"__tensor__": ["float64", [0, 2 ** 62, 2 ** 62], ""]}
return out
"""

CROSS_ENTROPY_BY_CASES = """
if bool((logits == 0).all()):
    return torch.tensor(math.log(logits.shape[-1]), dtype=logits.dtype)
raise NotImplementedError
"""

HALF_X_GELU = "return 0.5 * x\n"

# Chapter 00's answers are plain Python (lists of floats): a table of the two published
# softmaxes, and zeros, or the logits handed back, on every other input.
SOFTMAX_TABLE = """
if tuple(v.data for v in logits) in {(1000.0, 1001.0, 999.0), (0.5, -1.2, 2.0, 0.1)}:
    largest = max(value.data for value in logits)
    exps = [(value - largest).exp() for value in logits]
    total = vsum(exps)
    return [e / total for e in exps]
return FALLBACK
"""

ZERO_GRADIENTS = "return torch.zeros_like(x), torch.zeros_like(gamma), torch.zeros_like(gamma)\n"


@pytest.mark.parametrize("task, body", [("gelu", GELU_TABLE_SKIPPING_A_CHECK), ("cross_entropy", CROSS_ENTROPY_BY_CASES),
                                        ("gelu", HALF_X_GELU), ("layer_norm_backward", ZERO_GRADIENTS),
                                        ("micro_softmax", SOFTMAX_TABLE.replace("FALLBACK", "[Value(0.0) for _ in logits]")),
                                        ("micro_softmax", SOFTMAX_TABLE.replace("FALLBACK", "list(logits)")),
                                        ("gelu", GELU_TABLE_THEN_ZEROS),
                                        ("micro_value_add", ADD_TABLE_THEN_A_FORGED_TENSOR)],
                         ids=["gelu_table_skipping_a_check", "cross_entropy_by_cases", "half_x_gelu",
                              "zero_gradients", "chapter_00_softmax_table_then_zeros",
                              "chapter_00_softmax_table_then_the_logits", "gelu_table_then_zeros",
                              "chapter_00_add_table_then_a_forged_tensor"])
def test_answers_known_without_computing_earn_nothing(reference, task, body):
    """Each earned 1 to 4 points before: a public check its shortcut passes, another
    failed on purpose (a held-out attack set found them)."""
    from grader.run.processes import Limits
    from grader.run.sandbox import Sandbox, bwrap_works
    from tests.test_certified_parts import grade, upload

    if not bwrap_works():
        pytest.skip("bubblewrap is not usable on this machine")
    with Sandbox(Limits()) as box:
        results = grade(reference, box, task, upload(reference, {task: body}))
    assert sum(r.score for r in results) == 0, [(r.check.name, r.status, r.diagnosis[:120]) for r in results]
    assert any((r.verdict or {}).get("kind") in ("public_only", "gated") for r in results)
