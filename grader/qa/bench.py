"""`make bench`: how fast the kit grades and how fast its models run.

First where the time of a full grade and of chapter 05 goes, phase by phase
(`grade --profile`: grader/profile.py); then the four ratios to the floor, `python -c
"import torch"`, each the median of interleaved pairs in one run, against their targets
(a full grade ≤ 1.5×, chapter 05 ≤ 1.3×, grade-class ≤ 0.25× per upload of 20, a
student's check.py 05 ≤ 1.3×).

Grading: wall time of `python -m grader grade` on the full reference, on the stub
copy and on the reference with an 8 s sleep at import, each a fresh process
(interpreter and torch start-up included), and the
zygote's saving against starting a fresh interpreter per task, as a ratio measured
in one run; then `grade-class` (all checks) on one reference-like upload and on a
class of 20, each a fresh process, in seconds per upload. Models: see the model_*
functions below.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from grader import KIT_ROOT

ROOT = KIT_ROOT


def _weak() -> list[str]:
    """Speed is measured where bubblewrap is missing too (the run says which sandbox it had)."""
    from grader.run.sandbox import bwrap_works

    return [] if bwrap_works() else ["--allow-weak-sandbox"]


def _machine_cpu() -> float:
    """CPU seconds the whole machine has spent so far. Workers are reaped by the kernel,
    so no rusage of ours counts them; on a quiet machine the difference over a run is
    what grading cost."""
    with open("/proc/stat") as stat:
        fields = stat.readline().split()[1:]
    user, nice, system = (int(v) for v in fields[:3])
    return (user + nice + system) / os.sysconf("SC_CLK_TCK")


class _CpuMeter:
    """CPU seconds of one command and every process it starts (the sandbox, S' and each
    worker included), where a cgroup-v1 cpuacct hierarchy lets us make a group for it
    (root): what the run itself cost, whatever else the machine is doing. Elsewhere the
    machine's whole CPU time over the run (right on a quiet machine only)."""

    ROOT = Path("/sys/fs/cgroup/cpuacct")

    def __init__(self):
        self.path, self._start = None, 0.0
        try:
            path = self.ROOT / f"hero_transformer_bench.{os.getpid()}.{time.monotonic_ns()}"
            path.mkdir()
            self.path = path
        except OSError:
            self.path = None

    @property
    def scope(self) -> str:
        return "by the run's processes" if self.path is not None else "by the whole machine"

    def join(self) -> None:
        """In the child, before exec (preexec_fn): it and all it starts are counted."""
        if self.path is not None:
            fd = os.open(self.path / "cgroup.procs", os.O_WRONLY)
            try:
                os.write(fd, str(os.getpid()).encode())
            finally:
                os.close(fd)

    def begin(self) -> None:
        self._start = self._usage()

    def spent(self) -> float:
        return self._usage() - self._start

    def _usage(self) -> float:
        if self.path is not None:
            return int((self.path / "cpuacct.usage").read_text()) / 1e9
        return _machine_cpu()

    def close(self) -> None:
        for _ in range(50):  # the last workers may take a moment to be gone
            if self.path is None:
                return
            try:
                self.path.rmdir()
                self.path = None
            except OSError:
                time.sleep(0.05)


def time_cli(package: str, repeats: int = 3, cpu: list | None = None) -> float:
    """Median wall seconds of a fresh `python -m grader grade`; `cpu` collects the CPU
    seconds each run spent (sandbox and workers included; see _CpuMeter)."""
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeats):
            meter = _CpuMeter()
            try:
                meter.begin()
                started = time.perf_counter()
                subprocess.run([sys.executable, "-m", "grader", "grade", package, "--json", f"{tmp}/r.json",
                                *_weak()], cwd=ROOT, check=True, stdout=subprocess.DEVNULL, preexec_fn=meter.join)
                times.append(time.perf_counter() - started)
                if cpu is not None:
                    cpu.append((meter.spent(), meter.scope))
            finally:
                meter.close()
    return statistics.median(times)


def torch_floor(repeats: int = 3) -> float:
    """What any grading process pays before it does anything: Python with torch imported."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


# Forks a process holding what the zygote holds (torch and the checks) as the sandbox
# forks it for each worker: S' forks a middle, the middle forks the worker, both end.
_LIFECYCLE = r"""
import gc, importlib, os, pkgutil, resource, sys
import torch, torch.nn.functional, torch.optim
import grader.checks
for info in pkgutil.walk_packages(grader.checks.__path__, "grader.checks."):
    importlib.import_module(info.name)
