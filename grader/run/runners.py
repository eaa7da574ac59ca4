"""Which runner runs student code here (grader.run.processes names what a runner is).

The Linux sandbox wherever it can start: Linux, with fork and resource limits. The
portable runner everywhere else (Windows, macOS), and wherever it is asked for; it
holds no reference, so a run that needs one refuses there and says where grading runs.
"""

from __future__ import annotations

import os
import sys

from grader.run.processes import Limits, Runner, RunnerRefused

KINDS = ("sandbox", "portable")

WHERE_GRADING_RUNS = ("grading with the reference or hidden checks runs only in the Linux sandbox: on a Linux "
                      "machine (the course's own, a container, or the LMS's autograder such as Gradescope); "
                      "on this machine, `check` runs the public checks")


def sandbox_possible() -> bool:
    """Linux, with what the sandbox's zygote needs: fork, resource limits, /proc."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork") or not os.path.isdir("/proc"):
        return False
    try:
        import resource  # noqa: F401
    except ImportError:
        return False
    return True


def _why_not_the_sandbox() -> str:
    platform = {"win32": "Windows", "darwin": "macOS"}.get(sys.platform)
    if platform:
        return f"the Linux sandbox does not run on {platform}; the public checks do not need it"
    return ("this Python lacks what the Linux sandbox needs (fork, resource limits, /proc); the public checks do "
            "not need it")


def choose(kind: str | None = None) -> str:
    if kind is None:
        return "sandbox" if sandbox_possible() else "portable"
    if kind not in KINDS:
        raise ValueError(f"unknown runner {kind!r}: choose one of {', '.join(KINDS)}")
    return kind


def open_runner(kind: str | None = None, limits: Limits | None = None, with_reference: bool = True) -> Runner:
    """A runner of the given kind (None: the best this machine offers). A run with the
    reference or hidden checks on the portable runner is refused (RunnerRefused)."""
    asked = kind
    kind = choose(kind)
    limits = limits or Limits()
    if kind == "portable":
        if with_reference:
            raise RunnerRefused(WHERE_GRADING_RUNS)
        from grader.run.portable import PortableRunner

        reason = "chosen with --runner portable" if asked else _why_not_the_sandbox()
        return PortableRunner(limits, reason)
    if not sandbox_possible():
        raise RunnerRefused("the Linux sandbox cannot start on this machine (it needs Linux with fork and "
                            "resource limits); use --runner portable for the public checks")
    from grader.run.sandbox import Sandbox

    return Sandbox(limits, public=not with_reference)
