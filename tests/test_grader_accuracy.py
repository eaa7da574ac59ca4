"""The grader's error rates on its own catalogue: every mutant loses points with the
right diagnosis, every correct variant keeps all of them."""

from __future__ import annotations

import pytest

from grader.accuracy import catalogue
from grader.engine import PASSED
from grader.mutants import run_entry
from grader.sandbox import Limits, Sandbox

MUTANTS, VARIANTS = catalogue()


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(Limits(check_seconds=5.0)) as box:
        yield box


def test_the_catalogue_is_large_enough():
    assert len(MUTANTS) >= 40 and len(VARIANTS) >= 12
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_mutant_is_caught_and_named(mutant, reference, sandbox):
    outcome = run_entry(mutant, reference, sandbox)
    assert outcome.score < outcome.max_score, f"{mutant.name} kept every point"
    failed = {r.check.name: r.diagnosis for r in outcome.failed}
    expected = {name: failed[name] for name in mutant.expect if name in failed}
    assert expected, f"none of {mutant.expect} failed; failed: {failed}"
    assert any(mutant.keyword.lower() in text.lower() for text in expected.values()), (
        f"no diagnosis names the mistake ({mutant.keyword!r}): {expected}")


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_correct_variant_keeps_every_point(variant, reference, sandbox):
    outcome = run_entry(variant, reference, sandbox)
    lost = {r.check.name: f"{r.status}: {r.diagnosis}" for r in outcome.failed}
    assert outcome.score == outcome.max_score, lost
    assert all(r.status == PASSED for r in outcome.failed) or not outcome.failed
