"""The course's check table is a contract with every student and every gradebook: names,
points, chapters, tasks and what each check promises. Moving code about must not change
it, so the table is kept as data (tests/data/check_table.json, written from the catalogue
by `make student`: grader/generate/check_table.py), and a change to a check shows in
review as a change to that file."""

import json
import sys
import types

import pytest

from grader.checks import catalogue
from grader.checks._api import DECLARED, CheckHandle, Task, check
from grader.generate import check_table


def test_the_written_check_table_is_the_catalogues():
    found = check_table.stale()
    assert not found, (f"tests/data/check_table.json is not the catalogue's: run `make student` "
                       f"({check_table.REFRESH}) and commit it, if the change is meant:\n" + "\n".join(found))


def test_a_change_to_a_check_is_said_by_the_check_and_what_changed():
    now = check_table.table()
    written = json.loads(check_table.text(now))
    first, second = written["checks"][0], written["checks"][1]
    first["points"] += 1
    written["checks"].remove(second)
    assert check_table.differences(written, now) == [
        f"{second['name']}: a new check", f"{first['name']}: points {first['points']!r} -> {first['points'] - 1!r}"]
    assert check_table.differences(json.loads(check_table.text(now)), now) == []


def test_every_check_lives_in_its_chapter_and_task_package():
    """Chapter and task come from where a check is declared: a check of ch05.block sits in
    grader/checks/ch05_*/block/, a public one in its __init__.py (whose TASKS is that one
    task) and a hidden one in its hidden.py, and nowhere else."""
    for chapter in catalogue.chapters():
        for c in chapter.checks:
            module = sys.modules[c.judge.__module__]
            task_package = f"grader.checks.{chapter.module}.{c.task}"
            assert module.__name__ == task_package + ".hidden" * c.hidden, (c.name, module.__name__)
            assert [t.name for t in sys.modules[task_package].TASKS] == [c.task], c.name
            assert [d.judge for d in vars(module)[DECLARED] if d.name == c.name] == [c.judge], c.name



def test_each_module_holds_its_checks_handles_under_the_checks_names():
    """The kit names a check by importing its handle (`from grader.checks.ch05_block.gelu import
    exact_values`), so a module holds every check it declares under the check's own name, a
    check that shares another's judge too (declared on that one's handle)."""
    for c in catalogue.all_checks():
        module = sys.modules[c.judge.__module__]
        short_name = c.name.rsplit(".", 1)[1]
        handle = vars(module).get(short_name)
        assert isinstance(handle, CheckHandle) and handle.name == c.name, (
            f"{module.__name__} holds no handle named {short_name} for {c.name}")
        assert handle.check == c and handle.judge is c.judge


def test_a_hidden_check_goes_in_hidden_and_a_public_one_stays_out():
    """The student release ships a task's folder without its hidden.py: a hidden check declared
    in the public module would ship, so the catalogue refuses it (and a public one in hidden.py)."""
    def module(name, *hidden):
        made = types.ModuleType(name)
        made.TASKS = [Task("t", "model", "f", "a task")]
        setattr(made, DECLARED, [CheckHandle(f"c{i}", None, 1, "", None, None, {"hidden": h} if h else {}, name)
                                 for i, h in enumerate(hidden)])
        return made

    public, secret = module("grader.checks.ch99_x.t", False), module("grader.checks.ch99_x.t.hidden", True, True)
    assert [c.name.split(".") for c in catalogue._checks_of(public, secret, "99")] == [
        ["ch99", "t", "c0"], ["ch99", "t", "c0"], ["ch99", "t", "c1"]]
    assert [c.hidden for c in catalogue._checks_of(public, None, "99")] == [False]
    with pytest.raises(ValueError, match="ch99_x/t/hidden.py"):
        catalogue._checks_of(module("grader.checks.ch99_x.t", False, True), None, "99")
    with pytest.raises(ValueError, match="ch99_x/t/__init__.py"):
        catalogue._checks_of(public, module("grader.checks.ch99_x.t.hidden", False), "99")



def test_a_handle_names_its_check_judges_as_its_judge_and_lends_it_to_the_next(monkeypatch):
    """@check returns a handle named from where it is declared; a check declared on a
    handle shares its judge, and the module lists both in declaration order."""
    module = types.ModuleType("grader.checks.ch99_x.t")
    module.TASKS = [Task("t", "model", "f", "a task")]
    monkeypatch.setitem(sys.modules, module.__name__, module)

    def judge(out, inputs, expected):
        return None if out == inputs["right"] else "wrong"

    judge.__module__ = module.__name__
    first = check("first", 1, "the first", probe=None)(judge)
    second = check("second", 2, "the second", probe=None)(first)
    assert second.judge is judge and first(1, {"right": 1}, None) is None and first(2, {"right": 1}, None) == "wrong"
    assert [h.name.split(".") for h in (first, second)] == [["ch99", "t", "first"], ["ch99", "t", "second"]]
    assert vars(module)[DECLARED] == [first, second]
    assert [c.points for c in catalogue._checks_of(module, None, "99")] == [1, 2]
