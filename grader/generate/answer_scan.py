"""The release's second leak scan: by what the bundle's code computes, not how it reads.

The text scan (release.py) finds the reference's statements however they are renamed or
laid out, but not code that computes the same thing written another way: a LayerNorm in
torch where the solution has its own loop, AdamW with a switch for each mistake, a
whole model as a float64 twin. This scan runs the code instead. For every public check:

1. the answers: the check's probe runs on the reference with the task's inputs (its
   make_inputs, seeded as a public run is), and what the task's function returns is
   recorded; so are the parts of the probe's result that change when the task's
   function does nothing (an optimizer's step returns None; the parameters it moves
   are its answer);
2. every function the bundle's grader/checks define (probes aside) is called with what
   fits its signature: the check's inputs, the names of the probe's result, and the
   arguments the task's function was called with; a result equal to an answer is a
   leak, unless computing it ran an operator the task forbids (torch's own
   cross_entropy may judge a cross-entropy: a student who copied it would score
   'forbidden') or the allow-list names the function (ALLOWED_FINDINGS.txt);
3. every public probe of the bundle runs on the reference with the task's function
   perturbed (its result moved off the answer): a part of the probe's result that
   still equals an answer was computed by the probe itself, from the other parts.

The bundle's code runs as the bundle has it: in a process of its own whose `grader` is
the bundle's (its imports resolve to the bundle's modules), beside the kit's reference.

    python -m grader.generate.answer_scan BUNDLE     # a folder the release wrote
"""

from __future__ import annotations

import argparse
import copy
import importlib
import importlib.util
import inspect
import itertools
import json
import os
import pickle
import signal
import subprocess
import sys
import types
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace

import torch

# This file runs in two places: in the kit (scan() starts the bundle's process) and as
# that process (python answer_scan.py --inside BUNDLE ...), where `grader` is the
# bundle's. So it imports no grader module at the top.
PUBLIC_SEED = 20261129  # grader.checks._api.PUBLIC_SEED, as a bundle of any age seeds its public inputs

CALL_SECONDS = 5  # one call of one function; longer is no answer anyway
# Reading what the kit wrote is no computing: the data on the fixed public inputs is the
# form the answers are meant to ship in (grader/checks/facts.py).
DATA_READERS = ("grader/checks/facts.py",)


@dataclass(frozen=True)
class AnswerFinding:
    path: str  # in the bundle
    function: str
    check: str  # the public check whose inputs it was called with
    how: str  # what it was called with, or "probe"

    def __str__(self):
        return (f"{self.path}::{self.function} computes the answer of {self.check.rsplit('.', 1)[0]} "
                f"(called {self.how}, on the inputs of {self.check})")


# ------------------------------------------------------------------ comparing


def _norm(value, depth=0):
    """A comparable form: a float64 tensor, a str, or a tuple of forms; None for what is
    not data."""
    if depth > 4:
        return None
    if isinstance(value, torch.Tensor):
        if value.is_complex():
            return None
        return value.detach().to(torch.float64).cpu()
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return torch.tensor(float(value), dtype=torch.float64)
    if isinstance(value, str):
        return value
    if hasattr(value, "data") and hasattr(value, "grad") and isinstance(getattr(value, "data"), (int, float)):
        return torch.tensor(float(value.data), dtype=torch.float64)  # a micro.py Value
    if isinstance(value, (list, tuple)):
        parts = [_norm(v, depth + 1) for v in value]
        if parts and all(isinstance(p, torch.Tensor) for p in parts) and len({tuple(p.shape) for p in parts}) == 1:
            return torch.stack(parts)
        if any(p is None for p in parts):
            return None
        return tuple(parts)
    return None


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape:
            return False
        return bool(torch.allclose(a, b, rtol=1e-6, atol=1e-9, equal_nan=True))
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return False


def _telling(form) -> bool:
    """Whether matching this answer says something: not a constant, a small whole number
    or a short text, which code could produce by chance."""
    if isinstance(form, str):
        return len(form) >= 4
    if isinstance(form, tuple):
        return any(_telling(part) for part in form)
    if isinstance(form, torch.Tensor):
        if form.numel() == 0 or not torch.isfinite(form).any():
            return False
        if form.numel() == 1:
            value = float(form)
            return value != round(value) or abs(value) >= 100
        flat = form.reshape(-1)
        return not bool((flat == flat[0]).all())
    return False


def _forms(value):
    """The forms a result is compared by: itself and, for a pair or a list, each part."""
    whole = _norm(value)
    found = [whole] if whole is not None else []
    if isinstance(value, (list, tuple)) and len(value) <= 8:
        found += [f for f in (_norm(v) for v in value) if f is not None]
    if isinstance(value, dict) and len(value) <= 16:
        found += [f for f in (_norm(v) for v in value.values()) if f is not None]
    return found


