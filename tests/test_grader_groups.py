"""Tasks that cannot see each other share a worker (grader.run.dependencies): fewer
worker starts, the same verdicts, each task's rules armed around its own probes only,
and one task's hang or crash costing that task alone."""

from __future__ import annotations

import itertools

import pytest

from grader.checks import catalogue
from grader.run.dependencies import independent, task_groups
from grader.run.engine import grade_group
from grader.run.schedule import plan_groups, select_checks, workers_needed
from grader.run.worker_session import Grading
from grader.run.processes import Limits
from grader.run.reference import Reference
from grader.run.results import ERROR, FAILED, FORBIDDEN, PASSED, TIMEOUT
from grader.run.sandbox import Sandbox
from grader.run.submission import Submission
from grader.mutants import replace_region, region_of

GROUP = ["micro_value_add", "build_vocab", "embedding", "positions", "attention_init", "layer_norm_backward"]


@pytest.fixture(scope="module")
def reference():
    return Reference.available()


@pytest.fixture(scope="module")
def box():
    with Sandbox(Limits(check_seconds=3.0)) as sandbox:
        yield sandbox


def _items(names):
    tasks = catalogue.tasks()
    return [(tasks[n], [c for c in catalogue.chapter_of_task()[n].checks if c.task == n]) for n in names]


def _with(reference, task: str, body: str) -> Submission:
    sources = dict(reference.sources)
    rel, _ = region_of(sources, task)
    sources[rel] = replace_region(sources[rel], task, body)
    return Submission(f"{task} changed", sources)


def test_the_groups_are_fewer_and_each_holds_only_independent_tasks():
    names = list(catalogue.tasks())
    groups = task_groups(names)
    assert sorted(n for g in groups for n in g) == sorted(names)
    assert len(groups) < len(names)
    for group in groups:
        for one, other in itertools.combinations(group, 2):
            assert independent(one, other), (one, other)
    # A task never shares with one whose code its chapter's checks run.
    assert not independent("block", "gelu") and not independent("lm_forward", "attention")
    assert GROUP in groups
    plan = select_checks(None, public_only=False)
    workers = len(plan_groups(plan, True)) + sum(workers_needed(c) - 1 for _, c in plan)
    assert workers < sum(workers_needed(c) for _, c in plan)


def test_the_reference_keeps_every_point_in_a_shared_worker(reference, box):
    graded = grade_group(_items(GROUP), Grading(Submission("reference", reference.sources), reference, box, seed=5))
    assert [r.status for results in graded for r in results] == [PASSED] * sum(map(len, graded))


def test_a_task_s_legitimate_call_is_another_task_s_forbidden_name(reference, box):
    # positions may call torch's layer norm; layer_norm_backward, in the same worker, may not.
    _, body = region_of(reference.sources, "positions")
    library_here = "torch.nn.functional.layer_norm(torch.zeros(2, 3), (3,))\n" + body
    graded = grade_group(_items(GROUP), Grading(_with(reference, "positions", library_here), reference, box, seed=5))
    by_task = dict(zip(GROUP, graded))
    assert {r.status for r in by_task["positions"]} == {PASSED}
    assert {r.status for r in by_task["layer_norm_backward"]} == {PASSED}
    # And the rule still holds for the task it belongs to, in the same kind of worker.
    _, grads = region_of(reference.sources, "layer_norm_backward")
    cheating = "torch.nn.functional.layer_norm(torch.zeros(2, 3), (3,))\n" + grads
    graded = grade_group(_items(GROUP),
                         Grading(_with(reference, "layer_norm_backward", cheating), reference, box, seed=5))
    by_task = dict(zip(GROUP, graded))
    assert {r.status for r in by_task["layer_norm_backward"]} == {FORBIDDEN}
    assert {r.status for r in by_task["positions"]} == {PASSED}


def test_a_hang_in_one_task_of_a_group_costs_that_task_only(reference, box):
    graded = grade_group(_items(GROUP),
                         Grading(_with(reference, "build_vocab", "while True:\n    pass\n"), reference, box, seed=5))
    by_task = dict(zip(GROUP, graded))
    assert {r.status for r in by_task["build_vocab"]} == {TIMEOUT}
    for name in GROUP:
        if name != "build_vocab":
            assert {r.status for r in by_task[name]} == {PASSED}, (name, [r.diagnosis for r in by_task[name]])


def test_a_crash_at_the_start_of_a_group_costs_the_broken_task_only(reference, box):
    sources = dict(reference.sources)
    sources["backward.py"] = sources["backward.py"] + "\nraise RuntimeError('left over from an experiment')\n"
    graded = grade_group(_items(GROUP),
                         Grading(Submission("backward breaks at import", sources), reference, box, seed=5))
    by_task = dict(zip(GROUP, graded))
    assert {r.status for r in by_task["layer_norm_backward"]} == {ERROR}
    for name in GROUP[:-1]:
        assert {r.status for r in by_task[name]} == {PASSED}, (name, [r.diagnosis for r in by_task[name]])


def test_a_probe_that_reaches_another_task_of_its_group_gets_the_verdict_it_gets_alone(reference, box):
    """The grouping trusts the reference's reading of which code a task runs; a student's
    code may call more (here positions builds and calls a TokenEmbedding, the embedding
    task, which is broken). Such a probe is answered again in a worker of its own, where
    embedding is the student's own too (positions does not build on it), so the group
    changes no verdict: positions fails on the broken part it chose to call, as alone."""
    from grader.run.engine import grade_task
    from grader.run.worker_session import Grading

    sources = dict(reference.sources)
    rel, body = region_of(sources, "positions")
    sources[rel] = replace_region(sources[rel], "positions",
                                  "TokenEmbedding(4, 2)(torch.zeros(1, dtype=torch.long))\n" + body)
    sources[rel] = replace_region(sources[rel], "embedding", "raise RuntimeError('not yet')\n")
    submission = Submission("calls a peer", sources)
    graded = dict(zip(GROUP, grade_group(_items(GROUP), Grading(submission, reference, box, seed=5))))
    (task, checks), = _items(["positions"])
    alone = grade_task(task, checks, Grading(submission, reference, box, seed=5))
    assert {r.status for r in graded["embedding"]} <= {ERROR, FAILED}
    assert [(r.status, r.diagnosis) for r in graded["positions"]] == [(r.status, r.diagnosis) for r in alone]
    assert PASSED not in {r.status for r in alone}


def test_grade_profile_shows_the_groups():
    import subprocess
    import sys

    from grader import KIT_ROOT

    done = subprocess.run([sys.executable, "-m", "grader", "grade", "solutions/hero_transformer", "--chapters", "00,01",
                           "--seed", "1", "--profile", "--allow-weak-sandbox"], cwd=KIT_ROOT, capture_output=True,
                          text=True, timeout=600, env={**__import__("os").environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    assert "groups for 19 tasks" in done.stdout and "micro_value_add, build_vocab" in done.stdout, done.stdout
