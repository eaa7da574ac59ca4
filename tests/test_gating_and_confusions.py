"""Gates (a property earns points only with its task's value check), bodies that compute
nothing scoring 0, chapter 00's attention cut off from the graph, and the confusion helper."""

import math

import pytest

from grader.checks import catalogue
from grader.checks.ch00_micro.micro_attention import gradients_flow
from grader.checks.ch05_block.block import causal_invariance, shape, zero_branch_identity
from grader.checks.ch05_block.layer_norm import example_figures
from grader.checks.ch05_block.layer_norm.hidden import matches_reference
from grader.checks.confusions import confusion
from grader.mutants import catalogue as accuracy_catalogue
from grader.qa.trivial_bodies import trivial_entries
from grader.run.processes import Limits
from grader.run.reference import Reference


@pytest.fixture(scope="module")
def sandbox():
    from grader.run.sandbox import Sandbox
    box = Sandbox(Limits())
    yield box
    box.close()


def test_the_identity_block_earns_nothing_and_says_why(sandbox):
    from grader.qa.catch_table import run_entry
    entry = next(t for t in trivial_entries() if t.name == "block_identity_pair")
    outcome = run_entry(entry, Reference.available(), sandbox)
    assert outcome.score == 0
    gated = {r.check.name: r for r in outcome.failed if r.gated}
    assert {shape.name, zero_branch_identity.name, causal_invariance.name} <= set(gated)
    assert "earns nothing yet" in gated[causal_invariance.name].diagnosis
    assert "'formula'" in gated[causal_invariance.name].diagnosis


def test_a_slip_keeps_the_properties_that_hold(sandbox):
    """LayerNorm dividing by d - 1 computes, and names its slip: the five properties that
    hold count; the value checks it fails do not (the property once earned nothing until
    the value was exactly right)."""
    from grader.qa.catch_table import run_entry
    entry = next(m for m in accuracy_catalogue()[0] if m.name == "layer_norm_variance_d_minus_1")
    outcome = run_entry(entry, Reference.available(), sandbox)
    failed = {r.check.name: r for r in outcome.failed}
    assert {example_figures.name, matches_reference.name} <= set(failed)
    assert not [r for r in outcome.failed if r.gated], [(r.check.name, r.diagnosis) for r in outcome.failed]
    properties = [c for c in catalogue.all_checks() if c.task == "layer_norm" and "example_figures" in c.gated_by]
    assert len(properties) == 5 and outcome.score == sum(c.points for c in properties if c.name not in failed)
    assert outcome.score >= 4


@pytest.mark.parametrize("task", sorted(catalogue.tasks()))
def test_trivial_bodies_score_nothing(sandbox, task):
    """Every task's bodies that compute nothing (pass, identity, zeros, a copy, a constant,
    the identity in the task's shape) score 0 on it: the gates are complete."""
    from grader.qa.catch_table import run_entry
    reference = Reference.available()
    for entry in [t for t in trivial_entries() if t.task == task]:
        assert run_entry(entry, reference, sandbox).score == 0, entry.name


def test_every_gate_is_a_public_value_check_of_the_same_task():
    for check in catalogue.all_checks():
        for gate in check.gated_by:
            gating = [c for c in catalogue.all_checks() if c.name == f"ch{check.chapter}.{check.task}.{gate}"]
            assert gating and not gating[0].hidden and not gating[0].gated_by, check.name


def test_trivial_entries_cover_every_task():
    assert {t.task for t in trivial_entries()} == set(catalogue.tasks())


@pytest.mark.parametrize("name", ["attention_output_from_floats", "attention_values_as_floats"])
def test_attention_cut_off_from_the_graph_fails_make_check(sandbox, name):
    from grader.qa.catch_table import run_entry
    entry = next(m for m in accuracy_catalogue()[0] if m.name == name)
    outcome = run_entry(entry, Reference.available(), sandbox)
    public = {r.check.name: r.diagnosis for r in outcome.public}
    assert entry.keyword in public.get(gradients_flow.name, "")


def test_confusions_against_math():
    assert "log₁₀" in confusion("log", (2.0,), math.log10(2.0))
    assert "0.693147" in confusion("log", (2.0,), math.log10(2.0))
    assert "log₂" in confusion("log", (3.0,), math.log2(3.0))
    assert "expm1" in confusion("exp", (0.7,), math.expm1(0.7))
    assert "leaky" in confusion("relu", (-0.8,), -0.008)
    assert "swapped" in confusion("pow", (1.7, 3), 3**1.7)
    assert "precedence" in confusion("pow", (1.7, 0.5), 1.7 / 2)
    assert "multiplied, not added" in confusion("add", (1.5, -2.25), 1.5 * -2.25)
    assert confusion("log", (2.0,), math.log(2.0) + 0.1234) is None
    assert confusion("exp", (0.7,), float("nan")) is None


def test_formula_confusions_name_each_part_that_differs():
    from grader.checks._slots import strip
    from grader.checks.confusions import FORMULA_PARTS
    from grader.checks.confusions import formula_confusion as marked
    from grader.checks.ch00_micro.hidden.oracles import RMS_PARTS, SOFTMAX_PARTS, rms_grid, rms_with, softmax_grid

    def formula_confusion(formula, parts):  # the sentence as the student reads it (the kit's figures typed)
        said = marked(formula, parts)
        return None if said is None else strip(said)

    assert "square root is missing" in formula_confusion("rmsnorm", {"root": "none"})
    both = formula_confusion("rmsnorm", {"stat": "mean", "eps": "none"})
    assert both.startswith("2 parts of rmsnorm differ") and "mean of x" in both and "eps is missing" in both
    assert "log-softmax" in formula_confusion("softmax", {"total": "log"})
    assert formula_confusion("rmsnorm", {"stat": "a statistic nobody wrote words for"}) is None
    assert formula_confusion("rmsnorm", {}) is None
    # Every other choice the kit computes has words, and none of them gives the right values.
    for formula, parts in (("rmsnorm", RMS_PARTS), ("softmax", SOFTMAX_PARTS)):
        assert {part: set(choices[1:]) for part, choices in parts.items()} == \
            {part: set(words) for part, words in FORMULA_PARTS[formula].items()}
    x = [0.5, -1.2, 2.0, 0.1]
    right = rms_with(x)
    for parts, values in rms_grid(x):
        assert formula_confusion("rmsnorm", parts)
        assert max(abs(a - b) for a, b in zip(values, right)) > 1e-6, parts
    for parts, _ in softmax_grid(x):
        assert formula_confusion("softmax", parts)


def test_the_layer_check_names_the_parts_that_differ():
    from grader.checks._slots import strip
    from grader.checks.ch00_micro.micro_block import BLOCK_FLAWS, FLAW_PARTS
    from grader.checks.ch00_micro.micro_block import parts_sentence as marked

    def parts_sentence(parts):  # the sentence as the student reads it (the kit's figures typed)
        return strip(marked(parts))

    assert set(FLAW_PARTS) == set(BLOCK_FLAWS)
    for flaw, parts in FLAW_PARTS.items():
        assert parts_sentence(parts) == BLOCK_FLAWS[flaw]  # the catalogued flaws keep their words
    assert parts_sentence({"raw": "kv"}) == ("the keys and values are computed from the raw stream x; they read "
                                             "RMSNorm(x) like the queries")
    assert "interleaved" in parts_sentence({"heads": "interleaved"})
    assert parts_sentence({"raw": "q", "mlp_residual": False}).startswith("2 parts of the layer differ")
