"""What a public check knows about the right answer on its inputs, as data.

A public judge that needs the right output, or the output of a known mistake, to say
what is wrong does not compute it: code that computes it would be the task's answer,
handed to every student with the release. The kit computes those numbers instead,
with code only it holds (each chapter's hidden/ modules, which the release leaves
out), on the check's fixed inputs, and writes them into the chapter's package as
facts.json (`make student` runs grader/generate/facts.py). A public judge reads them
with known_facts(inputs).

Such a check's inputs are the same on every run: constants, or drawn once by the kit
from a generator seeded for the check (its fixed_inputs=True) and stored with the
facts, so that every platform gets the same numbers. The facts are found by a digest of
the inputs, so inputs that changed without the facts being written again are an error,
never a silent wrong verdict.

A hidden module registers what its chapter's public checks need with @facts_for. Where
those modules are present but a package of the kit left the data files out (an LMS
upload that copies only code), the facts are computed here from them instead; the
student release has neither, and needs the files.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import torch

from grader.checks._slots import strip

# The key under which the engine tells a judge, beside a check's inputs, which parts the
# task builds on are the student's own (grader.checks._api.own_parts): never part of the
# digest that finds the check's facts.
OWN_PARTS = "_own_parts"

FILE = "facts.json"
REGISTERED = "__public_facts__"  # where @facts_for keeps a hidden module's facts functions

_TENSOR = "__tensor__"


class MissingFacts(LookupError):
    """No facts were written for these inputs: the kit's `make student` writes them."""


def facts_for(*checks):
    """Register, in a hidden module, the function that computes what the public checks
    `checks` need on their inputs: fn(ref, inputs) -> plain data (numbers, lists, dicts
    with str keys, tensors), ref being the reference's modules. The checks are given by
    their handles, imported from the task's module (grader.checks._api.CheckHandle), so
    that facts never wait under a name no check has any more."""
    for handle in checks:
        if isinstance(handle, str):
            raise TypeError(f"facts_for takes the checks' handles, imported from where they are declared, not "
                            f"the name {handle!r}")

    def register(function):
        table = sys.modules[function.__module__].__dict__.setdefault(REGISTERED, {})
        for handle in checks:
            table[handle.name] = function
        return function

    return register


# ------------------------------------------------------------------- the encoding


def significant(value, digits: int = 10):
    """Floating numbers kept to `digits` significant digits (a relative change of at most
    5e-10 for ten): for what a judge only ever matches with a relative tolerance of 1e-7
    or more, such as the outputs of the classic mistakes, so that the data stays small."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        rounded = [float(f"{x:.{digits}g}") for x in value.detach().cpu().reshape(-1).tolist()]
        return torch.tensor(rounded, dtype=value.dtype).reshape(value.shape)
    if isinstance(value, float):
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {key: significant(item, digits) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [significant(item, digits) for item in value]
    return value


def encode(value):
    """Plain data as JSON values: tensors as their dtype, shape and values; tuples as lists."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        return {_TENSOR: str(value.dtype).removeprefix("torch."), "shape": list(value.shape),
                "values": value.reshape(-1).tolist()}
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise TypeError("facts are dicts with str keys")
        return {key: encode(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(item) for item in value]
    if isinstance(value, str):
        return strip(value)  # the words alone: a value's marks are for this run's sentences
    if value is None or isinstance(value, (bool, int, float)):
        return value
    raise TypeError(f"facts are plain data, not {type(value).__name__}")


def decode(value):
    if isinstance(value, dict):
        if _TENSOR in value:
            dtype = getattr(torch, value[_TENSOR])
            return torch.tensor(value["values"], dtype=dtype).reshape(value["shape"])
        return {key: decode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decode(item) for item in value]
    return value


def digest(inputs: dict) -> str:
    """A check's inputs, every number exactly, as a short digest."""
    inputs = {key: value for key, value in inputs.items() if key != OWN_PARTS}
    text = json.dumps(encode(inputs), sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def inputs_are_fixed(check) -> bool:
    """Whether a check's inputs are the same on every run: fixed_inputs, constants, or a
    function of the generator that draws nothing from it (the same under two seeds)."""
    if check.fixed_inputs or not callable(check.inputs):
        return True
    drawn = [digest(check.inputs(torch.Generator().manual_seed(seed))) for seed in (0, 1)]
    return drawn[0] == drawn[1]


# ---------------------------------------------------------------------- reading

_loaded: dict[str, object] | None = None
# Where facts no data file holds are computed (an LMS package that copied only the kit's
# code): set by the grader when it loads the reference (grader/run/reference.py), which no
# check imports; None where no reference is at hand.
compute_missing = None
_given: dict[str, object] = {}


def _index() -> dict[str, object]:
    """digest -> encoded facts, over every chapter's facts.json present (and, aside, the
    stored inputs of the checks with fixed inputs, by name)."""
    global _loaded
    if _loaded is None:
        from grader.profile import PHASES  # read by judges, in the grader: never where probes run

        with PHASES.phase("facts and forms loaded"):
            found = {}
            for path in sorted(Path(__file__).parent.glob(f"ch*/{FILE}")):
                data = json.loads(path.read_text(encoding="utf-8"))
                for name, entry in data["checks"].items():
                    found[entry["inputs"]] = entry["facts"]
                    if "given" in entry:
                        _given[name] = entry["given"]
            _loaded = found
    return _loaded


def stored_inputs(check_name: str) -> dict | None:
    """The inputs the kit drew for a check with fixed inputs, or None where none are stored."""
    _index()
    given = _given.get(check_name)
    return None if given is None else decode(given)


def known_facts(inputs: dict):
    """What the kit wrote for a public check with these inputs."""
    key = digest(inputs)
    found = _index().get(key)
    if found is None and compute_missing is not None:
        found = compute_missing(key)
    if found is None:
        raise MissingFacts(f"no facts were written for these inputs ({key}): the kit writes them with "
                           f"`make student` (grader/generate/facts.py)")
    return decode(found)
