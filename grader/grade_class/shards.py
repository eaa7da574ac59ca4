"""Whether every shard of a split class run finished, before they are merged:

    python -m grader.grade_class.shards SHARDS

SHARDS is the folder grader/grade_class/slurm/grade-array.sh writes: SHARDS/array holds
the number of shards N and the arguments the array was given, SHARDS/K what task K
graded. A shard has finished when its class.json names it K of N and every upload it
planned has a record. Exit 0 when all N have; otherwise the shards to run again, the
sbatch line that runs them, and exit 1 (the merge job then writes no gradebook).
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from grader.files import read_json
from grader.grade_class.records import STATE, needs_grading, read_records

ARRAY = "array"
SCRIPT = "grader/grade_class/slurm/grade-array.sh"


def read_array(shards: Path) -> tuple[int, str] | None:
    """(N, the array's arguments as one shell-quoted line), or None before any task began."""
    try:
        lines = (shards / ARRAY).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    fields = dict(line.split("=", 1) for line in lines if "=" in line)
    try:
        return int(fields["shards"]), fields.get("arguments", "").strip()
    except (KeyError, ValueError):
        return None


def unfinished(shards: Path, count: int) -> dict[int, str]:
    """Shard number -> why it has not finished, for every shard of 1..count that has not."""
    problems = {}
    for k in range(1, count + 1):
        folder = shards / str(k)
        state = read_json(folder / STATE)
        if not state:
            problems[k] = "never started, or stopped before it read the input"
            continue
        if state.get("shard") != [k, count]:
            problems[k] = f"holds shard {state.get('shard')}, not {k} of {count}"
            continue
        planned = state.get("uploads") or []
        records = read_records(folder)
        missing = [slug for slug in planned if slug not in records]
        if missing:
            problems[k] = f"{len(missing)} of {len(planned)} uploads not graded (the task stopped first)"
    return problems


def report(shards: Path) -> tuple[bool, str]:
    """(whether every shard finished, what to tell the person running the merge)."""
    array = read_array(shards)
    if array is None:
        return False, (f"{shards}/{ARRAY} is missing: no task of the array job began (submit "
                       f"{SCRIPT} as `sbatch --array=1-N ...` first)")
    count, arguments = array
    problems = unfinished(shards, count)
    retry = sum(needs_grading(r) for k in range(1, count + 1) for r in read_records(shards / str(k)).values())
    lines = []
    if retry:
        lines.append(f"{retry} upload(s) hold checks the grader could not run; the merged summary lists them, and "
                     f"a rerun of their shard grades them again.")
    if not problems:
        return True, "\n".join([f"all {count} shards finished; merging", *lines])
    tasks = ",".join(str(k) for k in problems)
    lines = [f"{len(problems)} of {count} shards did not finish, so no gradebook was written:",
             *(f"  shard {k}: {why}" for k, why in problems.items()), *lines,
             "Run them again (each grades only what it has not finished), then this merge again after them:",
             f"  RERUN=$(sbatch --parsable --array={tasks} $HERO_TRANSFORMER_KIT/{SCRIPT}{' ' + arguments if arguments else ''})",
             f"  sbatch --dependency=afterany:$RERUN $HERO_TRANSFORMER_KIT/grader/grade_class/slurm/merge.sh "
             f"{shlex.quote(str(shards))} OUT [the same merge flags]"]
    return False, "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    finished, said = report(Path(argv[0]))
    print(said, file=sys.stdout if finished else sys.stderr)
    return 0 if finished else 1


if __name__ == "__main__":
    sys.exit(main())
