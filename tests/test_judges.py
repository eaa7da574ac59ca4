"""Judges never pass NaN, inf or an output that ignores its input.

The causal judge (grader.checks._api.causal_diagnosis) accepts a causal pair, names the
first position that leaked, and refuses outputs that are not finite or that do not
change when the input does; LayerNorm's defaults judge wants a finite eps of 1e-5. In a
graded run a NaN earns no point either."""

from __future__ import annotations

import pytest
import torch

from grader.checks._api import causal_diagnosis
from grader.checks.ch05_block.layer_norm import defaults
from tests.hostile import assert_no_points, grade_one, hostile_sources, run


# ------------------------------------------------------------------ the judges alone


def _pair(T=6, first=4):
    y = torch.randn(2, T, 3, dtype=torch.float64)
    changed = y.clone()
    changed[:, first:] += 1.0
    return y, changed


def test_causal_diagnosis_accepts_a_causal_pair():
    y, changed = _pair()
    assert causal_diagnosis(y, changed, 4, "the block") is None


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_causal_diagnosis_never_passes_non_finite_outputs(bad):
    y = torch.full((2, 6, 3), bad, dtype=torch.float64)
    assert "NaN or inf in the output" in causal_diagnosis(y, y.clone(), 4, "the block")
    y, changed = _pair()
    changed[0, 5, 1] = bad
    assert "NaN or inf in the output" in causal_diagnosis(y, changed, 4, "the block")


def test_causal_diagnosis_names_the_leak():
    y, changed = _pair()
    changed[1, 2, 0] += 1e-6
    assert causal_diagnosis(y, changed, 4, "the block").startswith("position 2 changed")


def test_causal_diagnosis_catches_an_output_that_ignores_its_input():
    constant = torch.ones(2, 6, 3, dtype=torch.float64)
    diagnosis = causal_diagnosis(constant, constant.clone(), 4, "the block")
    assert diagnosis == ("changing tokens from position 4 on changed nothing at all: "
                         "the output does not depend on its input")
    assert causal_diagnosis(constant, constant.clone(), 4, "the block", must_depend=False) is None
    y, changed = _pair()
    changed[:, 5] = y[:, 5]
    assert causal_diagnosis(y, changed, 4, "the block").startswith("position 5 did not change")


@pytest.mark.parametrize("eps, right", [
    (1e-5, True), (torch.tensor(1e-5, dtype=torch.float64), True), (float("nan"), False), (float("inf"), False),
    (-float("inf"), False), (1e-3, False), ("1e-5", False), (True, False), (None, False), ([1e-5], False)])
def test_layer_norm_defaults_want_a_finite_eps_of_1e_5(eps, right):
    out = {"eps": eps, "gamma": torch.ones(4, dtype=torch.float64), "beta": torch.zeros(4, dtype=torch.float64)}
    diagnosis = defaults(out, {}, None)
    assert (diagnosis is None) == right, diagnosis
    if isinstance(eps, float) and eps != eps:
        assert "finite" in diagnosis


# ----------------------------------------------------------------- in a graded run


@pytest.mark.parametrize("case", ["block_nan", "layer_norm_eps_nan"])
def test_nan_is_never_a_pass(reference, sandbox, case):
    if case == "block_nan":
        body = """
            attended, present = self.attention(self.ln_attention(hidden), past_key_value, use_cache)
            return hidden * float("nan"), present
        """
        results = run(reference, sandbox, "block", body, only={"causal_invariance"})
    else:
        sources = hostile_sources(reference)
        sources["model.py"] = sources["model.py"].replace("self.eps = eps", 'self.eps = float("nan")', 1)
        results = grade_one(reference, sandbox, "layer_norm", sources, only={"defaults"})
    assert_no_points(results)