def _leaves(value, depth=0):
    """The data in a probe's result: every value of its dicts and lists, at any depth."""
    yield value
    if depth > 3:
        return
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item, depth + 1)
    elif isinstance(value, (list, tuple)) and len(value) <= 16:
        for item in value:
            yield from _leaves(item, depth + 1)


# ----------------------------------------------------------- running the probes


@contextmanager
def time_limit(seconds):
    def stop(signum, frame):
        raise TimeoutError("took too long")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def inputs_of(check) -> dict:
    """The check's inputs as a public run with the public seed draws them."""
    return check.make_inputs(torch.Generator().manual_seed(PUBLIC_SEED + sum(map(ord, check.name))))


def run_probe(probe, check, ns, inputs: dict):
    """The probe's result, called the way the engine calls it (separately, in parts, or once)."""
    sent = {key: value for key, value in copy.deepcopy(inputs).items() if not key.startswith("_")}
    if check.separately:
        first = check.separately[0]
        return {name: probe(ns, **{**{k: v for k, v in sent.items() if k not in check.separately},
                                   first: sent[name]}) for name in check.separately}
    if check.parts:
        merged, earlier = {}, {}
        for part in check.parts:
            result = probe(ns, **sent, part=part, earlier=earlier)
            earlier[part] = result
            if isinstance(result, dict):
                merged.update(result)
        return merged
    return probe(ns, **sent)


def _owner_and_name(ns, task):
    module = getattr(ns, task.module)
    *path, name = task.qualname.split(".")
    owner = module
    for part in path:
        owner = getattr(owner, part)
    return owner, name


@contextmanager
def replaced(ns, task, make):
    """The task's function replaced, for the body, by make(original)."""
    owner, name = _owner_and_name(ns, task)
    original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    setattr(owner, name, make(original))
    try:
        yield
    finally:
        setattr(owner, name, original)


def _snapshot(args):
    try:
        return copy.deepcopy(args)
    except Exception:  # noqa: BLE001 - what cannot be copied is not offered to the candidates
        return None


@dataclass
class Case:
    """One public check's answers, and what its candidates may be called with."""

    check: object
    inputs: dict
    answers: list
    moved: list  # the answers that are floating tensors the task returned: perturbing its result moves them
    named: dict  # name -> value: the inputs, the probe result's names, the task's keyword arguments
    positional: list  # argument tuples the task's function was called with (self left out)


def _is_method(task) -> bool:
    return "." in task.qualname


def _floating_parts(value):
    """The task's main output when it is a floating tensor: the result, or the first of a
    pair ((output, cache), (logits, loss, presents)); [] for ids, counts, None."""
    if isinstance(value, (list, tuple)) and value:
        value = value[0]
    if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() >= 2:
        return [value]
    return []


def record(ns, check, task) -> Case | None:
    """Run the check's probe on the reference, recording the task's calls; None when it
    does not run there (a check of a failure mode, say)."""
    inputs = inputs_of(check)
    calls = []

    def recording(original):
        def wrapper(*args, **kwargs):
            given = _snapshot((args[1:] if _is_method(task) else args, kwargs))
            result = original(*args, **kwargs)
            calls.append((given, _norm(result), _snapshot(result) if isinstance(result, (list, tuple)) else None,
                          [t.detach().double().clone() for t in _floating_parts(result)]))
            return result
        return wrapper

    try:
        with replaced(ns, task, recording), time_limit(60):
            result = run_probe(check.probe, check, ns, inputs)
    except Exception:  # noqa: BLE001 - a probe that fails on the reference gives no answers
        return None
    answers = [form for _, form, _, _ in calls if form is not None]
    for _, _, whole, _ in calls:  # the parts of a returned pair (logits, loss), (inputs, targets, mask)
        if whole is not None and len(whole) <= 4:
            answers += [f for f in (_norm(v) for v in whole) if f is not None]
    if len(calls) > 1:  # one position at a time: the sequence is the answer too
        stacked = _norm([form for _, form, _, _ in calls])
        if stacked is not None:
            answers.append(stacked)
    moved = [t for _, _, _, parts in calls for t in parts]

    def idle(original):
        def nothing(*args, **kwargs):
            return None
        return nothing

    try:  # what the probe reports changes when the task does nothing: that is its answer too
        with replaced(ns, task, idle), time_limit(60):
            lazy = run_probe(check.probe, check, ns, inputs)
        lazy_leaves = [_norm(v) for v in _leaves(lazy)]
        for leaf in _leaves(result):
            form = _norm(leaf)
            if isinstance(form, torch.Tensor) and not any(
                    other is not None and _same(form, other) for other in lazy_leaves):
                answers.append(form)
    except Exception:  # noqa: BLE001 - a task whose result the probe needs: its calls are the answer
        pass
    given = [f for f in (_norm(v) for v in _leaves(inputs)) if f is not None]
    answers = [a for a in answers if _telling(a) and not any(_same(a, g) for g in given)]
    moved = [a for a in moved if _telling(a) and not any(_same(a, g) for g in given)]
    if not answers:
        return None
    named = {**inputs, **(result if isinstance(result, dict) else {})}
    for given_call, _, _, _ in calls[:3]:
        if given_call is not None:
            named = {**given_call[1], **named}
    positional = [given_call[0] for given_call, _, _, _ in calls[:3] if given_call is not None]
    return Case(check, inputs, answers, moved, named, positional)


