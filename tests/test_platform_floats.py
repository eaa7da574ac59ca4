"""Facts that survive another libm.

A student's laptop draws chapter 00's weights with its own libm: random.gauss is built
on log, cos and sin, whose last bits differ between glibc, macOS and Windows' UCRT, and
so do math.exp and math.log in the student's Value. Every public fact such a value
reaches is compared to a tolerance, and what the judges look facts up by (the inputs)
is stored, never drawn anew.

Held here on Linux: an interpreter whose start-up (a .pth line, which also runs in the
portable runner's workers, started with -I) moves the results of math's transcendental
functions and of random.gauss one ulp away runs the release bundle's whole public check.
The reference keeps every public point and the stubs get none. Each process of that
interpreter writes down what its own random.gauss and math.exp give, so the test sees
that the workers that ran the student's code were nudged too.
"""

from __future__ import annotations

import ast
import json
import math
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import KIT_ROOT
from grader.checks.ch00_micro.common import WEIGHTS_CHANGED, micro_tables, model_of, weights_changed
from grader.checks.ch00_micro.micro_block import formula as micro_block_formula
from grader.checks.ch00_micro.micro_forward import formula as micro_forward_formula
from grader.checks.facts import known_facts
from grader.generate.release import build
from grader.run.schedule import possible_points
from grader.run.reference import REFERENCE_PACKAGE, Reference
from tests.test_portable_runner import _python_starting_with

# Exact results stay: C's Annex F fixes exp(0) = 1, log(1) = 0, cos(0) = 1 on every
# platform, and a nudged 1 would be a libm no student has. math.sqrt is not nudged:
# IEEE 754 rounds it correctly, so every platform gives the same bits (the kit's inputs
# use it, e.g. chapter 05's Example 1 at 1/sqrt(1.00001)). random is imported before math
# is nudged, so gauss keeps libm's own log, cos and sin and moves by one ulp, not several.
ONE_ULP_AWAY = r'''
import math
import os
import random
import struct
import sys

_NAMES = ("exp", "expm1", "log", "log1p", "log2", "log10", "cos", "sin", "tan", "acos", "asin", "atan", "atan2",
          "cosh", "sinh", "tanh", "erf", "erfc", "pow")


def _away(x, _next=math.nextafter, _inf=math.inf):
    if not isinstance(x, float) or x != x or x in (_inf, -_inf) or (x == int(x) and abs(x) < 2.0 ** 53):
        return x
    # Up or down by the last bit, so that the same argument always gives the same result.
    odd = struct.unpack("<q", struct.pack("<d", x))[0] & 1
    return _next(x, -_inf if odd else _inf)


def _nudged(plain):
    def nudged(*args):
        return _away(plain(*args))
    nudged.__name__, nudged.__qualname__, nudged.__doc__ = plain.__name__, plain.__qualname__, plain.__doc__
    return nudged


def _nudged_draw(plain):
    def draw(self, mu=0.0, sigma=1.0):
        return _away(plain(self, mu, sigma))
    draw.__name__, draw.__qualname__, draw.__doc__ = plain.__name__, plain.__qualname__, plain.__doc__
    return draw


for _name in _NAMES:
    setattr(math, _name, _nudged(getattr(math, _name)))
for _name in ("gauss", "normalvariate"):
    setattr(random.Random, _name, _nudged_draw(getattr(random.Random, _name)))
    setattr(random, _name, getattr(random._inst, _name))  # the module's functions are bound methods

with open(__LOG__, "a", encoding="utf-8") as _log:
    _log.write(repr([os.getpid(), sys.orig_argv, random.Random(5).gauss(0.0, 1.0), math.exp(0.7)]) + "\n")
'''


@pytest.fixture(scope="module")
def nudged(tmp_path_factory) -> tuple[Path, Path]:
    """The one-ulp interpreter and the file each of its processes writes a line to."""
    folder = tmp_path_factory.mktemp("one_ulp")
    log = folder / "processes.log"
    python = _python_starting_with(folder / "venv", ONE_ULP_AWAY.replace("__LOG__", repr(str(log))))
    return python, log


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    # The release's leak scans are test_release.py's: here only the bundle's content counts.
    folder, _, findings = build(tmp_path_factory.mktemp("release"), None, run_scan=False)
    assert not findings
    return folder


