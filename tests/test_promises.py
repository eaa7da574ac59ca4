"""Every call the kit makes into a student's function keeps what the function's lesson
promises it receives (Task.takes), in every chapter: a lesson that says LayerNorm gets
[B, T, d] makes `B, T, d = x.shape` right, so no other chapter may feed it [3, 4]."""

from __future__ import annotations

import dataclasses

from grader.checks import catalogue
from grader.checks.ch05_block.layer_norm import example_figures
from grader.generate import promises


def test_every_check_keeps_the_lessons_promises():
    assert promises.broken_promises() == []


def test_the_lessons_that_promise_shapes_are_declared():
    takes = {task.name: dict(task.takes) for task in catalogue.tasks().values() if task.takes}
    assert takes["layer_norm"] == {"x": 3} and takes["block"] == {"hidden": 3} and takes["embedding"] == {"idx": 2}


def test_a_promise_a_check_breaks_is_named_with_the_check(monkeypatch):
    """Shown to fail: a LayerNorm promised two axes is handed three by chapter 05's checks
    and, through the block, by chapter 07's."""
    tasks = dict(catalogue.tasks())
    tasks["layer_norm"] = dataclasses.replace(tasks["layer_norm"], takes=(("x", 2),))
    monkeypatch.setattr(catalogue, "tasks", lambda: tasks)
    said = promises.broken_promises()
    assert any(s.startswith(f"{example_figures.name} passes LayerNorm.forward x of shape [1, 1, 2]")
               for s in said), said
    assert any(s.startswith("ch07.") for s in said)
    assert all("chapter 05 lesson promises 2 axes" in s for s in said)