# ------------------------------------------------------------- the candidates


def _check_modules() -> dict[str, types.ModuleType]:
    """The bundle's check modules, as its catalogue imported them: path in the bundle -> module."""
    found = {}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if module is not None and path and (name == "grader.checks" or name.startswith("grader.checks.")):
            found["grader/checks/" + Path(path).relative_to(Path(sys.modules["grader.checks"].__file__).parent)
                  .as_posix()] = module
    return found


def _reference(root: Path) -> SimpleNamespace:
    """The reference package's modules (as grader/run/reference.py imports them in the kit)."""
    name = "_reference_hero_transformer"
    spec = importlib.util.spec_from_file_location(name, root / "__init__.py", submodule_search_locations=[str(root)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return SimpleNamespace(**{path.stem: importlib.import_module(f"{name}.{path.stem}")
                              for path in sorted(root.glob("*.py")) if path.name != "__init__.py"})


def _functions(module: types.ModuleType):
    for name, value in vars(module).items():
        if isinstance(value, types.FunctionType) and value.__module__ == module.__name__:
            yield name, value


def _is_probe(function) -> bool:
    parameters = list(inspect.signature(function).parameters)
    return bool(parameters) and parameters[0] == "ns"


def _bindings(function, case: Case):
    """Ways to call function from the case: every parameter by name, or the task's own
    arguments in order with the rest by name; (description, args, kwargs)."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return
    plain = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if any(p.kind == p.VAR_POSITIONAL for p in parameters) or not plain:
        return
    required = [p for p in plain if p.default is p.empty]
    if all(p.name in case.named for p in required):
        kwargs = {p.name: case.named[p.name] for p in plain if p.name in case.named}
        yield f"with {', '.join(kwargs)} by name", (), kwargs
    for args in case.positional:
        ordered = [p for p in plain if p.kind != p.KEYWORD_ONLY]
        if not args or len(args) > len(ordered):
            continue
        rest = ordered[len(args):] + [p for p in plain if p.kind == p.KEYWORD_ONLY]
        if all(p.name in case.named or p.default is not p.empty for p in rest):
            kwargs = {p.name: case.named[p.name] for p in rest if p.name in case.named}
            yield "with the task's own arguments", tuple(args), kwargs


def _answers_it(result, case: Case, given) -> bool:
    """Whether the result (or a part of it) is an answer that is none of what it was given."""
    passed = [form for value in given for form in _forms(value)]
    return any(_same(form, answer) and not any(_same(form, g) for g in passed)
               for form in _forms(result) for answer in case.answers)


def _forbidden_ran(task, function, args, kwargs) -> tuple[bool, object]:
    """Call function under the task's operator rules: (whether it ran what the task
    forbids, its result)."""
    from grader.run.inside.op_rules import ForbiddenCall, Rules, watching

    tripped: list = []
    try:
        with watching(Rules(task.forbidden_ops, task.no_autograd), tripped):
            result = function(*args, **kwargs)
    except ForbiddenCall:
        return True, None
    return bool(tripped), result


def _allowed(rel: str, name: str, allowed: dict[str, str]) -> bool:
    return f"{rel}::{name}" in allowed or rel in allowed


def scan(bundle: Path, allowed: dict[str, str] | None = None, chapters: list[str] | None = None) -> list[AnswerFinding]:
    """Every function of the bundle's checks that computes a task's answer on that task's
    public inputs, and every probe that computes it without the task: run in a process
    whose `grader` is the bundle's."""
    from grader.generate.allowed import read_allow_list
    from grader.run.reference import REFERENCE_PACKAGE

    allowed = read_allow_list() if allowed is None else allowed
    bundle = Path(bundle).resolve()
    command = [sys.executable, str(Path(__file__).resolve()), "--inside", str(bundle),
               "--reference", str(REFERENCE_PACKAGE), "--allowed", json.dumps(allowed)]
    if chapters:
        command += ["--chapters", ",".join(chapters)]
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    env["PYTHONPATH"] = str(bundle)
    done = subprocess.run(command, cwd=bundle, env=env, capture_output=True, text=True, timeout=1800)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the answer scan of {bundle} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return [AnswerFinding(**entry) for entry in json.loads(lines[-1])]


def _scan_inside(reference_root: Path, allowed: dict[str, str], chapters: list[str] | None) -> list[AnswerFinding]:
    """The scan itself, in the bundle's process."""
    from grader.checks import catalogue

    ns = _reference(reference_root)
    tasks = catalogue.tasks()
    checks = [c for c in catalogue.all_checks() if not c.hidden and not (chapters and c.chapter not in chapters)]
    modules = _check_modules()
    candidates = [(rel, name, function) for rel, module in modules.items() for name, function in _functions(module)]
    paths = {module.__name__: rel for rel, module in modules.items()}
    findings: list[AnswerFinding] = []
    seen = set()
    torch.set_grad_enabled(True)
    for check in checks:
        task = tasks[check.task]
        case = record(ns, check, task)
        if case is None:
            continue
        fresh = _Copies()
        for rel, name, function in candidates:
            if (rel, name, task.name) in seen or _is_probe(function) or _allowed(rel, name, allowed) \
                    or rel in DATA_READERS:
                continue
            for how, args, kwargs in itertools.islice(_bindings(function, case), 4):
                try:
                    with time_limit(CALL_SECONDS):
                        forbidden, result = _forbidden_ran(task, function, *fresh(args, kwargs))
                except Exception:  # noqa: BLE001 - what does not run on these inputs computes nothing here
                    continue
                if not forbidden and _answers_it(result, case, [*args, *kwargs.values()]):
                    seen.add((rel, name, task.name))
                    findings.append(AnswerFinding(rel, name, check.name, how))
                    break
        probe_path = paths.get(check.probe.__module__, "?")
        if case.moved and (probe_path, check.probe.__name__, task.name) not in seen and not _allowed(
                probe_path, check.probe.__name__, allowed) and _probe_computes(ns, check, task, case):
            seen.add((probe_path, check.probe.__name__, task.name))
            findings.append(AnswerFinding(probe_path, check.probe.__name__, check.name,
                                          "as the probe, with the task's answer moved"))
    return findings


class _Copies:
    """Fresh copies of a case's arguments for each call (a candidate may change what it is
    given), made from one pickle of them per binding: a model of Values is thousands of
    objects, which unpickling rebuilds far faster than deepcopy walks them. What does not
    pickle is deep-copied."""

    def __init__(self):
        self.pickled: dict = {}

    def __call__(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        key = (tuple(map(id, args)), tuple((name, id(value)) for name, value in kwargs.items()))
        if key not in self.pickled:
            try:
                self.pickled[key] = pickle.dumps((args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # noqa: BLE001 - a lambda, a generator, a tensor in a graph: copied the slow way
                self.pickled[key] = None
        blob = self.pickled[key]
        return pickle.loads(blob) if blob is not None else (copy.deepcopy(args), copy.deepcopy(kwargs))


def _perturbed(value):
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value * 1.5 + 0.25
    if isinstance(value, tuple):
        return tuple(_perturbed(v) for v in value)
    if isinstance(value, list):
        return [_perturbed(v) for v in value]
    return value


def _probe_computes(ns, check, task, case) -> bool:
    """The check's probe, run with the task's answer moved: whether a part of its result is
    still the answer, which the probe then computed itself, from the other parts."""
    def moved(original):
        def wrapper(*args, **kwargs):
            return _perturbed(original(*args, **kwargs))
        return wrapper

    try:
        with replaced(ns, task, moved), time_limit(60):
            result = run_probe(check.probe, check, ns, inputs_of(check))
    except Exception:  # noqa: BLE001 - a probe that needs the right answer to go on computes nothing more
        return False
    return any((form := _norm(leaf)) is not None and any(_same(form, answer) for answer in case.moved)
               for leaf in _leaves(result))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.generate.answer_scan", description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", type=Path, nargs="?", help="a folder the release wrote (hero_transformer-student)")
    parser.add_argument("--chapters", help="only these chapters' checks, e.g. 05,08")
    parser.add_argument("--inside", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--reference", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--allowed", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    chapters = [c.strip().zfill(2) for c in args.chapters.split(",")] if args.chapters else None
    if args.inside:
        findings = _scan_inside(args.reference, json.loads(args.allowed or "{}"), chapters)
        print(json.dumps([asdict(f) for f in findings]))
        return 0
    if args.bundle is None:
        parser.error("say which bundle to scan")
    findings = scan(args.bundle, chapters=chapters)
    for finding in findings:
        print(finding)
    print(f"{len(findings)} place(s) in {args.bundle} compute a task's answer")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
