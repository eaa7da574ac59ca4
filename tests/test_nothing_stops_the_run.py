"""Nothing stops the run: a syntax error, an exit at import or in a check, an allocation
past the memory limit, a flood of output or builtins replaced at import fail only the
checks they touch, with a reason, and earn no point; the results file is the grader's
own, whatever the code wrote where it might be.

Each upload is the reference with one task's body replaced (or a broken file), graded on
that task's checks in the real sandbox.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from grader.checks import catalogue
from grader.mutants import apply
from grader.run.results import PASSED
from grader.run.engine import grade
from grader.run.report import results_json, write_json
from grader.run.submission import Submission
from tests.hostile import assert_no_points, grade_one, hostile_sources, run_body

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "hero_transformer"


def test_syntax_error_in_model_fails_only_model_tasks(reference, sandbox):
    sources = dict(reference.sources)
    sources["model.py"] = sources["model.py"].replace("class LayerNorm(nn.Module):", "class LayerNorm(nn.Module)")
    submission = Submission("syntax-error", sources)
    report = grade(submission, chapters=["05"], runner=sandbox, seed=1)
    assert_no_points(report.results)
    assert all(r.status == "error" for r in report.results)
    assert "SyntaxError" in report.results[0].diagnosis and "model.py" in report.results[0].diagnosis


def test_huge_allocation_is_refused(reference, sandbox):
    results = run_body(reference, sandbox, "gelu", "big = torch.empty(30 * 1024**3 // 8, dtype=torch.float64)\nbig.fill_(1.0)\nreturn x")
    assert_no_points(results)
    assert all(r.status == "error" for r in results)


def test_os_exit_at_import(reference, sandbox):
    sources = dict(reference.sources)
    sources["model.py"] = sources["model.py"].replace("import torch\n", "import torch\nimport os\nos._exit(0)\n", 1)
    report = grade(Submission("exit", sources), chapters=["05"], runner=sandbox, seed=1)
    assert_no_points(report.results)
    assert all(r.status == "error" for r in report.results)
    assert "ended without answering" in report.results[0].diagnosis


def test_sys_exit_inside_a_check(reference, sandbox):
    results = run_body(reference, sandbox, "gelu", "import sys\nsys.exit(0)")
    assert_no_points(results)
    assert "sys.exit" in results[0].diagnosis


def test_fake_results_file_is_overwritten(reference, sandbox, tmp_path):
    out = tmp_path / "results.json"
    body = f"""
        import json
        for path in [{str(out)!r}, "results.json", "/autograder/results/results.json", "/tmp/results.json"]:
            try:
                with open(path, "w") as handle:
                    json.dump({{"score": 1000, "tests": []}}, handle)
            except OSError:
                pass
        return x
    """
    task = catalogue.tasks()["gelu"]
    sources = apply(reference.sources, task.module, task.name, textwrap.dedent(body))
    report = grade(Submission("fake", sources), chapters=["05"], runner=sandbox, seed=1)
    write_json(results_json(report), out)
    data = json.loads(out.read_text())
    assert data["score"] == report.score < report.max_score
    assert len(data["tests"]) == len(report.results)


def test_flooding_stdout_does_not_block(reference, sandbox):
    results = run_body(reference, sandbox, "gelu", "print('x' * 10_000_000)\nreturn 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))")
    assert all(r.status == PASSED for r in results)


def test_builtins_replaced_at_import_only_hurt_the_worker(reference, sandbox):
    append = """
        import builtins as _b
        _b.isinstance = lambda obj, kind: True
    """
    results = grade_one(reference, sandbox, "gelu", hostile_sources(reference, append=append))
    assert_no_points(results)
