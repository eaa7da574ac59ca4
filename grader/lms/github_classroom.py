"""python -m grader.lms.github_classroom [--chapters 05] — the public checks, scored the way GitHub
Classroom's autograding reporter reads them.

Writes `result=<base64 JSON>` to $GITHUB_OUTPUT (version 1 of the reporter's format: one
test per check with its points), so `classroom-resources/autograding-grading-reporter`
shows each check and Classroom records the total. Outside Actions it prints the JSON.
Exits 0 whatever the score: the points are the grade, a red run would only hide them.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import tempfile
from pathlib import Path

from rich.console import Console


def classroom_result(results: dict) -> dict:
    """The reporter's payload from the grader's results.json."""
    tests = [{"name": t["name"], "status": "pass" if t["status"] == "passed" else "fail",
              "score": t["score"], "max_score": t["max_score"], "message": t.get("output", ""),
              "test_code": "", "filename": "", "line_no": 0, "duration": 0}
             for t in results.get("tests", [])]
    return {"version": 1, "status": "pass" if tests and all(t["status"] == "pass" for t in tests) else "fail",
            "max_score": sum(t["max_score"] for t in tests), "tests": tests}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.lms.github_classroom", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("package", nargs="?", default="hero_transformer")
    parser.add_argument("--chapters", help="e.g. 05 or 05,07 (default: every chapter released)")
    args = parser.parse_args(argv)
    from grader.run.session import run_grading

    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "results.json"
        run_grading(args.package, args.chapters, True, str(path), Console())
        payload = classroom_result(json.loads(path.read_text(encoding="utf-8")))
    score = sum(t["score"] for t in payload["tests"])
    encoded = base64.b64encode(json.dumps(payload).encode("utf-8")).decode("ascii")
    target = os.environ.get("GITHUB_OUTPUT")
    if target:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(f"result={encoded}\n")
    else:
        print(json.dumps(payload, indent=1))
    print(f"Points {score:g}/{payload['max_score']:g}")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
