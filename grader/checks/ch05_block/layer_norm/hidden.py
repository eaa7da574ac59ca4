"""The hidden checks of grader/checks/ch05_block/layer_norm/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check, diagnose, float32_close
from grader.checks.ch05_block.hidden.oracles import layer_norm
from grader.checks.ch05_block.layer_norm import (
    MISTAKES, combination_name, each_position_alone, example_figures, named_mistakes, probe_layer_norm,
    slip_combinations,
)
from grader.checks.course import EPS
from grader.checks.facts import facts_for


def layer_norm_with_slips(x, gamma, beta, slips=()):
    """LayerNorm over the last axis with the named LAYER_NORM_SLIPS made."""
    if "no_affine" in slips:
        gamma, beta = torch.ones_like(gamma), torch.zeros_like(beta)
    return layer_norm(x, gamma, beta, eps=0.0 if "no_eps" in slips else EPS,
                      divisor_offset=1 if "d_minus_1" in slips else 0, eps_outside="eps_outside" in slips)


def layer_norm_mistakes(x, gamma, beta):
    """{name: output} of each classic mistake (MISTAKES), then of each combination
    of the formula's slips (LAYER_NORM_SLIPS) made at once (layer_norm_mistake_texts)."""
    singles = {"d_minus_1": layer_norm(x, gamma, beta, divisor_offset=1),
               "no_eps": layer_norm(x, gamma, beta, eps=0.0),
               "eps_outside": layer_norm(x, gamma, beta, eps_outside=True),
               "no_affine": layer_norm(x, torch.ones_like(gamma), torch.zeros_like(beta)),
               "time_axis": layer_norm(x, gamma, beta, dims=(-2,)) if x.dim() >= 2 else x,
               "all_axes": layer_norm(x, gamma, beta, dims=tuple(range(x.dim())))}
    assert singles.keys() == MISTAKES.keys(), "a LayerNorm mistake has a sentence but no output"
    return singles | {combination_name(slips): layer_norm_with_slips(x, gamma, beta, slips)
                      for slips in slip_combinations()}


@facts_for(example_figures)
def figure_facts(ref, inputs):
    """What each classic mistake makes of (1, 3), with gamma 1 and beta 0."""
    ones, zeros = torch.ones(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64)
    return {"mistakes": layer_norm_mistakes(inputs["x"], ones, zeros)}


@facts_for(each_position_alone)
def rows_facts(ref, inputs):
    return {"mistakes": layer_norm_mistakes(inputs["x"], inputs["gamma"], inputs["beta"])}


# ------------------------------------------------------------------ reference


def _random_norm_inputs(g):
    return {"x": torch.randn(2, 5, 6, generator=g, dtype=torch.float64) * 3 + 1,
            "gamma": torch.rand(6, generator=g, dtype=torch.float64) + 0.5,
            "beta": torch.randn(6, generator=g, dtype=torch.float64)}


def _expect_layer_norm(ref, inputs):
    norm = ref.model.LayerNorm(6).double()
    with torch.no_grad():
        norm.weight.copy_(inputs["gamma"])
        norm.bias.copy_(inputs["beta"])
        return norm(inputs["x"])


@check("matches_reference", 3, "random [B, T, d] inputs with random gamma and beta match the reference",
       probe=probe_layer_norm, inputs=_random_norm_inputs, expect=_expect_layer_norm, hidden=True)
def matches_reference(out, inputs, expected):
    mistakes = named_mistakes(layer_norm_mistakes(inputs["x"], inputs["gamma"], inputs["beta"]))
    said = diagnose(out["y"], expected, mistakes, "the normalised output", rtol=1e-7)
    if said is None or any(said == text for text, _ in mistakes) or not float32_close(out["y"], expected):
        return said
    return None  # float32's precision: the precision check names it
