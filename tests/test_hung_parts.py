"""A part that hung is not waited for twice (grader/run/worker_session.py): where the student's
own parts stand in (check.py, the portable runner), a task that runs a part whose checks
timed out gets the short time limit from its first probe, as the part's own later checks
do. Where certified parts stand in, the hung code never runs under another task, and
nothing changes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from grader.checks import catalogue
from grader.run.dependencies import task_graph
from grader.run.worker_session import Grading, HUNG_BEFORE_SECONDS, TaskRun
from grader.run.inside.messages import ProbeCall, ProbeReply
from grader.run.processes import Limits
from grader.run.reference import Reference
from grader.run.submission import Submission


class _RecordingWorker:
    certified = ()
    spent = 0.0  # processor seconds charged to the upload's budget, as a real worker keeps

    def __init__(self):
        self.limits: list[float] = []

    def call(self, call: ProbeCall, seconds: float) -> ProbeReply:
        self.limits.append(seconds)
        return ProbeReply(result={})


def _limit_of_first_probe(task_name: str, hung: set, reference) -> float:
    runner = SimpleNamespace(limits=Limits(check_seconds=10.0))
    grading = Grading(Submission("upload", {}), reference, runner, seed=0, audience=object())
    grading.hung.update(hung)
    run = TaskRun(catalogue.tasks()[task_name], grading)
    run.worker = _RecordingWorker()
    check = next(c for c in catalogue.all_checks() if c.task == task_name)
    run._probe(check, {})
    return run.worker.limits[0]


def test_feedforward_runs_gelu_as_its_own_part():
    assert "gelu" in task_graph()["feedforward"]


@pytest.mark.parametrize("hung, expected", [(set(), 10.0), ({"gelu"}, HUNG_BEFORE_SECONDS),
                                            ({"cross_entropy"}, 10.0)],
                         ids=["nothing hung", "its part hung", "an unrelated task hung"])
def test_a_task_whose_own_part_hung_waits_briefly(hung, expected):
    assert _limit_of_first_probe("feedforward", hung, None) == pytest.approx(expected, abs=0.01)


def test_with_certified_parts_a_hung_part_changes_nothing():
    reference = Reference.available()
    assert reference is not None
    assert _limit_of_first_probe("feedforward", {"gelu"}, reference) == pytest.approx(10.0, abs=0.01)
