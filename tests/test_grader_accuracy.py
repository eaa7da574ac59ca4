"""The grader's error rates on its own catalogue: every mutant loses points with the
right diagnosis, `make check` alone (the public checks) catches it, and every correct
variant keeps all of them; every mistake a lesson lists has a mutant."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grader.checks import catalogue as checks_catalogue
from grader.qa.catch_table import check_words, run_entry
from grader.mutants import catalogue, lesson_mistakes
from grader.run.results import PASSED
from grader.run.processes import Limits
from grader.run.sandbox import Sandbox
from tests.timing import limit

MUTANTS, VARIANTS = catalogue()
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(Limits(check_seconds=limit(5.0))) as box:
        yield box


def test_the_catalogue_is_large_enough():
    assert len(MUTANTS) >= 40 and len(VARIANTS) >= 12
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)


def test_every_mutant_expects_a_public_check():
    hidden = {c.name: c.hidden for c in checks_catalogue.all_checks()}
    for m in MUTANTS:
        unknown = [name for name in m.expect if name not in hidden]
        assert not unknown, f"{m.name} expects checks that do not exist: {unknown}"
        assert any(not hidden[name] for name in m.expect), f"{m.name} expects hidden checks only: {m.expect}"


def test_every_keyword_says_more_than_the_check_names():
    # A diagnosis "names the mistake" only if its word is one a check's name does not already say.
    for m in MUTANTS:
        assert all(m.keyword.lower() not in check_words(name) for name in m.expect), (m.name, m.keyword)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_mutant_is_caught_and_named(mutant, reference, sandbox):
    outcome = run_entry(mutant, reference, sandbox)
    assert outcome.score < outcome.max_score, f"{mutant.name} kept every point"
    failed = {r.check.name: r.diagnosis for r in outcome.failed}
    expected = {name: failed[name] for name in mutant.expect if name in failed}
    assert expected, f"none of {mutant.expect} failed; failed: {failed}"
    assert any(mutant.keyword.lower() in text.lower() for text in expected.values()), (
        f"no diagnosis names the mistake ({mutant.keyword!r}): {expected}")
    public = {r.check.name: r.diagnosis for r in outcome.failed if not r.check.hidden}
    assert public, f"{mutant.name} is caught by hidden checks only: `make check` passes it ({failed})"


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_correct_variant_keeps_every_point(variant, reference, sandbox):
    outcome = run_entry(variant, reference, sandbox)
    lost = {r.check.name: f"{r.status}: {r.diagnosis}" for r in outcome.failed}
    assert outcome.score == outcome.max_score, lost
    assert all(r.status == PASSED for r in outcome.failed) or not outcome.failed


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def common_mistakes(chapter: str) -> list[str]:
    """The bullets of a lesson's "Common mistakes" sections, each on one line: the
    chapter's own (##) and any a task's section keeps (###, as `make new-task` writes it)."""
    [lesson] = sorted((ROOT / "assignments").glob(f"ch{chapter}_*/README.md"))
    text = lesson.read_text(encoding="utf-8")
    sections = re.findall(r"^#{2,3} Common mistakes\n(.*?)(?=^#{1,3} |\Z)", text, flags=re.M | re.S)
    assert sections, f"{lesson} has no 'Common mistakes' section"
    return [_squeezed(b) for section in sections
            for b in re.findall(r"^- (.*?)(?=^- |^\S|\Z)", section, flags=re.M | re.S)]


CHAPTERS = sorted(c.number for c in checks_catalogue.chapters())


def test_common_mistakes_are_parsed():
    bullets = common_mistakes("05")
    assert len(bullets) >= 5 and all(b and "\n" not in b for b in bullets)
    assert any(b.startswith("Dividing by d − 1") for b in bullets)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_common_mistake_of_the_lesson_has_a_mutant(chapter):
    bullets = common_mistakes(chapter)
    assert bullets, f"chapter {chapter}'s lesson lists no common mistakes"
    phrases = lesson_mistakes().get(chapter, {})
    names = {m.name: m for m in MUTANTS}
    for phrase, mutants in phrases.items():
        assert any(_squeezed(phrase) in b for b in bullets), (
            f"chapter {chapter}: {phrase!r} is not in the lesson's common mistakes")
        assert mutants and all(name in names for name in mutants), (
            f"chapter {chapter}: {phrase!r} names mutants that do not exist: {mutants}")
    for bullet in bullets:
        # Each clause a semicolon separates is a mistake of its own (explanations follow a colon).
        for clause in bullet.split(";"):
            assert any(_squeezed(p) in clause or clause.strip() in _squeezed(p) for p in phrases), (
                f"chapter {chapter}: the lesson's common mistake {clause.strip()!r} has no mutant in "
                f"the LESSON of a mutants.py of grader/checks/ch{chapter}_*/")
