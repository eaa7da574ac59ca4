"""A submission's wall-clock budget: when it runs out the checks left are 'timeout' with
the reason, and results.json is still written."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_checks_past_the_budget_time_out_and_the_json_is_written(tmp_path):
    upload = tmp_path / "upload" / "hero_transformer"
    shutil.copytree(ROOT / "solutions" / "hero_transformer", upload,
                    ignore=shutil.ignore_patterns("__pycache__"))
    model = upload / "model.py"
    # gelu made very slow: every check of that task waits for it, the others do not.
    text = model.read_text()
    body = "    ### BEGIN SOLUTION gelu\n"
    assert body in text
    model.write_text(text.replace(body, body + "    import time as _clock\n    _clock.sleep(1.5)\n", 1))
    out = tmp_path / "results.json"
    done = subprocess.run([sys.executable, "-m", "grader", "grade", str(upload.parent), "--chapters", "05",
                           "--json", str(out), "--budget", "4", "--seed", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert out.exists(), done.stderr[-2000:]
    tests = json.loads(out.read_text())["tests"]
    out_of_time = [t for t in tests if "timeout" in t["tags"]]
    assert any("ran out before this check ran" in t["output"] for t in out_of_time), [t["output"][:120] for t in tests]
    assert all(t["score"] == 0 for t in out_of_time)
    assert any(t["score"] == t["max_score"] for t in tests), "checks run inside the budget still count"


def test_a_budget_must_be_a_positive_number(tmp_path):
    done = subprocess.run([sys.executable, "-m", "grader", "grade", str(tmp_path), "--budget", "soon"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "not a number of seconds" in done.stderr


def test_a_slow_import_is_named_as_one(reference):
    """An experiment left at module level that outlasts the start-up limit: every check
    says the import was too slow and where such code belongs, not 'an endless loop'."""
    from grader.run.results import TIMEOUT
    from grader.run.engine import grade
    from grader.run.processes import Limits
    from grader.run.sandbox import Sandbox
    from grader.run.submission import Submission

    sources = dict(reference.sources)
    sources["model.py"] = sources["model.py"] + "\nimport time\ntime.sleep(8)  # an experiment\n"
    with Sandbox(Limits(setup_seconds=2.0)) as box:
        report = grade(Submission("slow import", sources), ["05"], runner=box, seed=3)
    assert report.results and all(r.status == TIMEOUT for r in report.results)
    assert all("importing the package took longer than 2 s" in r.diagnosis and '__name__ == "__main__"' in r.diagnosis
               for r in report.results)
