"""How many bits of its own choosing an upload can carry to the student through one
graded check, by path: the check's status, an error's words, and the values a failed
check's diagnosis quotes.

    python -m grader.qa.wire outcomes.json     # a file written by python -m grader.qa.outcomes

In a graded run the worker can read nothing secret (grader/run/worker_view.py), so these
wires have nothing to carry; they are counted anyway, so that none widens unseen.

- status: one of the statuses a check can end in, chosen by the code (log2 of their count);
- error: what a student sees of an exception, which names a type Python or torch defines
  (never the upload's own class) and one of the course's files, never a line or a message;
- value: a failed check's diagnosis, bounded (grader/run/feedback.bound_values): every
  number and quoted character counted as if the code chose it. `bound` is the most any
  diagnosis can hold; `seen` the most the catalogue's mutants and variants drew from it.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

STATUSES = ("passed", "failed", "error", "forbidden", "timeout", "not_implemented")


def error_bits() -> float:
    """The error path: a standard exception's name or 'its own class', in one of the
    course's files or 'a file of your own', or none."""
    from grader.run.feedback import standard_exception_names
    from grader.run.reference import Reference

    reference = Reference.available()
    files = len([rel for rel in reference.sources if "/" not in rel]) if reference else 10
    return math.log2(len(standard_exception_names()) + 1) + math.log2(files + 2)


def value_bound() -> float:
    from grader.run.feedback import BITS_PER_CHARACTER, BITS_PER_NUMBER, SHOWN_NUMBERS, SHOWN_QUOTED

    return SHOWN_NUMBERS * BITS_PER_NUMBER + SHOWN_QUOTED * BITS_PER_CHARACTER


def per_check(outcomes: dict[str, list]) -> dict[str, float]:
    """The most value bits any entry's diagnosis of each check held."""
    from grader.run.feedback import value_bits

    seen: dict[str, float] = {}
    for results in outcomes.values():
        for name, status, diagnosis in results:
            bits = value_bits(diagnosis) if status == "failed" else 0.0
            seen[name] = max(seen.get(name, 0.0), bits)
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.qa.wire", description=__doc__.split("\n\n")[0])
    parser.add_argument("outcomes", type=Path, help="a file written by python -m grader.qa.outcomes")
    args = parser.parse_args(argv)
    try:
        outcomes = json.loads(args.outcomes.read_text(encoding="utf-8"))
    except (OSError, ValueError) as problem:
        parser.error(f"cannot read the outcomes: {problem} (write them with python -m grader.qa.outcomes FILE)")
    seen = per_check(outcomes)
    status, error, bound = math.log2(len(STATUSES)), error_bits(), value_bound()
    print(f"per check and grade: status {status:.1f} bits; error {error:.1f} bits; value at most {bound:.0f} bits")
    print(f"value path, the most the catalogue's diagnoses held, over {len(seen)} checks:")
    for name, bits in sorted(seen.items(), key=lambda item: -item[1])[:15]:
        print(f"  {name:60s} {bits:6.0f}")
    total = sum(seen.values())
    print(f"  (median {sorted(seen.values())[len(seen) // 2]:.0f} bits; all checks together {total:.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