gc.freeze()
def spent():
    return sum(getattr(resource.getrusage(who), field) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for field in ("ru_utime", "ru_stime"))
before, starts = spent(), int(sys.argv[1])
for _ in range(starts):
    middle = os.fork()
    if middle == 0:
        worker = os.fork()
        if worker == 0:
            os._exit(0)
        os.waitpid(worker, 0)
        os._exit(0)
    os.waitpid(middle, 0)
print(spent() - before)
"""


def workers_per_grade(chapters: list[str] | None = None, grouped: bool = True) -> int:
    """Worker processes a grade of a correct submission starts (all chapters by default):
    one per group of tasks that share a worker (one per task, ungrouped), plus one per
    side of each comparison check, which always runs in workers of its own."""
    from grader.run.schedule import plan_groups, select_checks, workers_needed

    plan = select_checks(chapters, False)
    return len(plan_groups(plan, grouped)) + sum(workers_needed(checks) - 1 for _, checks in plan)


def isolation_floor(workers: int) -> float:
    """CPU seconds that `workers` worker starts cost in process life alone (two forks
    of a process holding torch, and their ends), before any of them runs a check."""
    run = subprocess.run([sys.executable, "-c", _LIFECYCLE, str(workers)], cwd=ROOT, check=True,
                         capture_output=True, text=True)
    return float(run.stdout.split()[-1])


def zygote_ratio() -> tuple[float, float]:
    from grader.run.engine import grade
    from grader.run.processes import Limits
    from grader.run.sandbox import Sandbox
    from grader.run.submission import load

    submission = load(ROOT / "solutions" / "hero_transformer")
    timings = []
    for reuse in (True, False):
        with Sandbox(Limits(), reuse_zygote=reuse) as box:
            started = time.perf_counter()
            grade(submission, runner=box, seed=1, parallel=1)
            timings.append(time.perf_counter() - started)
    return timings[0], timings[1]


def _reference_like(folder: Path, count: int) -> None:
    """`count` copies of the reference, each with a line of its own, so none is a
    duplicate of another (each is graded on its own, as real uploads are)."""
    source = ROOT / "solutions" / "hero_transformer"
    for i in range(count):
        package = folder / f"student{i:02d}" / "hero_transformer"
        package.mkdir(parents=True)
        for file in source.glob("*.py"):
            text = file.read_text(encoding="utf-8")
            (package / file.name).write_text(text + (f"\n# student {i}\n" if file.name == "model.py" else ""),
                                             encoding="utf-8")


def time_class(count: int) -> tuple[float, str]:
    """Seconds per upload for `grade-class` on `count` reference-like uploads, one fresh
    process (start-up included), and how it placed the uploads in sandboxes."""
    with tempfile.TemporaryDirectory() as tmp:
        _reference_like(Path(tmp) / "uploads", count)
        started = time.perf_counter()
        run = subprocess.run([sys.executable, "-m", "grader", "grade-class", f"{tmp}/uploads", "--out", f"{tmp}/out",
                              *_weak()], cwd=ROOT, check=True, capture_output=True, text=True,
                             env={**os.environ, "COLUMNS": "300"})
        spent = time.perf_counter() - started
    shared = "shared zygote" if "shared by the class" in run.stdout else "a fresh sandbox per upload"
    return spent / count, shared


def class_rows(lifecycle_per_upload: float):
    single, _ = time_class(1)
    per_upload, how = time_class(20)
    cores = os.cpu_count() or 1
    return [
        ("grade-class, 1 reference-like upload (CLI, fresh process)", f"{single:.2f} s per upload", ""),
        ("grade-class, 20 reference-like uploads (CLI, one process)", f"{per_upload:.2f} s per upload",
         f"target ≤ 1 s; {per_upload * 20:.0f} s in all; {how}, {cores} cores; the workers' process life alone "
         f"is {lifecycle_per_upload / cores:.2f} s per upload"),
    ]


def time_slow_import(seconds: float = 8.0) -> float:
    """The reference with an experiment left at module level (a sleep in model.py):
    the package is imported once per submission, so it should cost about that once."""
    with tempfile.TemporaryDirectory() as tmp:
        _reference_like(Path(tmp), 1)
        model = Path(tmp) / "student00" / "hero_transformer" / "model.py"
        model.write_text(model.read_text(encoding="utf-8") + f"\nimport time\ntime.sleep({seconds})\n",
                         encoding="utf-8")
        return time_cli(str(model.parent), repeats=1)


def grading_rows():
    floor = torch_floor()
    cpu: list[float] = []
    full = time_cli("solutions/hero_transformer", cpu=cpu)
    slow = time_slow_import()
    stub = time_cli("hero_transformer")
    zygote, fresh = zygote_ratio()
    workers = workers_per_grade()
    ungrouped = workers_per_grade(grouped=False)
    lifecycle = isolation_floor(workers)
    cores = os.cpu_count() or 1
    return [
        ("python -c 'import torch' (the floor)", f"{floor:.2f} s", ""),
        (f"process life of the {workers} workers a full grade starts ({ungrouped} with every task in workers of "
         f"its own; two forks of a process holding torch, and their ends, each)", f"{lifecycle:.2f} CPU-s",
         f"{lifecycle / cores:.2f} s on {cores} cores before any check runs: with the floor, "
         f"{floor + lifecycle / cores:.2f} s is the least a full grade can take"),
        ("grade the full reference submission (CLI, fresh process)", f"{full:.2f} s",
         f"{full / floor:.1f}× the floor; {statistics.median(c for c, _ in cpu):.1f} CPU-s spent {cpu[0][1]}; "
         f"load average {os.getloadavg()[0]:.1f}; "
         f"target ≤ 2.5 s and ≤ 2× the floor"),
        ("grade the stub submission (CLI, fresh process)", f"{stub:.2f} s", "target ≤ 5 s"),
        ("grade the reference with an 8 s sleep at import (CLI)", f"{slow:.2f} s",
         f"plain + {slow - full:.1f} s; target ≤ plain + 11 s"),
        ("all checks, one zygote forking workers (1 thread)", f"{zygote:.2f} s", ""),
        ("all checks, a fresh interpreter per task (1 thread)", f"{fresh:.2f} s",
         f"zygote is {fresh / zygote:.1f}× faster"),
        *class_rows(lifecycle),
    ]


def _interleaved(commands: dict[str, list[str]], cwd: Path, repeats: int = 3,
                 env: dict[str, str] | None = None, before=None) -> dict[str, list[float]]:
    """Wall seconds of each command, run in turn (A B A B …) so a drift of the machine's
    speed falls on both alike; `before()`, untimed, ahead of each run."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeats):
        for name, command in commands.items():
            if before is not None:
                before()
            started = time.perf_counter()
            subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env=env or {**os.environ, "COLUMNS": "200"})
            times[name].append(time.perf_counter() - started)
    return times


