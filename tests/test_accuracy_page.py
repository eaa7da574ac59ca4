"""docs/grader-accuracy.md is `make mutants`' page: it lists exactly the catalogue's
mutants and variants, each mistake's change as the catalogue has it, and a run of one
chapter (`make mutants CH=05`) replaces that chapter's rows and keeps every other."""

from __future__ import annotations

import types

import pytest

from grader.checks import catalogue
from grader.mutants import catalogue as accuracy_catalogue
from grader.qa import accuracy_page, catch_table

STALE = "docs/grader-accuracy.md is stale: run `make mutants` (or `make mutants CH=NN` for the chapter changed)"


def _chapter(task: str) -> str:
    return catalogue.chapter_of_task()[task].number


def test_the_page_lists_the_catalogue_as_it_is():
    mutants, variants = accuracy_catalogue()
    text = accuracy_page.PAGE.read_text(encoding="utf-8")
    rows, variant_rows, _ = accuracy_page._page_rows(text)
    assert list(rows) == [m.name for m in mutants], STALE
    for mutant in mutants:
        cells = [c.strip() for c in rows[mutant.name].strip("|").split(" | ")]
        assert cells[1:3] == [mutant.task, mutant.mistake], f"{STALE} ({mutant.name})"
        assert "not run yet" not in rows[mutant.name], f"{STALE} ({mutant.name} was never run)"
    assert list(variant_rows) == [v.name for v in variants], STALE
    assert "not run yet" not in "\n".join(variant_rows.values()), STALE
    assert accuracy_page.markdown_changes(mutants) in text, f"{STALE}: a mistake's change to the reference moved"


def _outcome(entry, failed_public: bool, named: bool):
    check = types.SimpleNamespace(name=f"ch{_chapter(entry.task)}.{entry.task}.made_up", hidden=False)
    said = f"made up: {entry.keyword}" if named else "made up: something else"
    result = types.SimpleNamespace(check=check, diagnosis=said, gated=())
    return catch_table.Outcome(entry, [result] if failed_public else [], 0.0 if failed_public else 1.0, 1.0)


def test_a_chapter_run_replaces_its_rows_and_keeps_the_others(tmp_path, monkeypatch):
    page = tmp_path / "grader-accuracy.md"
    page.write_text(accuracy_page.PAGE.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(accuracy_page, "PAGE", page)
    mutants, variants = accuracy_catalogue()
    before, before_variants, tail = accuracy_page._page_rows(page.read_text(encoding="utf-8"))
    ours = [m for m in mutants if _chapter(m.task) == "05"]
    assert ours, "chapter 05 has mutants"
    # Chapter 05 run again: its first mutant now escapes make check, every other is named.
    outcomes = [_outcome(m, failed_public=i > 0, named=True) for i, m in enumerate(ours)]
    accuracy_page.write_page(outcomes, [], whole=False)
    text = page.read_text(encoding="utf-8")
    after, after_variants, after_tail = accuracy_page._page_rows(text)
    assert list(after) == [m.name for m in mutants]
    for mutant in mutants:
        if _chapter(mutant.task) != "05":
            assert after[mutant.name] == before[mutant.name]
    assert after[ours[0].name].endswith("| **NO** |") and "made up" not in after[ours[0].name]
    assert after[ours[1].name].endswith("| named |") and "made up" in after[ours[1].name]
    assert after_variants == before_variants and after_tail == tail
    # The headline is read from the rows: one mutant of the whole catalogue not caught.
    caught = sum(r.rstrip(" |").endswith(("named", "yes")) for r in after.values())
    assert f"caught by `make check` (public checks, judged without the reference): **{caught / len(mutants):.1%}**" \
        in text


def test_an_entry_never_run_says_which_run_writes_it(tmp_path, monkeypatch):
    page = tmp_path / "grader-accuracy.md"
    monkeypatch.setattr(accuracy_page, "PAGE", page)
    accuracy_page.write_page([], [], whole=False)
    rows, variant_rows, _ = accuracy_page._page_rows(page.read_text(encoding="utf-8"))
    mutants, _ = accuracy_catalogue()
    first = mutants[0]
    assert f"not run yet: make mutants CH={_chapter(first.task)}" in rows[first.name]
    with pytest.raises(AssertionError, match="stale"):
        monkeypatch.setattr(accuracy_page, "PAGE", page)
        test_the_page_lists_the_catalogue_as_it_is()


def test_named_means_the_first_diagnosis_make_check_shows_names_the_mistake():
    mutant = next(m for m in accuracy_catalogue()[0] if m.task == "layer_norm")

    def result(check: str, said: str, gated=(), hidden=False):
        return types.SimpleNamespace(check=types.SimpleNamespace(name=f"ch05.layer_norm.{check}", hidden=hidden),
                                     diagnosis=said, gated=gated)

    elsewhere = result("example_figures", "off by up to 0.5")
    naming = result("shift_invariance", f"so it goes: {mutant.keyword}")
    waiting = result("each_position_alone", "this property holds, but it earns nothing yet", gated=("formula",))
    hidden = result("random_inputs", f"so it goes: {mutant.keyword}", hidden=True)
    assert catch_table.Outcome(mutant, [naming, elsewhere], 0, 1).named_publicly
    assert not catch_table.Outcome(mutant, [elsewhere, naming], 0, 1).named_publicly
    assert catch_table.Outcome(mutant, [waiting, naming, elsewhere], 0, 1).named_publicly
    assert not catch_table.Outcome(mutant, [hidden, elsewhere], 0, 1).named_publicly
    assert catch_table.Outcome(mutant, [hidden, elsewhere], 0, 1).caught_publicly


def test_make_student_names_the_mistakes_make_check_cannot_tell_apart():
    def row(name, said, public):
        return f"| [{name}](#{name}) | layer_norm | a slip | example_figures | {said} | yes | {public} |"

    page = "\n".join([row("zz_time_axis", "the statistics are taken over the time axis", "named"),
                      row("zz_batch_axis", "the statistics are taken over the time axis", "yes"),
                      row("zz_tanh", "this is the tanh form", "named"),
                      row("zz_tanh_pow", "this is the tanh form", "named")])
    found = accuracy_page.indistinct(page)
    assert len(found) == 1 and "zz_time_axis, zz_batch_axis" in found[0] and "names some" in found[0], found


def test_the_page_meets_the_naming_target_over_the_whole_catalogue():
    # `make mutants CH=NN` judges the target on these rates (a chapter alone may name fewer).
    kill, public, named, lost = accuracy_page.page_rates()
    text = accuracy_page.PAGE.read_text(encoding="utf-8")
    assert f"named by `make check` (the mistake's word in the first public check's diagnosis `make check` shows " \
           f"for it): **{named:.1%}**" in text
    assert (kill, public, lost) == (1.0, 1.0, 0.0) and named >= catch_table.NAMED_TARGET
