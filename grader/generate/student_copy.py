"""Generate the student copy hero_transformer/ from solutions/hero_transformer/.

    python -m grader.generate.student_copy          # write it
    python -m grader.generate.student_copy --check  # exit 1 if the committed copy is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader import KIT_ROOT
from grader.regions import STUDENT_HEADER, RegionError, all_regions, package_sources, strip

ROOT = KIT_ROOT
SOLUTION_PACKAGE = ROOT / "solutions" / "hero_transformer"
STUDENT_PACKAGE = ROOT / "hero_transformer"


def generate(solution_root: Path = SOLUTION_PACKAGE) -> dict[str, str]:
    all_regions(solution_root)  # malformed markers stop here, before any file is written
    return {rel: STUDENT_HEADER + strip(source) for rel, source in package_sources(solution_root).items()}


def stale_files(student_root: Path = STUDENT_PACKAGE) -> list[str]:
    expected = generate()
    present = package_sources(student_root) if student_root.exists() else {}
    return sorted(rel for rel in expected.keys() | present.keys() if expected.get(rel) != present.get(rel))


def write(student_root: Path = STUDENT_PACKAGE) -> list[str]:
    expected = generate()
    changed = stale_files(student_root)
    for rel in changed:
        target = student_root / rel
        if rel in expected:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(expected[rel], encoding="utf-8")
        else:
            target.unlink()
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only report whether the copy is in sync")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files()
        if stale:
            print("hero_transformer/ is out of sync with solutions/; run `make student`:", *stale, sep="\n  ")
            return 1
        print("hero_transformer/ is in sync with solutions/")
        return 0
    try:
        changed = write()
    except RegionError as error:
        print(f"solutions/ has a malformed solution marker: {error}")
        return 1
    print(f"regenerated hero_transformer/ from solutions/ ({len(changed)} file(s) changed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
