"""What the public checks know about the right answer ships as data: each chapter's
facts.json, written by the kit (grader/generate/facts.py) from code only the kit has.
The data must be what that code computes now, found only by the inputs it was computed
on, and computed on the inputs every public run gives the check."""

from __future__ import annotations

import json
import math
import re
import sys

import pytest
import torch

from grader.checks import catalogue
from grader.checks._api import PUBLIC_SEED
from grader.checks.ch00_micro.micro_forward import formula as micro_forward_formula
from grader.checks.ch04_attention.attention import formula as attention_formula
from grader.checks.ch08_training.adamw_step import skipped_steps
from grader.checks.facts import REGISTERED, MissingFacts, decode, digest, encode, facts_for, known_facts
from grader.generate import facts
from grader.qa.catch_table import SEED


@pytest.fixture(scope="module")
def fresh():
    return facts.compute()


def test_the_committed_facts_are_a_fresh_computation(fresh):
    assert facts.stale(fresh) == [], "run `make student` (python -m grader.generate.facts) and commit facts.json"


def test_every_facts_function_is_kit_only_and_feeds_a_public_check(fresh):
    registered = facts.registered()
    assert len(registered) >= 60
    public = {c.name for c in catalogue.all_checks() if not c.hidden}
    assert set(registered) <= public
    for name, (package, function) in registered.items():
        assert re.search(rf"\.{catalogue.HIDDEN}(\.|$)", function.__module__), (name, function.__module__)
        assert name in fresh[package]["checks"]
    # No public module registers facts: what computes them never ships.
    for module in [m for n, m in sys.modules.items() if n.startswith("grader.checks.") and ".hidden" not in n]:
        assert not vars(module).get(REGISTERED), module.__name__


def test_facts_are_found_by_the_inputs_every_public_run_gives(fresh):
    """A check that reads facts gets the same inputs whatever the run's seed, and they are
    the ones the grader's records (the catch table, the outcome dumps) were graded with."""
    assert PUBLIC_SEED == SEED
    checks = {c.name: c for c in catalogue.all_checks()}
    for name in facts.registered():
        check = checks[name]
        run = check.make_inputs(torch.Generator().manual_seed(12345))
        recorded = check.make_inputs(torch.Generator().manual_seed(SEED + sum(map(ord, name))))
        assert digest(run) == digest(recorded), name
        assert known_facts(run) is not None


def test_fixed_inputs_are_read_from_the_data_on_every_platform():
    """A random draw is not bit for bit the same with every platform's torch (Windows
    builds take other vector paths): a check with fixed inputs reads the ones the kit
    drew and stored, never draws its own where they are stored."""
    from grader.checks.facts import stored_inputs

    fixed = [c for c in catalogue.all_checks() if c.fixed_inputs]
    assert fixed and all(not c.hidden for c in fixed)
    for check in fixed:
        stored = stored_inputs(check.name)
        assert stored is not None, check.name
        assert digest(check.make_inputs(torch.Generator().manual_seed(7))) == digest(stored)
        assert digest(check.fresh_inputs()) == digest(stored), f"{check.name}: run `make student`"


def test_where_the_data_files_were_left_out_the_kit_computes_the_same(monkeypatch):
    """An LMS package of the kit that copies only code (Gradescope's autograder zip takes
    .py and .md files) still has the hidden modules and the reference: the facts are
    computed there, equal to the data."""
    from grader.checks import facts as data
    from grader.run import feedback, reference  # noqa: F401 - where judges run, facts no data file holds are computed

    checks = [skipped_steps.check, attention_formula.check, micro_forward_formula.check]
    written = {check.name: known_facts(check.make_inputs(torch.Generator())) for check in checks}
    monkeypatch.setattr(data, "_loaded", {})
    monkeypatch.setattr(reference, "_computed_facts", {})
    for check in checks:
        computed = known_facts(check.make_inputs(torch.Generator()))
        # Equal to the last bit or two: this machine's CPU may not be the one that wrote the data.
        assert facts._agrees(json.dumps(encode(computed)), json.dumps(encode(written[check.name]))), check.name



def test_facts_are_registered_for_a_checks_handle_never_its_name():
    """A name can outlive its check; a handle is an import that fails with it."""
    from grader.checks.ch05_block.gelu import exact_values, hidden

    assert vars(hidden)[REGISTERED][exact_values.name] is hidden.public_gelu_facts
    with pytest.raises(TypeError, match="handles"):
        facts_for(exact_values.name)

def test_unknown_inputs_are_an_error_not_a_verdict():
    with pytest.raises(MissingFacts, match="make student"):
        known_facts({"x": torch.tensor([1.0, 2.0])})


def test_the_encoding_keeps_every_number():
    value = {"t": torch.tensor([[0.1, -2.5e-300], [math.inf, 3.0]], dtype=torch.float64),
             "ids": torch.tensor([3, 1]), "mask": torch.tensor([True, False]), "f32": torch.tensor([0.1], dtype=torch.float32),
             "pairs": [("why", torch.zeros(2)), ("none", None)], "n": 7, "x": 0.1 + 0.2, "s": "text"}
    back = decode(encode(value))
    for key in ("t", "ids", "mask", "f32"):
        assert back[key].dtype == value[key].dtype and torch.equal(back[key], value[key]), key
    assert back["pairs"][0][0] == "why" and back["pairs"][1] == ["none", None]
    assert (back["n"], back["x"], back["s"]) == (7, 0.1 + 0.2, "text")
    assert digest(value) == digest(decode(encode(value)))
    assert digest({"x": torch.tensor([0.1])}) != digest({"x": torch.tensor([0.1 + 1e-16], dtype=torch.float64)})


def test_a_last_bit_moved_by_another_cpu_is_not_stale():
    """Machines with and without AVX-512 sum float64 in other orders: a facts file they
    disagree on by an ulp is current, one that differs in a real digit or a key is not."""
    committed = facts.render({"about": "", "checks": {"c": {"inputs": "x", "facts": [0.1 + 0.2, float("nan")]}}})
    moved = facts.render({"about": "", "checks": {"c": {"inputs": "x", "facts": [0.3, float("nan")]}}})
    wrong = facts.render({"about": "", "checks": {"c": {"inputs": "x", "facts": [0.3001, float("nan")]}}})
    renamed = facts.render({"about": "", "checks": {"c": {"inputs": "y", "facts": [0.3, float("nan")]}}})
    assert committed != moved and facts._agrees(committed, moved)
    assert not facts._agrees(committed, wrong) and not facts._agrees(committed, renamed)
