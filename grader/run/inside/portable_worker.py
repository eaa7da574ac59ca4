"""The portable runner's worker process (grader/run/portable.py starts it).

    python -I portable_worker.py KIT_ROOT PORT      (the token in HERO_TRANSFORMER_WORKER_TOKEN)

It connects back to the grader on the loopback interface, names the token it was given,
imports torch and the checks once, then serves one task after another (tasks.py): each
task's request carries the student's package as source text, which is imported once per
process and reused while the text stays the same. It refuses any request that carries
certified parts: nothing here could keep student code from reading them. Only what every
platform has is used: no fork, no signals, no /proc, no resource limits.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import socket
import sys

if __name__ == "__main__":  # started as a script: argv[1] is the kit's root
    sys.path.insert(0, sys.argv[1])

from grader.run.inside import tasks, wire  # noqa: E402 - after the path is set


def _import_checks() -> None:
    from grader.run.inside import probes_only

    probes_only.import_check_modules()
    probes_only.keep_only_what_probes_use()


class _PackageOnce:
    """Imports the student's package once per process, for every task that sends the
    same text; a package that fails to import is left to each task's own import, so
    the failure is reported where it belongs."""

    def __init__(self):
        self.key = None

    def __call__(self, request: dict) -> None:
        if request.certified:
            raise PermissionError("the portable runner holds no reference: grading with certified parts runs in "
                                  "the Linux sandbox")
        sources = request.student
        key = hashlib.sha256(json.dumps(sources, sort_keys=True).encode("utf-8")).hexdigest()
        if key == self.key and not request.fresh:
            return
        tasks.IMPORTED_ONCE.clear()
        for name in [n for n in sys.modules if n == tasks.STUDENT_PACKAGE or n.startswith(tasks.STUDENT_PACKAGE + ".")]:
            del sys.modules[name]
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, tasks.SourcePackage)]
        modules = sorted(k[:-3] for k in sources if k.endswith(".py") and "/" not in k and k != "__init__.py")
        broken: dict = {}
        try:
            student = tasks.load(tasks.STUDENT_PACKAGE, sources, "submission", modules, broken)
        except BaseException:  # noqa: BLE001 - each task imports it again and reports why it fails
            for name in [n for n in sys.modules if n.startswith(tasks.STUDENT_PACKAGE)]:
                del sys.modules[name]
            sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, tasks.SourcePackage)]
            self.key = None
            return
        tasks.IMPORTED_ONCE.update(student=student, broken=broken)
        self.key = key


def main() -> None:
    port = int(sys.argv[2])
    token = os.environ.pop("HERO_TRANSFORMER_WORKER_TOKEN", "")
    send, recv = wire.bound_sender(), wire.bound_receiver()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # The kit's own imports come before the hello: the parent times the student's import
    # from the first request on, and torch's first import on a laptop can take minutes.
    # The collector stays off while they build their heap (it would walk it over and over
    # as it grows), which is then frozen: it holds no garbage.
    gc.disable()
    import torch

    torch.set_num_threads(1)
    # torch detects the CPU on its first operator, and says so on stderr where it cannot
    # read /proc/cpuinfo (some containers, WSL): asked now, before the hello, whatever it
    # prints lands before the first task's share of the output file, not in a student's.
    torch.zeros(1).add_(1)
    import torch.nn.functional  # noqa: F401
    import torch.optim  # noqa: F401

    _import_checks()
    from grader.run.inside import op_rules

    op_rules.prepare(tasks.every_operator_rule())
    tasks.snapshot_grader_code()
    gc.freeze()
    gc.enable()
    channel = socket.create_connection(("127.0.0.1", port))
    send(channel, {"token": token})
    tasks.serve_tasks(channel, send, recv, many=True, prepare=_PackageOnce())
    sys.stdout.flush()


if __name__ == "__main__":
    main()
