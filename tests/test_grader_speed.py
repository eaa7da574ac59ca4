"""What makes grading fast must not change a single result."""

from __future__ import annotations

import pytest

from grader.run.results import ERROR, PASSED
from grader.run.engine import grade
from grader.run.processes import Limits
from grader.run.sandbox import Sandbox
from grader.run.submission import Submission

from tests.hostile import hostile_sources

POST_LN_BLOCK = """
    attended, present = self.attention(hidden, past_key_value, use_cache)
    u = self.ln_attention(hidden + attended)
    return self.ln_feedforward(u + self.feedforward(u)), present
"""


@pytest.mark.parametrize("which", ["reference", "post-LN block"])
def test_importing_once_gives_the_same_result_for_every_check(reference, which):
    sources = dict(reference.sources) if which == "reference" else hostile_sources(reference, {"block": POST_LN_BLOCK})
    outcomes = []
    for import_once in (True, False):
        with Sandbox(Limits(), import_once=import_once) as box:
            report = grade(Submission(which, sources), ["04", "05"], runner=box, seed=11)
            outcomes.append(([(r.check.name, r.status, r.diagnosis) for r in report.results], box.imported_once))
    (once, was_once), (per_task, was_per_task) = outcomes
    if not was_once:
        pytest.skip("this machine imports a submission per task (no namespaces or seccomp filter)")
    assert not was_per_task
    assert once == per_task
    if which == "post-LN block":
        assert any(status != PASSED for _, status, _ in once)


def test_a_scan_that_breaks_costs_its_task_only(reference, monkeypatch):
    import grader.run.engine as engine

    real = engine.scan

    def breaks_on_gelu(source, qualname, *rest):
        if qualname == "gelu":
            raise SystemError("AST constructor recursion depth mismatch")
        return real(source, qualname, *rest)

    monkeypatch.setattr(engine, "scan", breaks_on_gelu)
    with Sandbox(Limits()) as box:
        report = grade(Submission("reference", dict(reference.sources)), ["05"], runner=box, seed=3)
    gelu = [r for r in report.results if r.check.task == "gelu"]
    others = [r for r in report.results if r.check.task != "gelu"]
    assert gelu and all(r.status == ERROR for r in gelu)
    assert others and all(r.status == PASSED for r in others)


def test_certified_parts_made_once_are_those_made_for_each_task(reference):
    """Reference.without / compiled_for reuse what one task's stripping leaves as it was:
    a worker holding every task but one must get exactly what stripping and compiling
    for that task alone gives."""
    from grader.checks import catalogue
    from grader.run.reference import Reference
    from grader.run.inside import wire
    from grader.regions import BEGIN, strip

    fresh = Reference(reference.root)
    for task in catalogue.tasks():
        expected = {rel: strip(source, {task}) for rel, source in fresh.sources.items()}
        assert fresh.without(task) == expected
        compiled = fresh.compiled_for(set(catalogue.tasks()) - {task})
        assert compiled == {rel: wire.pack_code(text, f"certified/{rel}") for rel, text in expected.items()}
        # The graded task's region is in none of what the worker gets.
        own = [rel for rel, source in fresh.sources.items()
               if any((found := BEGIN.match(line)) and found["task"] == task for line in source.splitlines())]
        assert own and all(f'raise NotImplementedError("{task}")' in expected[rel] for rel in own)


@pytest.mark.parametrize("chapters", [["04", "05"], ["00", "01", "02"]])
def test_the_bench_counts_the_workers_a_grade_starts(reference, monkeypatch, chapters):
    """`make bench` prices the workers' process life by this count: it must be the
    number of workers grading a correct submission really starts."""
    from grader.qa.bench import workers_per_grade
    from grader.run.submission_process import SubmissionProcess

    started = []
    for owner in (Sandbox, SubmissionProcess):
        real = owner.worker

        def counted(self, *args, _real=real, **kwargs):
            worker = _real(self, *args, **kwargs)
            started.append(worker)
            return worker

        monkeypatch.setattr(owner, "worker", counted)
    with Sandbox(Limits()) as box:
        report = grade(Submission("reference", dict(reference.sources)), chapters, runner=box, seed=3)
    assert report.results and all(r.status == PASSED for r in report.results)
    assert len(started) == workers_per_grade(chapters) > 0
    if chapters == ["00", "01", "02"]:  # chapters whose tasks share workers
        assert workers_per_grade(chapters) < workers_per_grade(chapters, grouped=False)
