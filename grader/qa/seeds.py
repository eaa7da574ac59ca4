"""Seeds as a dimension of every check.

A class draws a seed per upload (grade-class: from the class seed and the upload's
content), so a check must give a right answer its points on every seed, and tell a
mistake the same way on every seed. This sweep judges, in this process, the reference
and every correct variant of the catalogue under many seeds, and every mutant under a
few, and reports each check that loses a right answer's point on some seed, and each
mutant named on some seeds and not on others.

    python -m grader.qa.seeds                      # the sweep `make mutants` runs
    python -m grader.qa.seeds --seeds 1500 --chapters 09 --only reference

Only the course's own code runs here (the reference, its variants and mutants), so no
sandbox is needed: each check's probe and judge run as the grader runs them, with the
answer passed through the wire's encoding, but without a worker. The seeds are the
grader's: the seed a class would draw, plus the check's name, as worker_session.Grading does.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
import tempfile
import types
from dataclasses import dataclass, field
from pathlib import Path

from grader.qa.accuracy_page import SECTION

import torch

from grader.checks import catalogue
from grader.checks._api import Check
from grader.run.inside import wire
from grader.run.reference import Reference

# Seeds as uploads draw them: 31-bit integers (engine.grade draws the same range).
DEFAULT_SEEDS, DEFAULT_MUTANT_SEEDS, SWEEP_SEED = 32, 4, 20261203


def draw_seeds(count: int, salt: int = SWEEP_SEED) -> list[int]:
    rng = random.Random(salt)
    return [rng.randrange(2**31) for _ in range(count)]


def load_package(sources: dict[str, str], tag: str) -> types.SimpleNamespace:
    """The course's own code (the reference, a variant or a mutant) imported in this
    process under a name of its own: {module: module} as a probe sees it."""
    folder = Path(tempfile.mkdtemp(prefix=f"hero-seeds-{tag}-"))
    for rel, text in sources.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    name = f"_seeds_{tag}_{abs(hash(tuple(sorted(sources.items())))) % 10**12}"
    spec = importlib.util.spec_from_file_location(name, folder / "__init__.py", submodule_search_locations=[str(folder)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    modules = {}
    for rel in sources:
        if rel.endswith(".py") and "/" not in rel and rel != "__init__.py":
            modules[rel[:-3]] = importlib.import_module(f"{name}.{rel[:-3]}")
    return types.SimpleNamespace(**modules)


def _through_the_wire(value):
    return wire.decode(json.dumps(wire.encode(value)).encode("utf-8"))


def verdict(check: Check, sources: dict[str, str], tag: str, reference: Reference, seed: int,
            shared: types.SimpleNamespace) -> str | None:
    """None when the check passes on `sources` under `seed`, else what it says. Runs
    that the grader gives a fresh worker each (separately, parts) get a fresh import."""
    generator = torch.Generator().manual_seed(seed + sum(map(ord, check.name)))
    inputs = check.make_inputs(generator)
    expected = check.expect(reference.modules, inputs) if check.expect else None
    sent = {key: value for key, value in inputs.items() if not key.startswith("_")}
    try:
        if check.separately:
            first = check.separately[0]
            result = {}
            for run in check.separately:
                given = {**{k: v for k, v in sent.items() if k not in check.separately}, first: sent[run]}
                result[run] = _through_the_wire(check.probe(load_package(sources, tag), **given))
        elif check.parts:
            result, gathered = {}, {}
            for part in check.parts:
                answer = _through_the_wire(check.probe(load_package(sources, tag), **sent, part=part,
                                                       earlier=dict(gathered)))
                gathered[part] = answer
                if not isinstance(answer, dict):
                    result = answer
                    break
                result.update(answer)
        else:
            result = _through_the_wire(check.probe(shared, **sent))
    except Exception as error:  # noqa: BLE001 - the course's own code failing is a finding too
        return f"raised {type(error).__name__}: {error}"
    try:
        said = check.judge(result, inputs, expected)
    except Exception as error:  # noqa: BLE001
        return f"the judge raised {type(error).__name__}: {error}"
    return None if said is None else str(said)


@dataclass
class Sweep:
    seeds: list[int]
    lost: dict[str, list[tuple[str, int, str]]] = field(default_factory=dict)  # entry -> (check, seed, said)
    unsteady: dict[str, list[tuple[int, bool]]] = field(default_factory=dict)  # mutant -> (seed, named)
    judged: int = 0

    @property
    def clean(self) -> bool:
        return not self.lost and not self.unsteady


def _checks_of(task_names: set[str] | None, chapters: set[str] | None) -> list[Check]:
    return [c for chapter in catalogue.chapters() if not chapters or chapter.number in chapters
            for c in chapter.checks if task_names is None or c.task in task_names]


def sweep(seeds: int = DEFAULT_SEEDS, mutant_seeds: int = DEFAULT_MUTANT_SEEDS, chapters: set[str] | None = None,
          only: str | None = None, progress=None) -> Sweep:
    from grader.mutants import catalogue as accuracy_catalogue

    reference = Reference.available()
    if reference is None:
        raise SystemExit("the seed sweep needs the reference (solutions/): run it in the course's kit")
    drawn = draw_seeds(seeds)
    result = Sweep(drawn)
    mutants, variants = accuracy_catalogue()
    right = [("reference", dict(reference.sources), None)]
    if only in (None, "variants"):
        right += [(f"variant:{v.name}", v.apply(reference.sources), {v.task}) for v in variants]
    if only == "variants":
        right = right[1:]
    for label, sources, tasks in right:
        checks = _checks_of(tasks, chapters)
        if not checks:
            continue
        shared = load_package(sources, "right")
        for seed in drawn:
            for check in checks:
                said = verdict(check, sources, "right", reference, seed, shared)
                result.judged += 1
                if said is not None:
                    result.lost.setdefault(label, []).append((check.name, seed, said[:300]))
            if progress:
                progress(label, seed)
    if only in (None, "mutants"):
        for entry in mutants:
            checks = _checks_of({entry.task}, chapters)
            if not checks:
                continue
            sources = entry.apply(reference.sources)
            shared = load_package(sources, "mutant")
            named = []
            for seed in drawn[:mutant_seeds]:
                said = {c.name: verdict(c, sources, "mutant", reference, seed, shared) for c in checks}
                result.judged += len(checks)
                named.append((seed, any(said.get(name) and entry.keyword.lower() in said[name].lower()
                                        for name in entry.expect)))
            if len({n for _, n in named}) > 1:
                result.unsteady[f"mutant:{entry.name}"] = named
            if progress:
                progress(f"mutant:{entry.name}", None)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.qa.seeds", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help="seeds for the reference and variants")
    parser.add_argument("--mutant-seeds", type=int, default=DEFAULT_MUTANT_SEEDS, help="seeds for each mutant")
    parser.add_argument("--chapters", help="only these chapters, e.g. 05 or 05,09 (make mutants CH=05)")
    parser.add_argument("--only", choices=["reference", "variants", "mutants"])
    parser.add_argument("--write-docs", action="store_true", help="add the sweep's result to docs/grader-accuracy.md")
    args = parser.parse_args(argv)
    if args.write_docs and (args.chapters or args.only):
        parser.error("docs/grader-accuracy.md reports the whole sweep: leave out --chapters and --only")
    try:
        chapters = catalogue.parse_chapters(args.chapters)
    except ValueError as unknown:
        parser.error(str(unknown))
    found = sweep(args.seeds, args.mutant_seeds, set(chapters) if chapters else None, args.only)
    for label, losses in found.lost.items():
        for check, seed, said in losses:
            print(f"LOST  {label}: {check} under seed {seed}: {said}")
    for label, named in found.unsteady.items():
        print(f"UNSTEADY  {label}: named on seeds {[s for s, n in named if n]}, not on {[s for s, n in named if not n]}")
    summary = (f"{found.judged} verdicts over {len(found.seeds)} seeds (mutants: {args.mutant_seeds}): "
               f"{sum(map(len, found.lost.values()))} lost points, {len(found.unsteady)} unsteady diagnoses")
    print(summary)
    if args.write_docs:
        write_docs(found, args.mutant_seeds)
    return 0 if found.clean else 1




def write_docs(found: Sweep, mutant_seeds: int) -> None:
    """The sweep's result as the last section of docs/grader-accuracy.md (replacing an older one)."""
    from grader import KIT_ROOT

    doc = KIT_ROOT / "docs" / "grader-accuracy.md"
    text = doc.read_text(encoding="utf-8") if doc.exists() else ""
    text = text.split("\n" + SECTION + "\n")[0].rstrip("\n")
    lost = sum(map(len, found.lost.values()))
    lines = [SECTION, "",
             f"`python -m grader.qa.seeds` (run by `make mutants`) judged the reference and every correct variant "
             f"under {len(found.seeds)} seeds drawn as a class draws them, and every mutant under {mutant_seeds}: "
             f"{found.judged} verdicts. A right answer lost a point {lost} times; "
             f"{len(found.unsteady)} mutants were named on some seeds and not on others."]
    for label, losses in found.lost.items():
        lines += [f"- lost: {label}, {check} under seed {seed}" for check, seed, _ in losses[:20]]
    for label in found.unsteady:
        lines.append(f"- unsteady: {label}")
    doc.write_text(text + "\n\n" + "\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
