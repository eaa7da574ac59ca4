"""The hidden checks of the task micro_sample."""

from __future__ import annotations

from grader.checks._api import check
from grader.checks.ch00_micro.hidden.common import random_seed
from grader.checks.ch00_micro.micro_sample import temperature, probe_sample_temperature


@check("temperature_reseeded", 1, "the same with a random seed", probe=probe_sample_temperature,
       inputs=lambda g: {"seed": random_seed(g), "temperature": 0.5, "draws": 600}, hidden=True)
def temperature_reseeded(out, inputs, expected):
    """The public temperature, for the hidden check above."""
    return temperature(out, inputs, expected)