def self_check_rows():
    """A student's `check` in the release bundle, on the reference's code: the portable
    runner (what Windows and macOS get) against the Linux sandbox, pair by pair."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        # The bundle as course staff make it, by the command, not by the release's code.
        subprocess.run([sys.executable, "-m", "grader", "release", "--out", tmp], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
        folder = Path(tmp) / "hero_transformer-student"
        package = folder / "mine"
        import shutil

        shutil.copytree(ROOT / "solutions" / "hero_transformer", package)
        for label, chapters in (("chapter 05", ["--chapters", "05"]), ("all chapters", [])):
            base = [sys.executable, "-m", "grader", "check", "mine", *chapters, "--runner"]
            times = _interleaved({"portable": base + ["portable"], "sandbox": base + ["sandbox"]}, folder)
            ratios = [p / b for p, b in zip(times["portable"], times["sandbox"])]
            rows.append((f"student check, {label}: portable runner / Linux sandbox (release bundle, CLI)",
                         f"{statistics.median(times['portable']):.2f} s / {statistics.median(times['sandbox']):.2f} s",
                         f"{statistics.median(ratios):.2f}× (median of {len(ratios)} interleaved pairs); "
                         f"target ≤ 1.5×"))
        rows += _pytest_row(folder)
    return rows


# Issue 41's targets: each a ratio to the floor, `python -c "import torch"`, by the median
# of interleaved pairs in one run.
FLOOR_TARGETS = {"full": 1.5, "chapter": 1.3, "class": 0.25, "check": 1.3}
FLOOR = [sys.executable, "-c", "import torch"]


def _floor_row(label: str, target: float, command: list[str], cwd: Path, per: int = 1,
               env: dict[str, str] | None = None, repeats: int = 3, before=None):
    times = _interleaved({"floor": FLOOR, "run": command}, cwd, repeats=repeats, env=env, before=before)
    ratios = [run / per / floor for run, floor in zip(times["run"], times["floor"])]
    ratio = statistics.median(ratios)
    return (f"{label} / the floor", f"{statistics.median(times['run']) / per:.2f} s / "
            f"{statistics.median(times['floor']):.2f} s",
            f"{ratio:.2f}× (median of {len(ratios)} interleaved pairs); target ≤ {target}× — "
            f"{'met' if ratio <= target else 'not met'}")


def floor_rows():
    """A full grade, one chapter (05, hidden checks included, as a Gradescope assignment
    runs it) and a class of 20 (per upload), each against the torch floor."""
    import shutil

    with tempfile.TemporaryDirectory() as tmp:
        _reference_like(Path(tmp) / "uploads", 20)
        grade = [sys.executable, "-m", "grader", "grade", "solutions/hero_transformer", "--json", f"{tmp}/r.json",
                 *_weak()]
        return [
            _floor_row("grade the full reference", FLOOR_TARGETS["full"], grade, ROOT),
            _floor_row("grade chapter 05 of the reference", FLOOR_TARGETS["chapter"], grade + ["--chapters", "05"],
                       ROOT),
            # Into an empty folder each time: a rerun into the same one grades only what changed.
            _floor_row("grade-class of 20 reference-like uploads, per upload", FLOOR_TARGETS["class"],
                       [sys.executable, "-m", "grader", "grade-class", f"{tmp}/uploads", "--out", f"{tmp}/out",
                        *_weak()], ROOT, per=20, repeats=2,
                       before=lambda: shutil.rmtree(f"{tmp}/out", ignore_errors=True)),
        ]


def phase_profiles(console: Console) -> None:
    """Where the time of a full grade and of chapter 05 goes (`grade --profile`, one thread)."""
    for label, chapters in (("a full grade", []), ("chapter 05", ["--chapters", "05"])):
        run = subprocess.run([sys.executable, "-m", "grader", "grade", "solutions/hero_transformer", "--profile",
                              *chapters, *_weak()], cwd=ROOT, capture_output=True, text=True,
                             env={**os.environ, "COLUMNS": "160"})
        lines = run.stdout.splitlines()
        start = next((i for i, line in enumerate(lines) if "Where the time went" in line), None)
        end = next((i for i, line in enumerate(lines) if "(not in a phase)" in line), None)
        if start is None or end is None:
            console.print(f"[red]no phase profile of {label}: {run.stderr[-300:]}")
            continue
        console.print(f"[bold]Phase profile of {label}[/]")
        beside = [line for line in lines[end + 2:end + 6] if line.startswith("beside these")]
        console.print("\n".join(lines[start:end + 2] + beside), soft_wrap=True, highlight=False, markup=False)


def _pytest_row(folder: Path):
    """The same public checks through pytest (what an editor's test panel runs) against
    check.py, on the reference's code in the bundle's own hero_transformer/."""
    import shutil

    shutil.rmtree(folder / "hero_transformer")
    shutil.copytree(ROOT / "solutions" / "hero_transformer", folder / "hero_transformer",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PYTEST_")}
    env.update(COLUMNS="200", HERO_TRANSFORMER_VENV=sys.prefix)  # check.py runs on this venv, sets none up
    # A student's venv holds pytest alone; this one also holds the kit's own test plugins
    # (pytest-xdist, anyio), which would load here and not there. The bundle's conftest.py
    # loads the course's plugin either way.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    times = _interleaved({"pytest": [sys.executable, "-m", "pytest", "-q", "-m", "ch05"],
                          "check.py": [sys.executable, "check.py", "05"]}, folder, repeats=5, env=env)
    ratios = [p / c for p, c in zip(times["pytest"], times["check.py"])]
    return [("student check, chapter 05: pytest / check.py (release bundle, CLI)",
             f"{statistics.median(times['pytest']):.2f} s / {statistics.median(times['check.py']):.2f} s",
             f"{statistics.median(ratios):.2f}× (median of {len(ratios)} interleaved pairs); target ≤ 1.2×"),
            _floor_row("a student's check.py 05 (release bundle)", FLOOR_TARGETS["check"],
                       [sys.executable, "check.py", "05"], folder, env=env)]


def main() -> int:
    console = Console()
    table = Table(title="hero_transformer benchmarks (this machine)")
    for column in ("measure", "value", "note"):
        table.add_column(column)
    with console.status("profiling a full grade and a chapter…"):
        phase_profiles(console)
    with console.status("timing the grader…"):
        rows = floor_rows() + grading_rows() + self_check_rows()
    for row in rows:
        table.add_row(*row)
    try:
        from grader.qa.model_speed import model_rows
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
