"""Where a grading's time goes (grader/profile.py): `grade --profile` lists every
phase a grading meets, with how often it ran, beside the wall time (make bench prints
the same for a full grade and for chapter 05)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

from grader import KIT_ROOT
from grader.checks import catalogue
from grader.profile import ORDER, Phases, seconds_since_process_start


def test_a_profile_lists_every_phase_with_its_count():
    run = subprocess.run([sys.executable, "-m", "grader", "grade", "solutions/hero_transformer", "--chapters", "01",
                          "--profile", "--allow-weak-sandbox"], cwd=KIT_ROOT, capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "220"}, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "Where the time went" in run.stdout and "one grading thread" in run.stdout
    rows = {m[1].strip(): (float(m[2]), m[3].strip()) for m in
            re.finditer(r"│ ([a-z()' ]+?)\s*│\s+([\d.]+) │\s+\d+% │\s*(\d*) │", run.stdout)}
    for phase in ("interpreter and imports", "torch and the checks imported", "reference and plan",
                  "worker starts", "inputs", "probes", "judges", "report"):
        assert phase in rows, (phase, sorted(rows))
    checks = sum(1 for c in catalogue.chapters()[1].checks)
    probes = sum(int(rows[name][1]) for name in ("probes", "probes under operator rules") if name in rows)
    assert int(rows["judges"][1]) == checks and probes >= checks
    assert "(not in a phase)" in rows


def test_phases_add_up_and_keep_the_lesson_order():
    phases = Phases()
    phases.add("probes", 0.5)
    phases.add("probes", 0.25)
    with phases.phase("worker starts"):
        pass
    phases.add("something new", 1.0)
    names = [name for name, _, _ in phases.rows()]
    assert names == ["worker starts", "probes", "something new"]
    assert dict((n, (s, c)) for n, s, c in phases.rows())["probes"] == (0.75, 2)
    assert set(ORDER) >= {"worker starts", "probes"}


def test_a_phase_inside_another_counts_once():
    phases = Phases()
    began = time.perf_counter()
    with phases.phase("probes"):
        time.sleep(0.05)
        with phases.phase("worker ends"):
            time.sleep(0.05)
    wall = time.perf_counter() - began
    spent = dict((n, s) for n, s, _ in phases.rows())
    assert spent["worker ends"] >= 0.05 and spent["probes"] >= 0.05
    # Counted once, the two add up to the time around them (twice counted, they would exceed it).
    assert spent["probes"] + spent["worker ends"] <= wall


def test_a_process_knows_how_long_ago_it_started():
    since = seconds_since_process_start()
    assert since is None or since >= 0.0
