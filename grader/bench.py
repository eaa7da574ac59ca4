"""`make bench`: how fast the kit grades and how fast its models run.

Grading: wall time of `python -m grader grade` on the full reference and on the stub
copy, each a fresh process (interpreter and torch start-up included), and the
zygote's saving against starting a fresh interpreter per task, as a ratio measured
in one run. Models: see the model_* functions below.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent


def time_cli(package: str, repeats: int = 3) -> float:
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeats):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "grader", "grade", package, "--json", f"{tmp}/r.json"],
                           cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def zygote_ratio() -> tuple[float, float]:
    from grader.engine import grade
    from grader.sandbox import Limits, Sandbox
    from grader.submission import load

    submission = load(ROOT / "solutions" / "hero_transformer")
    timings = []
    for reuse in (True, False):
        with Sandbox(Limits(), reuse_zygote=reuse) as box:
            started = time.perf_counter()
            grade(submission, sandbox=box, seed=1, parallel=1)
            timings.append(time.perf_counter() - started)
    return timings[0], timings[1]


def grading_rows():
    full = time_cli("solutions/hero_transformer")
    stub = time_cli("hero_transformer")
    zygote, fresh = zygote_ratio()
    return [
        ("grade the full reference submission (CLI, fresh process)", f"{full:.2f} s", "target ≤ 5 s"),
        ("grade the stub submission (CLI, fresh process)", f"{stub:.2f} s", "target ≤ 5 s"),
        ("all checks, one zygote forking workers (1 thread)", f"{zygote:.2f} s", ""),
        ("all checks, a fresh interpreter per task (1 thread)", f"{fresh:.2f} s",
         f"zygote is {fresh / zygote:.1f}× faster"),
    ]


def main() -> int:
    console = Console()
    table = Table(title="hero_transformer benchmarks (this machine)")
    for column in ("measure", "value", "note"):
        table.add_column(column)
    with console.status("timing the grader…"):
        rows = grading_rows()
    for row in rows:
        table.add_row(*row)
    try:
        from grader.model_bench import model_rows
    except ImportError:
        model_rows = None
    if model_rows:
        with console.status("timing the models…"):
            for row in model_rows():
                table.add_row(*row)
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