def _processes(log: Path) -> list[list]:
    return [ast.literal_eval(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]


def _check(python: Path, bundle: Path, package: str, log: Path) -> tuple[int, str, list[list]]:
    log.write_text("", encoding="utf-8")
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("PYTHONPATH", None)  # the bundle's grader, found from its folder, as a student's
    done = subprocess.run([str(python), "-m", "grader", "check", package, "--runner", "portable"], cwd=bundle,
                          env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900)
    return done.returncode, done.stdout + done.stderr, _processes(log)


def test_the_interpreter_is_one_ulp_away(nudged):
    python, log = nudged
    code = "import math, random; print(repr([random.Random(5).gauss(0.0, 1.0), math.exp(0.7), math.exp(0.0)]))"
    plain = json.loads(subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                                      check=True).stdout)
    moved = json.loads(subprocess.run([str(python), "-I", "-c", code], capture_output=True, text=True,
                                      check=True).stdout)
    assert moved[0] != plain[0] and moved[0] in (math.nextafter(plain[0], math.inf),
                                                 math.nextafter(plain[0], -math.inf)), (moved, plain)
    assert moved[1] != plain[1] and abs(moved[1] - plain[1]) == math.ulp(plain[1]), (moved, plain)
    assert moved[2] == plain[2] == 1.0


def _assert_workers_nudged(processes: list[list]) -> None:
    """The grading process and every worker that ran the submission drew with the nudged libm."""
    plain = [random.Random(5).gauss(0.0, 1.0), math.exp(0.7)]
    workers = [p for p in processes if any(arg.endswith("portable_worker.py") for arg in p[1])]
    assert workers, processes
    for _, argv, gauss, exp in processes:
        assert gauss != plain[0] and exp != plain[1], (argv, gauss, exp, plain)


@pytest.mark.slow
def test_the_reference_keeps_every_public_point_one_ulp_away(nudged, bundle, tmp_path):
    python, log = nudged
    shutil.copytree(REFERENCE_PACKAGE, bundle / "mine", ignore=shutil.ignore_patterns("__pycache__"),
                    dirs_exist_ok=True)
    code, text, processes = _check(python, bundle, "mine", log)
    full = possible_points(None, public_only=True)
    assert code == 0 and f"Total: {full:g} / {full:g} points" in text, text[-6000:]
    _assert_workers_nudged(processes)


@pytest.mark.slow
def test_the_stubs_score_zero_one_ulp_away(nudged, bundle):
    python, log = nudged
    code, text, processes = _check(python, bundle, "hero_transformer", log)
    assert code == 1 and f"Total: 0 / {possible_points(None, public_only=True):g} points" in text, text[-6000:]
    assert "Traceback" not in text
    _assert_workers_nudged(processes)


# ------------------------------------------- the weights check of chapter 00, in process


def _tables(handle) -> tuple[dict, dict]:
    inputs = handle.check.make_inputs(None)
    micro = Reference.available().modules.micro
    model = model_of(micro, inputs["sizes"], inputs["seed"], inputs.get("spread"))
    return micro_tables(model), known_facts(inputs)


@pytest.mark.parametrize("handle", [micro_block_formula, micro_forward_formula], ids=lambda h: h.name)
def test_weights_an_ulp_apart_are_the_same_weights(handle):
    tables, facts = _tables(handle)
    assert not weights_changed({"tables": tables}, facts)
    for way in (math.inf, -math.inf):
        moved = {name: [[math.nextafter(x, way) for x in row] for row in rows] for name, rows in tables.items()}
        assert not weights_changed({"tables": moved}, facts), way


@pytest.mark.parametrize("handle", [micro_block_formula, micro_forward_formula], ids=lambda h: h.name)
def test_weights_drawn_otherwise_are_named(handle):
    tables, facts = _tables(handle)
    swapped = dict(tables, **{"layer0.wq": tables["layer0.wk"], "layer0.wk": tables["layer0.wq"]})
    transposed = dict(tables, **{"layer0.wq": [list(column) for column in zip(*tables["layer0.wq"])]})
    rows_swapped = dict(tables, wte=[tables["wte"][1], tables["wte"][0], *tables["wte"][2:]])
    one_entry = dict(tables, wpe=[[x + 1e-6 for x in tables["wpe"][0]], *tables["wpe"][1:]])
    wider = {name: [[x * 1.01 for x in row] for row in rows] for name, rows in tables.items()}
    for changed in (swapped, transposed, rows_swapped, one_entry, wider, {**tables, "extra": [[0.5]]}):
        assert weights_changed({"tables": changed}, facts)
    assert weights_changed({"tables": {**tables, "wte": [["x"]]}}, facts)
    assert handle({"tables": swapped}, handle.check.make_inputs(None), None) == WEIGHTS_CHANGED
