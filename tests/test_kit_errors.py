"""A fault of the course's check is the course's, never the student's.

A judge that raises on an answer of its probe's form (grader/run/forms.py) is an error
of the check, reported as `error` with a sentence asking the student to tell course
staff, and the traceback kept for staff; on an answer of another form the student is
told where the answer departs from the form. The forms the kit commits are what the
reference's answers have.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import torch

from grader.checks import catalogue
from grader.checks.ch05_block.layer_norm import example_figures
from grader.checks.facts import MissingFacts
from grader.generate import forms as written_forms
from grader.run import forms
from grader.run.engine import grade_task
from grader.run.worker_session import Grading
from grader.run.feedback import Audience, judge_answer
from grader.run.processes import Limits
from grader.run.reference import Reference
from grader.run.results import ERROR, FAILED, PASSED
from grader.run.sandbox import Sandbox
from grader.run.submission import Submission
from grader.run.inside.messages import ProbeReply

CHECK = example_figures.name


def _check(name=CHECK):
    return next(c for c in catalogue.all_checks() if c.name == name)


def _task(check):
    return catalogue.tasks()[check.task]


def _right_answer():
    a = 1 / (1.00001 ** 0.5)
    return {"y": torch.tensor([[[-a, a]]], dtype=torch.float64), "eps": 1e-5,
            "gamma": torch.ones(2, dtype=torch.float64), "beta": torch.zeros(2, dtype=torch.float64)}


@pytest.fixture(scope="module")
def audience():
    reference = Reference.available()
    return Audience(Submission("upload", reference.sources), reference)


def _judged(check, answer, audience):
    return judge_answer(check, _task(check), ProbeReply(result=answer),
                        check.make_inputs(torch.Generator().manual_seed(0)), None, audience)


def test_the_real_judge_passes_the_right_answer(audience):
    assert _judged(_check(), _right_answer(), audience)[0] == PASSED


def test_a_judge_that_raises_on_an_answer_of_the_right_form_is_the_courses_error(audience):
    def broken(out, inputs, expected):
        return out["y"].nonexistent_attribute  # a slip in the course's own check

    check = dataclasses.replace(_check(), judge=broken)
    status, shown, staff, _ = _judged(check, _right_answer(), audience)
    assert status == ERROR
    assert "report it to course staff" in shown and "nothing about your code" in shown
    assert "AttributeError" in staff and "nonexistent_attribute" in staff


def test_a_missing_fact_is_the_courses_error(audience):
    def lacks(out, inputs, expected):
        raise MissingFacts("no facts were written for these inputs")

    status, shown, staff, _ = _judged(dataclasses.replace(_check(), judge=lacks), _right_answer(), audience)
    assert status == ERROR and "report it to course staff" in shown and "make student" in shown
    assert "form" not in shown


@pytest.mark.parametrize("answer, said", [
    ({"y": torch.zeros(1, 2, dtype=torch.float64), "eps": 1e-5, "gamma": torch.ones(2), "beta": torch.zeros(2)},
     "the output['y'] is a float tensor with 2 axes where it should be a float tensor with 3 axes"),
    ([1.0, 2.0], "the output is a sequence of 2 where it should be a dict"),
    ({"y": torch.zeros(1, 1, 2, dtype=torch.float64)}, "the output has no key 'beta'"),
])
def test_a_judge_that_raises_on_an_answer_of_another_form_tells_where_it_departs(audience, answer, said):
    def strict(out, inputs, expected):
        return f"{out['beta'].shape} {out['y'][0, 0, 1]}"

    status, shown, _, verdict = _judged(dataclasses.replace(_check(), judge=strict), answer, audience)
    assert verdict == {"kind": "deviation", "task": _check().task}  # the answer's form, no named mistake
    assert status == FAILED and shown == f"the output does not have the expected form: {said}"


def test_every_check_probed_in_one_call_has_a_committed_form_equal_to_the_references():
    fresh = written_forms.computed()
    for folder, found in fresh.items():
        committed = forms.written(folder)
        assert committed == found, f"grader/checks/{folder}/forms.json is stale: run `make student`"
    single = [c for c in catalogue.all_checks() if not (c.separately or c.parts)]
    assert single and all(forms.declared(c) is not None for c in single)


def test_an_answer_of_another_form_is_told_so_in_a_real_grade(tmp_path):
    reference = Reference.available()
    sources = dict(reference.sources)
    marker = "        ### BEGIN SOLUTION layer_norm\n"
    assert marker in sources["model.py"]
    sources["model.py"] = sources["model.py"].replace(marker, marker + "        return [x.sum()]\n", 1)
    task = catalogue.tasks()["layer_norm"]
    checks = [c for c in catalogue.chapter_of_task()["layer_norm"].checks if c.task == "layer_norm"]
    with Sandbox(Limits()) as box:
        results = grade_task(task, checks, Grading(Submission("a list", sources), reference, box, seed=3))
    assert all(r.status != PASSED for r in results)
    assert all(r.status != ERROR or "report it to course staff" not in r.diagnosis for r in results), [
        (r.check.name, r.diagnosis) for r in results]
