"""The stamp every results file carries: what a grade was computed with, so two gradings
of the same upload can be compared and a regrade is never mistaken for the first grade.

    kit      a hash of what a grade depends on: the engine, the sandbox, the checks and
             the reference (the rest of grader/ only shapes what is written)
    checks   a hash of the check table: every check's name, points and hidden flag, in
             the catalogue's order (a check added, removed, re-weighted or hidden)
    torch    the torch the checks ran on
    python   the interpreter the grader ran on
    seed     the seed the hidden checks drew their random inputs from (None: unknown)
    id       a short hash of all of the above: two gradings with the same id used the
             same grader on the same footing

Written by results_json (Gradescope's results.json, under extra_data), the staff
companion, grade-class's records, PrairieLearn's results.json and Autolab's output.
"""

from __future__ import annotations

import hashlib
import json
import platform
from functools import lru_cache
from importlib import metadata

from grader import KIT_ROOT

# What a grade depends on. Class outputs, build tools and the mutant catalogue only shape
# what is written, so editing them changes no stamp (and regrades nothing).
GRADING = ("grader/__init__.py", "grader/run", "grader/checks", "solutions/hero_transformer")


@lru_cache(maxsize=1)
def kit_version() -> str:
    """Changes whenever the checks, the engine, the sandbox or the reference do."""
    digest = hashlib.sha256()
    for base in (KIT_ROOT / part for part in GRADING):
        for path in sorted([base] if base.is_file() else base.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            digest.update(str(path.relative_to(KIT_ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


@lru_cache(maxsize=1)
def check_table() -> str:
    """A hash of the catalogue's checks (name, points, hidden), in order."""
    from grader.checks import catalogue

    rows = [[c.name, float(c.points), bool(c.hidden)] for c in catalogue.all_checks()]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]


@lru_cache(maxsize=1)
def torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:  # a torch built from source, or vendored
        import torch

        return str(torch.__version__)


def stamp(seed: int | None) -> dict:
    """The stamp of a grading run with this seed, on this machine, with this kit."""
    fields = {"kit": kit_version(), "checks": check_table(), "torch": torch_version(),
              "python": platform.python_version(), "seed": seed}
    return {**fields, "id": stamp_id(fields)}


def stamp_id(fields: dict) -> str:
    """The short hash naming a stamp (its `id`), from its other fields."""
    kept = {k: fields.get(k) for k in ("kit", "checks", "torch", "python", "seed")}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:12]


def describe(found: dict | None) -> str:
    """One line naming a stamp for people: `3f2a… (kit …, checks …, torch …, Python …, seed …)`."""
    if not found:
        return "no stamp (graded before stamps were written)"
    return (f"{found.get('id', '?')} (kit {found.get('kit', '?')}, checks {found.get('checks', '?')}, "
            f"torch {found.get('torch', '?')}, Python {found.get('python', '?')}, seed {found.get('seed')})")
