"""`make student`: every generated file written from solutions/ and the checks, in order.

    python -m grader.generate

Each step is a module of this package run as `python -m grader.generate.<step>` would
run it, stopping at the first that fails (the first, `consistency`, stops with one
sentence where a region and the task folders disagree). Started one by one, each paid
for its own interpreter, torch and catalogue: most of the command's time. Here they are
imported once, and each step runs in a child forked from that process, so it starts
from the same clean state a process of its own would (no cache a step leaves, such as
the facts read before `facts` rewrote them, reaches the next); where a platform has no
fork, each step is a process of its own, as before.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import traceback

STEPS = ("consistency", "promises", "facts", "forms", "student_copy", "lesson_tables", "doc_totals",
         "check_table", "notebooks")


def main() -> int:
    forking = hasattr(os, "fork")
    if forking:
        import torch  # noqa: F401 - imported once, before the forks: no step pays for it again

        from grader.checks import catalogue

        catalogue.all_checks()
    for step in STEPS:
        module = f"{__package__}.{step}"
        print(f"python -m {module}", flush=True)
        status = _forked(module) if forking else subprocess.call([sys.executable, "-m", module])
        if status:
            return status
    return 0


def _forked(module: str) -> int:
    """The step's exit status, run in a child of this process."""
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            sys.argv = [module]
            status = importlib.import_module(module).main() or 0
        except SystemExit as stop:  # a step's sentence (raise SystemExit("...")), or its status
            if isinstance(stop.code, str):
                print(stop.code, file=sys.stderr)
                status = 1
            else:
                status = stop.code or 0
        except BaseException:  # noqa: BLE001 - shown as a process of its own would show it
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


if __name__ == "__main__":
    sys.exit(main())
