"""Mutants written as patches of the reference's regions (grader/mutants.py): a patch
applies at the right place and indentation, one that does not fit fails naming the
mutant and the line, and every patch of the catalogue fits the reference."""

from __future__ import annotations

import textwrap

import pytest

from grader.checks.ch05_block.gelu import exact_values
from grader.mutants import REFERENCE_PACKAGE, PatchError, catalogue, mutant, patch, region_of, variant
from grader.regions import package_sources

SOURCE = textwrap.dedent('''\
    import math


    class Thing:
        def forward(self, xs):
            """A docstring the patch never sees."""
            ### BEGIN SOLUTION thing_forward
            total = 0.0
            for x in xs:
                if x < 0:
                    continue
                total += x

            for x in reversed(xs):
                if x > 0:
                    continue
                total -= x
            return math.sqrt(total)
            ### END SOLUTION

        def other(self):
            return 1
''')
SOURCES = {"thing.py": SOURCE, "empty.py": "x = 1\n"}
ANY_CHECK = exact_values  # these mutants are only patched, never graded: any check serves as their expected failure


def patched(text: str) -> str:
    return mutant("m", "thing_forward", patch(text), ANY_CHECK, "word").region(SOURCES)


def test_a_replacement_goes_at_the_removed_line_s_indentation():
    region = patched("""
        - total += x
        + total += x * x
        +     # a comment one level deeper
    """)
    assert "        continue\n    total += x * x\n        # a comment one level deeper\n" in region
    assert "total += x\n" not in region
    assert region.startswith("total = 0.0\nfor x in xs:\n")


def test_consecutive_removed_lines_go_together_and_a_deletion_needs_no_added_line():
    region = patched("""
        - if x < 0:
        -     continue
    """)
    assert region.splitlines()[:3] == ["total = 0.0", "for x in xs:", "    total += x"]


def test_blank_lines_of_the_region_are_skipped_between_removed_lines():
    region = patched("""
        - total += x
        - for x in reversed(xs):
        -     if x > 0:
        -         continue
        -     total -= x
        + pass
    """)
    assert "    pass\nreturn math.sqrt(total)\n" in region


def test_lines_are_inserted_after_a_context_line_or_before_one():
    region = patched("""
          for x in xs:
        +     print(x)

        + assert total >= 0
          return math.sqrt(total)
    """)
    assert "for x in xs:\n    print(x)\n    if x < 0:\n" in region
    assert "assert total >= 0\nreturn math.sqrt(total)\n" in region


def test_context_says_which_of_two_equal_lines_is_meant():
    region = patched("""
          if x < 0:
        - continue
        + break
    """)
    assert "    if x < 0:\n        break\n" in region


def test_hunks_apply_to_the_region_as_it_is_in_any_order():
    region = patched("""
        - return math.sqrt(total)
        + return total
        - total = 0.0
        + total = 1.0
    """)
    assert region.startswith("total = 1.0\n") and region.endswith("return total\n")


def test_a_line_that_matches_nothing_fails_naming_the_mutant_and_the_line():
    with pytest.raises(PatchError) as error:
        patched("""
            - total *= x
            + total += x
        """)
    assert "mutant 'm'" in str(error.value) and "'- total *= x' matches no line" in str(error.value)


def test_a_line_that_matches_two_lines_fails_and_asks_for_context():
    with pytest.raises(PatchError) as error:
        patched("""
            - continue
            + break
        """)
    message = str(error.value)
    assert "mutant 'm'" in message and "'- continue'" in message and "2 places" in message and "context" in message


def test_removed_lines_that_are_not_consecutive_fail():
    with pytest.raises(PatchError, match="not one after the other"):
        patched("""
            - total = 0.0
            - total += x
        """)


def test_overlapping_hunks_fail():
    with pytest.raises(PatchError, match="same lines"):
        patched("""
            - total += x
            + total -= x
              if x < 0:
              continue
            - total += x
        """)


@pytest.mark.parametrize("text, message", [
    ("""
        total += x
    """, "begins with neither"),
    ("""
        + total += x
    """, "need a removed line"),
    ("", "changes nothing"),
    ("""
        - total += x
          for x in xs:
    """, "change nothing"),
])
def test_a_patch_that_cannot_be_read_fails_when_the_mutant_is_made(text, message):
    with pytest.raises(PatchError, match=message) as error:
        mutant("unreadable", "thing_forward", patch(text), ANY_CHECK, "word")
    assert "mutant 'unreadable'" in str(error.value)



def test_a_mutant_expects_checks_by_their_handles_and_keeps_their_names():
    assert mutant("m", "thing_forward", "return 1.0", ANY_CHECK, "word").expect == (exact_values.name,)
    with pytest.raises(TypeError, match="handles"):
        mutant("m", "thing_forward", "return 1.0", exact_values.name, "word")

def test_apply_puts_the_region_in_its_file_and_leaves_the_rest():
    entry = mutant("m", "thing_forward", patch("""
        - return math.sqrt(total)
        + return total
    """), ANY_CHECK, "word")
    changed = entry.apply(SOURCES)
    assert changed["empty.py"] == SOURCES["empty.py"]
    assert "        return total\n\n    def other(self):" in changed["thing.py"]
    assert "### BEGIN SOLUTION" not in changed["thing.py"]
    assert '"""A docstring the patch never sees."""' in changed["thing.py"]
    body = variant("v", "thing_forward", "return 2.0")
    assert body.region(SOURCES) == "return 2.0\n" and "        return 2.0\n" in body.apply(SOURCES)["thing.py"]


MUTANTS, VARIANTS = catalogue()
REFERENCE = package_sources(REFERENCE_PACKAGE)


@pytest.mark.parametrize("entry", [m for m in MUTANTS if m.is_patch], ids=lambda m: m.name)
def test_every_patch_of_the_catalogue_fits_the_reference(entry):
    region = entry.region(REFERENCE)
    assert region != region_of(REFERENCE, entry.task)[1], f"{entry.name}'s patch changes nothing"
    compile("def region():\n" + textwrap.indent(region, "    "), entry.name, "exec", dont_inherit=True)


def test_the_catalogue_mixes_patches_and_bodies():
    patches = [m for m in MUTANTS if m.is_patch]
    assert len(patches) > len(MUTANTS) / 2, "most mutants are patches of the reference"
    assert all(not v.is_patch for v in VARIANTS), "variants are whole bodies"


def test_the_release_scan_knows_a_patched_mutant_s_own_lines(tmp_path):
    """The leak scan reads each mutant's full region through the catalogue, so the lines a
    patch writes are found in a bundle too (this mutant's, not the reference's)."""
    from grader.generate import release

    (tmp_path / "sample.py").write_text(textwrap.dedent("""\
        def keep_the_best(scores, k):
            threshold = torch.topk(scores, k, dim=-1).values[:, -1:]
            scores = scores.masked_fill(scores < threshold, float("-inf"))
            return scores
    """))
    findings = release.scan(tmp_path, release.Secrets.of_kit(), allowed={})
    assert any("mutant sample_top_k_threshold_keeps_ties" in f.what for f in findings), findings
