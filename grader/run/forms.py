"""The form of a probe's answer: which kinds of values sit where (a dict's keys, a
sequence's items, a tensor's number of axes and kind of number), not the values.

A judge reads an answer of its probe's form. When it raises on one, the course's check
is at fault, not the student's code, and the student is told to report it; when it
raises on an answer of another form, the answer is at fault, and the student is told
what the form should have been. The form each check's answer has on the reference is
written by `make student` (grader/generate/forms.py) beside the chapter's facts: a
public check's in forms.json, which the release ships, a hidden check's in hidden/.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

import torch

from grader.run.inside.wire import Opaque

FORMS_FILE = "forms.json"
CHECKS_FOLDER = Path(__file__).resolve().parent.parent / "checks"
# A sequence longer than this is described by the kinds its items take, not item by item.
_LISTED = 16


def form_of(value, depth: int = 0):
    """A plain-data description of what kind of value this is, JSON-ready."""
    if depth > 8:
        return "deep"
    if isinstance(value, torch.Tensor):
        kind = "bool" if value.dtype == torch.bool else ("float" if value.is_floating_point() else
                                                         "complex" if value.is_complex() else "int")
        return f"tensor/{value.dim()}/{kind}"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        # An int past the floats' range is no number a judge can compare (float() of it
        # raises): its own form, never the one the reference's answer has.
        return "number" if isinstance(value, float) or _fits_float(value) else "huge"
    if isinstance(value, str):
        return "text"
    if value is None:
        return "none"
    if isinstance(value, Opaque):  # sent back by its type alone (wire.plain): no class name of the code's
        return "opaque"
    if isinstance(value, dict):
        return {"dict": {str(key): form_of(item, depth + 1) for key, item in sorted(value.items(), key=str)}}
    if isinstance(value, (list, tuple)):
        if len(value) <= _LISTED:
            return {"items": [form_of(item, depth + 1) for item in value]}
        return {"many": sorted({json.dumps(form_of(item, depth + 1), sort_keys=True) for item in value})}
    return type(value).__name__


def _fits_float(number: int) -> bool:
    try:
        float(number)
    except OverflowError:
        return False
    return True


def difference(answer, declared) -> str | None:
    """Where an answer's form departs from the declared one, in words; None where it does not."""
    return _where(form_of(answer), declared, "the output")


def _where(have, want, place: str) -> str | None:
    if have == want:
        return None
    if isinstance(want, dict) and isinstance(have, dict) and want.keys() == have.keys():
        if "dict" in want:
            missing = sorted(set(want["dict"]) - set(have["dict"]))
            if missing:
                return f"{place} has no key {missing[0]!r}"
            if set(have["dict"]) - set(want["dict"]):
                # Never the key itself: in a graded run the code picks its name, and it says
                # nothing the student does not know.
                return f"{place} has keys besides {', '.join(map(repr, want['dict']))}"
            for key in want["dict"]:
                found = _where(have["dict"][key], want["dict"][key], f"{place}[{key!r}]")
                if found:
                    return found
        if "items" in want:
            if len(have["items"]) != len(want["items"]):
                return f"{place} holds {len(have['items'])} items where it should hold {len(want['items'])}"
            for i, (a, b) in enumerate(zip(have["items"], want["items"])):
                found = _where(a, b, f"{place}[{i}]")
                if found:
                    return found
        return f"{place} holds items of other kinds than it should"
    return f"{place} is {_said(have)} where it should be {_said(want)}"


def _said(form) -> str:
    if isinstance(form, str) and form.startswith("tensor/"):
        _, axes, kind = form.split("/")
        return f"a {kind} tensor with {axes} ax{'i' if axes == '1' else 'e'}s"
    if isinstance(form, dict):
        return ("a dict" if "dict" in form else f"a sequence of {len(form['items'])}" if "items" in form
                else "a long sequence")
    return {"number": "a number", "bool": "True or False", "text": "text", "none": "None",
            "huge": "a whole number too large for a float",
            "opaque": "an object that is not plain data"}.get(form, str(form))


def unlike(answer, reference, place: str = "the output", depth: int = 0) -> "str | None":
    """Where an answer of the right form departs from the reference's answer to the same
    inputs in what a form does not hold: a tensor's shape, NaN or infinity where the
    reference has none, a length, a number no float holds. None where nothing does: a
    judge that raised on such an answer is the course's check at fault."""
    if depth > 8:
        return None
    if isinstance(answer, torch.Tensor) and isinstance(reference, torch.Tensor):
        if answer.shape != reference.shape:
            return f"{place} has shape {tuple(answer.shape)} where it should have {tuple(reference.shape)}"
        if _non_finite(answer) and not _non_finite(reference):
            return f"{place} holds NaN or infinity"
        return None
    if isinstance(answer, dict) and isinstance(reference, dict):
        for key in reference:
            if key in answer:
                found = unlike(answer[key], reference[key], f"{place}[{key!r}]", depth + 1)
                if found:
                    return found
        return None
    if isinstance(answer, (list, tuple)) and isinstance(reference, (list, tuple)):
        if len(answer) != len(reference):
            return f"{place} holds {len(answer)} items where it should hold {len(reference)}"
        for i, (a, b) in enumerate(zip(answer[:256], reference[:256])):
            found = unlike(a, b, f"{place}[{i}]", depth + 1)
            if found:
                return found
        return None
    if isinstance(answer, (int, float)) and not isinstance(answer, bool) and isinstance(reference, float):
        if isinstance(answer, float) and not math.isfinite(answer) and math.isfinite(reference):
            return f"{place} is {answer!r}"
        if isinstance(answer, int) and abs(answer) > 1e150 > abs(reference):
            return f"{place} is a whole number of about {int(answer.bit_length() * 0.30103) + 1} digits"
    return None


def _non_finite(tensor) -> bool:
    return bool(tensor.is_floating_point() or tensor.is_complex()) and not bool(torch.isfinite(tensor).all())


@lru_cache(maxsize=None)
def written(folder: str) -> dict:
    from grader.profile import PHASES

    with PHASES.phase("facts and forms loaded"):
        try:
            return json.loads((CHECKS_FOLDER / folder / FORMS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}


def declared(check):
    """The form of the check's answer on the reference, as `make student` wrote it (a
    hidden check's in the chapter's hidden/ folder, which the release leaves out); None
    for a check whose answer is gathered from several runs, and where nothing was written."""
    from grader.checks import catalogue

    if check.task not in catalogue.tasks():
        return None
    package = catalogue.chapter_of_task()[check.task].module
    return written(f"{package}/{catalogue.HIDDEN}" if check.hidden else package).get(check.name)


def reference_form(check, modules):
    """What `make student` writes: the reference's answer's form for a check probed in one
    call; None for a check whose answer is gathered from several runs."""
    if check.separately or check.parts:
        return None
    generator = torch.Generator().manual_seed(0)
    inputs = {k: v for k, v in check.make_inputs(generator).items() if not k.startswith("_")}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return form_of(check.probe(modules, **inputs))
