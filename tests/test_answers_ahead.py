"""Each check's inputs and expected values, worked out ahead of the check (grader/run/answers.py,
Answers): while the sandbox boots and on a thread of their own while workers compute. A check
gets exactly what it would have computed itself, once, errors included; and the wrong
compositions a judge names are the same as when each was compared one at a time."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from grader.checks import catalogue
from grader.checks._api import distinct_outputs
from grader.run.answers import Answers, inputs_and_expected
from grader.run.engine import grade
from grader.run.processes import Limits
from grader.run.reference import Reference
from grader.run.sandbox import Sandbox
from grader.run.submission import load

from tests.test_grader_engine import SOLUTIONS


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _checks(chapter: str):
    return [c for ch in catalogue.chapters() if ch.number == chapter for c in ch.checks]


def test_answers_worked_out_ahead_are_those_a_check_computes_itself():
    reference = Reference.available()
    checks = _checks("05") + _checks("08")
    answers = Answers(1234, reference)
    answers.ahead_on_a_thread(checks)
    taken = {check.name: answers.take(check) for check in reversed(checks)}  # the other end: both at work at once
    answers.stop()
    for check in checks:
        assert _same(taken[check.name], inputs_and_expected(check, 1234, reference)), check.name


class _Counted:
    """A check's stand-in that counts how often its inputs are drawn."""

    def __init__(self, name: str, fails: bool = False):
        self.name, self.expect, self.fails, self.drawn = name, None, fails, 0

    def make_inputs(self, generator):
        self.drawn += 1
        time.sleep(0.01)
        if self.fails:
            raise ValueError(f"{self.name} cannot draw")
        return {"x": torch.rand(2, generator=generator)}


def test_a_check_s_answers_are_computed_once_whoever_comes_first():
    checks = [_Counted(f"stand_in_{i}") for i in range(12)]
    answers = Answers(7, None)
    answers.ahead_on_a_thread(checks)
    first, rest = checks[::3], [c for i, c in enumerate(checks) if i % 3]
    for check in first:  # some taken before the helper reaches them, the rest after
        answers.take(check)
    answers.stop()
    for check in rest:
        answers.take(check)
    answers.ahead(checks)  # all taken: nothing is worked out again ahead
    assert [c.drawn for c in checks] == [1] * len(checks)
    answers.take(checks[0])  # a check graded a second time draws its inputs again
    assert checks[0].drawn == 2


def test_an_error_drawing_inputs_reaches_the_check_that_takes_them():
    broken, fine = _Counted("stand_in_broken", fails=True), _Counted("stand_in_fine")
    answers = Answers(7, None)
    answers.ahead([broken, fine])  # computed ahead, on this thread: nothing raised here
    with pytest.raises(ValueError, match="stand_in_broken cannot draw"):
        answers.take(broken)
    inputs, expected = answers.take(fine)
    assert expected is None and inputs["x"].shape == (2,)


def test_a_helper_stopped_midway_leaves_the_rest_to_their_checks():
    checks = [_Counted(f"stand_in_slow_{i}") for i in range(50)]
    answers = Answers(3, None)
    answers.ahead_on_a_thread(checks)
    answers.stop()  # at once: it ends at its next check
    for check in checks:
        answers.take(check)
    assert all(c.drawn == 1 for c in checks)
    assert not any(t.name == "answers ahead" for t in threading.enumerate())


def test_two_grading_threads_and_one_give_the_same_report():
    """One thread (a profile) works nothing out ahead; two do: same verdicts, same words."""
    submission = load(SOLUTIONS)
    with Sandbox(Limits()) as box:
        reports = [grade(submission, ["04", "05"], runner=box, seed=99, parallel=threads) for threads in (1, 2)]
    one, two = ([(r.check.name, r.status, r.diagnosis) for r in report.results] for report in reports)
    assert one == two and len(one) > 20


def test_the_sandbox_says_whether_it_is_still_booting():
    with Sandbox(Limits()) as box:
        box.start()
        assert box.booting()  # the zygote imports torch for about a second
        box.isolates_workers()  # waits until it is up
        assert not box.booting()


@pytest.mark.parametrize("seed", range(6))
def test_distinct_outputs_keeps_what_one_comparison_at_a_time_keeps(seed):
    g = torch.Generator().manual_seed(seed)
    right = torch.randn(2, 3, 4, generator=g, dtype=torch.float64)
    pool = [right + 1e-12, right.clone(), right * 2]
    candidates = []
    for i in range(40):
        choice = torch.randint(0, 6, (1,), generator=g).item()
        if choice < 3:
            output = pool[choice] + (1e-10 if i % 2 else 0.0)
        elif choice == 3:
            output = torch.randn(2, 3, 4, generator=g, dtype=torch.float64)
            pool.append(output)
        elif choice == 4:
            output = torch.randn(1, 3, 4, generator=g, dtype=torch.float64)  # broadcasts against right
        else:
            output = None
        candidates.append((f"composition {i}", output))
    # A kept output of another shape that a later one matches by broadcasting: not kept twice.
    row = torch.randn(1, 3, 4, generator=g, dtype=torch.float64)
    candidates += [("a row", row), ("the row twice", row.expand(2, 3, 4).clone())]

    def one_at_a_time():
        kept = []
        for label, output in candidates:
            if output is not None and all(not torch.allclose(output, other, atol=1e-9, rtol=1e-7)
                                          for other in [right] + [o for _, o in kept]):
                kept.append((label, output))
        return kept

    expected = one_at_a_time()
    assert [label for label, _ in distinct_outputs(candidates, right)] == [label for label, _ in expected]
    assert len(expected) >= 3 and "a row" in dict(expected) and "the row twice" not in dict(expected)
