"""Every call the kit makes into a student's function keeps the promise of the lesson
that defines it: a lesson that says LayerNorm receives `[B, T, d]` is believed by its
students (`B, T, d = x.shape`), so no chapter's check may hand it `[3, 4]`.

    python -m grader.generate.promises     (part of `make student`; exit 1 on a broken promise)

A task declares what its lesson promises (Task.takes: argument, number of axes). This
runs every check of every chapter, public and hidden, on the reference in this process,
with each such function wrapped to record the arguments it is called with, and names
each check whose probe, or a reference part it runs, breaks a promise.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import sys

import torch

from grader.checks import catalogue


def _owner(modules, task):
    """(object holding the function, attribute name) for a task's module:qualname."""
    holder = getattr(modules, task.module)
    *path, name = task.qualname.split(".")
    for part in path:
        holder = getattr(holder, part)
    return holder, name


def _recording(function, task, broken: list, current: list):
    signature = inspect.signature(function)
    promised = dict(task.takes)

    @functools.wraps(function)
    def recorded(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            bound = None
        for argument, axes in promised.items():
            value = bound.arguments.get(argument) if bound is not None else None
            if isinstance(value, torch.Tensor) and value.dim() != axes:
                broken.append((current[0], task, argument, axes, tuple(value.shape)))
        return function(*args, **kwargs)

    return recorded


def _runs(check):
    """The calls a check's probe gets, as the engine makes them: one, one per input probed
    separately, or one per part of a comparison."""
    generator = torch.Generator().manual_seed(0)
    inputs = {k: v for k, v in check.make_inputs(generator).items() if not k.startswith("_")}
    if check.separately:
        first = check.separately[0]
        rest = {k: v for k, v in inputs.items() if k not in check.separately}
        return [{**rest, first: inputs[name]} for name in check.separately]
    if check.parts:
        return [{**inputs, "part": part, "earlier": {}} for part in check.parts]
    return [inputs]


def broken_promises() -> list[str]:
    """One sentence per check whose calls break a lesson's promise; [] when all keep them."""
    from grader.run.reference import Reference

    modules = Reference.available().modules
    broken: list = []
    current = [""]
    kept = []
    for task in catalogue.tasks().values():
        if task.takes:
            holder, name = _owner(modules, task)
            original = inspect.getattr_static(holder, name)
            kept.append((holder, name, original))
            setattr(holder, name, _recording(original, task, broken, current))
    try:
        for check in catalogue.all_checks():
            current[0] = check.name
            for inputs in _runs(check):
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(0)
                    try:
                        check.probe(modules, **inputs)
                    except Exception:  # noqa: BLE001 - a probe made for the worker; what it passed is recorded
                        pass
    finally:
        for holder, name, original in kept:
            setattr(holder, name, original)
    said, seen = [], set()
    for check, task, argument, axes, shape in broken:
        if (check, task.name, argument) in seen:
            continue
        seen.add((check, task.name, argument))
        chapter = catalogue.chapter_of_task()[task.name].number
        said.append(f"{check} passes {task.qualname} {argument} of shape {list(shape)}, but the chapter {chapter} "
                     f"lesson promises {axes} axes (Task.takes of '{task.name}'): give it {axes} axes, or change "
                     f"the lesson's promise and the task's `takes` together")
    return said


def main(argv=None) -> int:
    argparse.ArgumentParser(prog="python -m grader.generate.promises", description=__doc__.split("\n\n")[0]).parse_args(argv)
    said = broken_promises()
    for sentence in said:
        print(sentence, file=sys.stderr)
    if not said:
        promised = sum(1 for t in catalogue.tasks().values() if t.takes)
        print(f"every check keeps what the lessons promise the {promised} functions they describe receive")
    return 1 if said else 0


if __name__ == "__main__":
    sys.exit(main())
