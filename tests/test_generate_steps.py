"""`make student` runs every generator in one command (grader/generate/__main__.py): each
step in a child of one process, ending as a process of its own would."""

from __future__ import annotations

import importlib
import sys

import pytest

from grader.generate import __main__ as steps


def test_every_step_is_a_generator_with_a_main():
    for step in steps.STEPS:
        assert callable(importlib.import_module(f"grader.generate.{step}").main), step


@pytest.mark.skipif(not hasattr(steps.os, "fork"), reason="steps fork only where the platform can")
@pytest.mark.parametrize("body, status, said", [
    ("def main():\n    return 0\n", 0, ""),
    ("def main():\n    return 3\n", 3, ""),
    ("def main():\n    raise SystemExit('a region and its folder disagree')\n", 1, "a region and its folder disagree"),
    ("def main():\n    raise KeyError('broken')\n", 1, "KeyError: 'broken'"),
])
def test_a_step_ends_as_a_process_of_its_own(tmp_path, monkeypatch, capfd, body, status, said):
    (tmp_path / "a_step.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert steps._forked("a_step") == status
    assert said in capfd.readouterr().err
    sys.modules.pop("a_step", None)


def test_a_failing_step_stops_the_rest(monkeypatch):
    ran = []
    monkeypatch.setattr(steps, "STEPS", ("first", "second"))
    monkeypatch.setattr(steps, "_forked", lambda module: ran.append(module) or 2)
    monkeypatch.setattr(steps.subprocess, "call", lambda command: ran.append(command[-1]) or 2)
    assert steps.main() == 2
    assert ran == ["grader.generate.first"]
