"""Write what the public checks know about the right answer, as data: each chapter's
grader/checks/chNN_*/facts.json.

    python -m grader.generate.facts            # write them (make student does)
    python -m grader.generate.facts --check    # only say whether they are up to date

Each hidden module registers, with grader.checks.facts.facts_for, a function that
computes what one or more of its chapter's public checks need on their inputs (the
right output, each known mistake's output) from the kit's own code and the reference.
This runs them on those checks' inputs, which must be the same on every run, and
writes the numbers; the public judges read them, so the release carries the numbers
and not the code that computes them.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

import torch

from grader import KIT_ROOT
from grader.checks import catalogue
from grader.checks.facts import FILE, REGISTERED, digest, encode, inputs_are_fixed
from grader.files import write_atomic

CHECKS = KIT_ROOT / "grader" / "checks"


def registered() -> dict[str, tuple[str, object]]:
    """check name -> (chapter package, facts function), from every chapter's hidden modules."""
    found: dict[str, tuple[str, object]] = {}
    for package_name in catalogue.chapter_packages():
        for hidden in catalogue.hidden_modules(package_name):
            for name, function in vars(hidden).get(REGISTERED, {}).items():
                if name in found and found[name][1] is not function:
                    raise ValueError(f"{name}: two facts functions are registered for it")
                found[name] = (package_name, function)
    return found


def compute(packages: "set[str] | None" = None) -> dict[str, dict]:
    """chapter package -> the content of its facts.json; of the given chapter packages only
    (`make task-check` looks at one task's chapter)."""
    from grader.run.reference import Reference

    reference = Reference.available()
    if reference is None:
        raise SystemExit("the facts are computed from the reference: solutions/hero_transformer is missing")
    checks = {c.name: c for c in catalogue.all_checks()}
    files: dict[str, dict] = {}
    by_digest: dict[str, object] = {}
    for name, (package_name, function) in sorted(registered().items()):
        if packages is not None and package_name not in packages:
            continue
        check = checks.get(name)
        if check is None or check.hidden:
            raise ValueError(f"facts are registered for {name}, which is no public check")
        if not inputs_are_fixed(check):
            raise ValueError(f"{name} reads facts but its inputs change from run to run: give it constant "
                             f"inputs or fixed_inputs=True")
        inputs = check.fresh_inputs() if check.fixed_inputs else check.make_inputs(torch.Generator().manual_seed(0))
        try:
            facts = encode(function(reference.modules, inputs))
        except NotImplementedError as unwritten:
            raise SystemExit(f"the facts of {name} are computed from the reference, which raises "
                             f"NotImplementedError ({unwritten}): write the reference's body first") from None
        if by_digest.setdefault(digest(inputs), facts) != facts:
            raise ValueError(f"{name} has the inputs of another check that reads other facts: give it inputs of "
                             f"its own")
        entry = files.setdefault(package_name, {"about": "", "checks": {}})
        entry["about"] = (f"What the public checks of {package_name} know about the right answer on their fixed "
                          f"inputs, computed by the kit (python -m grader.generate.facts); do not edit.")
        entry["checks"][name] = {"inputs": digest(inputs), "facts": facts}
        if check.fixed_inputs:  # drawn here, once: every platform's runs read these very numbers
            entry["checks"][name]["given"] = encode(inputs)
    return files


def render(content: dict) -> str:
    """One line per check, so a change shows as the checks it touches."""
    lines = ["{", f' "about": {json.dumps(content["about"])},', ' "checks": {']
    entries = sorted(content["checks"].items())
    for i, (name, entry) in enumerate(entries):
        comma = "," if i + 1 < len(entries) else ""
        lines.append(f"  {json.dumps(name)}: {json.dumps(entry, separators=(',', ':'), allow_nan=True)}{comma}")
    lines += [" }", "}", ""]
    return "\n".join(lines)


def stale(files: dict[str, dict] | None = None, packages: "set[str] | None" = None) -> list[Path]:
    """The facts files that differ from a fresh computation (or should not exist); of the
    given chapter packages only, where given."""
    files = compute(packages) if files is None else files
    wanted = {CHECKS / name / FILE: render(content) for name, content in files.items()}
    present = {p for p in CHECKS.glob(f"ch*/{FILE}") if packages is None or p.parent.name in packages}
    return sorted(path for path in wanted.keys() | present
                  if not path.exists() or path not in wanted or not _agrees(path.read_text(encoding="utf-8"),
                                                                            wanted[path]))


# Another CPU's kernels (AVX-512 or not, another BLAS path) move a float64 sum's last bit or
# two, and a finite difference divides such a sum by its small step, so its figure moves by up
# to a few parts in 1e9 (measured between two machines of this kind: 2.6e-9). Every judge that
# reads facts compares with 1e-6 or wider, and a change to the kit's code moves a figure by far
# more, so a file within this is current, not stale.
LAST_BITS = 1e-7


def _agrees(committed: str, fresh: str) -> bool:
    if committed == fresh:
        return True
    try:
        return _close(json.loads(committed), json.loads(fresh))
    except ValueError:
        return False


def _close(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or isinstance(a, bool):
            return False
        if a != a or b != b:
            return a != a and b != b
        return a == b or abs(a - b) <= LAST_BITS * max(1.0, abs(a), abs(b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return a == b


def write(files: dict[str, dict] | None = None) -> list[Path]:
    files = compute() if files is None else files
    changed = stale(files)
    for path in changed:
        name = path.parent.name
        if name in files:
            write_atomic(path, render(files[name]))
            path.chmod(0o644)
        else:
            path.unlink()
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.generate.facts", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say whether the facts files are up to date")
    args = parser.parse_args(argv)
    if args.check:
        out_of_date = stale()
        for path in out_of_date:
            print(f"{path.relative_to(KIT_ROOT)} is out of date: run `make student`")
        return 1 if out_of_date else 0
    for path in write():
        print(f"wrote {path.relative_to(KIT_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
