"""The sandboxed side of grading.

The zygote imports torch once, then forks one worker per request. It never reads a
request itself: the grader hands it a fresh socket for each worker (SCM_RIGHTS), so
no submission's or certified part's source ever sits in the zygote's memory for a
later worker to find. A worker loads the student's package and the certified parts
from source text, builds the hybrid the task is graded on, runs probes one at a
time, and answers with plain data.

    python -I zygote.py CONTROL_FD SANDBOX_ROOT
"""

from __future__ import annotations

import gc
import importlib.abc
import importlib.util
import json
import os
import resource
import signal
import socket
import sys
import time

if __name__ == "__main__":  # started as a script in the sandbox: argv[2] is the kit's root
    sys.path.insert(0, sys.argv[2])
    # The imports below bring torch, whose heap the collector would walk over and over as it
    # grows (about a tenth of the import): off until main() freezes what they built.
    gc.disable()

from grader.run.inside import syscall_filter, tasks  # noqa: E402 - every worker's, imported once
from grader.run.inside.isolation import (  # noqa: E402 - after the path is set
    MS_NODEV, MS_NOSUID, MS_PRIVATE, MS_RDONLY, MS_REC, PRIVATE_DIRS, PR_SET_PDEATHSIG, drop_capabilities,
    everything_read_only, hide_reference, in_new_namespaces, mount_fs, namespaces_work, set_process_option,
    private_filesystem,
)


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    isolated = _prepare_what_workers_share()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps workers
    children: set[int] = set()
    # When (the machine's monotonic clock, which the grader reads too): its profile says how long the boot took.
    control.send(json.dumps({"ready": True, "pid": os.getpid(), "isolated": isolated,
                             "at": time.monotonic()}).encode())
    while True:
        try:
            message, fds, _flags, _addr = socket.recv_fds(control, 4096, 2)
        except (ConnectionError, OSError):
            return
        if not message:
            return
        command = json.loads(message)
        children = _kill_strays(children)
        if command["op"] in ("fork", "submission") and len(fds) != 2:
            for fd in fds:
                os.close(fd)
            return  # the grader sees the zygote gone and starts a new one
        if command["op"] == "fork":
            _hand_over(control, fds, _fork_worker(control, fds, isolated), children)
        elif command["op"] == "submission" and len(fds) == 2 and isolated:
            _hand_over(control, fds, _fork_submission(control, fds), children)
        elif command["op"] == "kill":
            _kill_child(int(command["pid"]), children)


def _prepare_what_workers_share() -> bool:
    """torch, the checks and the worker's own modules imported and set up once, the
    process hardened and its heap frozen, before the first fork: whether each worker
    gets namespaces of its own."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    gc.disable()  # as at the top, where this runs as a script; nothing built before the freeze is garbage
    import torch

    torch.set_num_threads(1)
    _settle_cpu_detection(torch)
    # Everything imported here is imported once, not once per forked worker.
    import torch.nn.functional  # noqa: F401
    import torch.optim  # noqa: F401

    from grader.run.inside import op_rules, probes_only, wire  # noqa: F401 - op_rules imported once, for every worker

    probes_only.import_check_modules()
    probes_only.keep_only_what_probes_use()  # the judges' oracles never reach a submission
    op_rules.prepare(tasks.every_operator_rule())  # torch's operators and their Python implementations, once
    tasks.snapshot_grader_code()
    _harden_process()
    global _SEND, _RECV
    _SEND, _RECV = wire.bound_sender(), wire.bound_receiver()  # before any student code exists here
    isolated = namespaces_work()
    # Every worker inherits this heap and never frees it: keep the collector off it.
    gc.freeze()
    gc.enable()
    return isolated


def _fork_worker(control: socket.socket, fds: list[int], isolated: bool) -> int:
    """A child that serves one task on `fds` (run_worker) and exits; in the zygote, its pid."""
    pid = os.fork()
    if pid == 0:
        control.close()
        status = 0
        try:
            status = run_worker(*fds, isolate=isolated)
        except BaseException:  # noqa: BLE001 - the worker must end here, whatever happened
            status = 70
        os._exit(status)
    return pid


def _fork_submission(control: socket.socket, fds: list[int]) -> int:
    """The child S that imports one submission once (run_submission) and exits with a
    fixed status; in the zygote, its pid."""
    pid = os.fork()
    if pid == 0:
        control.close()
        try:
            run_submission(*fds)
        finally:
            os._exit(0)
    return pid


def _hand_over(control: socket.socket, fds: list[int], pid: int, children: set[int]) -> None:
    """The child's descriptors closed here, the child counted, and its pid told the grader."""
    for fd in fds:
        os.close(fd)
    children.add(pid)
    control.send(json.dumps({"pid": pid}).encode())


def _kill_child(pid: int, children: set[int]) -> None:
    """SIGKILL `pid` where it is a child the zygote forked; any other pid is left alone."""
    if pid in children:
        children.discard(pid)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _settle_cpu_detection(torch) -> None:
    """torch reads /proc/cpuinfo the first time it dispatches an operator. A worker's
    /proc shows only itself, so a worker that got there first printed "Error in
    cpuinfo: ..." into what the report shows as the student's output, and fell back to
    torch's slowest kernels. Asked here, in the zygote, whose /proc is whole, the
    answer is kept in memory and every forked worker inherits it."""
    try:
        torch.backends.cpu.get_cpu_capability()
    except AttributeError:  # a torch that lacks the question: any operator asks it
        pass
    torch.zeros(1).add_(1)


# ------------------------------------------------------------ keeping workers apart

def _harden_process() -> None:
    """Not dumpable: no worker can open another's (or the zygote's) /proc/PID/mem.
    Child subreaper: a worker's double-forked leftovers become the zygote's children,
    so _kill_strays can end them before they touch the next worker."""
    PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36
    try:
        set_process_option(PR_SET_DUMPABLE, 0)
        set_process_option(PR_SET_CHILD_SUBREAPER, 1)
    except OSError:
        pass


def _kill_strays(workers: set[int]) -> set[int]:
    """SIGKILL every child of the zygote that is not a live worker; returns the live workers."""
    me, alive = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) != me or fields[0] == b"Z":
            continue
        pid = int(entry)
        if pid in workers:
            alive.add(pid)
        else:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return alive


# ------------------------------------------------- one set of namespaces per worker

_SEND = _RECV = None


def run_worker(channel_fd: int, output_fd: int, isolate: bool) -> int:
    """In the zygote's fresh child: serve one task from namespaces of its own."""

    def serve():
        private_filesystem()
        drop_capabilities()
        no_process_of_its_own()
        serve_worker(channel_fd, output_fd)

    status = in_new_namespaces(serve, (channel_fd, output_fd)) if isolate else None
    if status is None:
        no_process_of_its_own()
        serve_worker(channel_fd, output_fd)
        return 0
    return status


def no_process_of_its_own() -> None:
    """Before a worker reads its task (and so before any student code runs in it): it may
    start no process and open no terminal. The filter where this machine has one; the
    audit hook, which says so in words, everywhere."""
    if syscall_filter.supported():
        try:
            syscall_filter.install_worker()
        except OSError:
            pass  # a kernel without seccomp: the audit hook alone
    syscall_filter.refuse_processes()


# ------------------------------------------- a submission imported once, then forked

# The student's package is imported once per submission, in a process of its own (S');
# each task worker is a fork of it, so an experiment left at module level costs its
# time once. S' ran student code, so nothing it holds is trusted: before that code runs
# it gets a filesystem with nothing writable and no /proc, and the seccomp filter of
# syscall_filter.py, which it and every fork keep: no process but the grader's own fork
# of a worker, and in a worker none at all. A worker reaches the grader by
# connecting to the grader's socket itself, after it was forked, in pid and user
# namespaces of its own: the grader checks who connected (Door, grader/run/submission_process.py) before it
# sends the certified parts, so they never pass through S'.


def run_submission(control_fd: int, output_fd: int) -> None:
    """In the zygote's child S: S' (pid 1 of new namespaces) imports the package and
    forks the workers. S runs no student code, and the zygote ends it with a fixed
    status, so a worker's exit says nothing to anyone."""
    in_new_namespaces(lambda: serve_submission(control_fd, output_fd), (control_fd, output_fd))


def serve_submission(control_fd: int, output_fd: int) -> None:
    from grader.run.inside import op_rules

    _redirect_output(output_fd)
    control = socket.socket(fileno=control_fd)
    request = _RECV(control)
    _sealed_filesystem()
    drop_capabilities()
    # Say who we are, before any student code runs: the grader learns this process's
    # pid namespace, the parent of every worker's it will accept.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as announce:
        announce.connect(request["listener"])
        _SEND(announce, {"submission": request["token"]})
        _RECV(announce)
    # The grader's own fork of each worker, bound now; the filter admits no other process.
    key = syscall_filter.new_key()
    fork = syscall_filter.grader_fork(key)
    syscall_filter.install(key)
    del key
    syscall_filter.refuse_processes()
    op_rules.guard_switches()  # before the student's code can keep the unguarded ones
    _apply_limits(request.get("limits", {}))
    broken: dict[str, BaseException] = {}
    modules = sorted(key[:-3] for key in request["student"] if key.endswith(".py") and "/" not in key
                     and key != "__init__.py")
    try:
        student = tasks.load(tasks.STUDENT_PACKAGE, request["student"], "submission", modules, broken)
    except BaseException as error:  # noqa: BLE001 - the package itself failed: grade per task instead
        _SEND(control, {"imported": False})  # each task's own import says why
        return
    tasks.IMPORTED_ONCE.update(student=student, broken=broken)
    import gc

    gc.freeze()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the workers' waiting parents
    sys.stdout.flush()
    sys.stderr.flush()
    _SEND(control, {"imported": True})
    listener = request["listener"]
    while True:
        try:
            command = _RECV(control)
        except (EOFError, OSError, ValueError):
            return
        if not isinstance(command, dict) or command.get("op") != "fork":
            return
        try:
            child = fork()
        except OSError:
            # No room for a process (this upload's own limit, or the machine's): say so
            # at once, so the grader does not wait for a worker that will never come.
            _SEND(control, {"forked": False})
            continue
        if child == 0:
            try:
                control.close()
                _serve_connected_worker(listener)
            finally:
                os._exit(0)
        _SEND(control, {"forked": True})


def _sealed_filesystem() -> None:
    """Nothing S' or its forks could write to or read about each other: every mount
    read-only, no /proc, the shared scratch folders emptied, the reference's folder
    (without bubblewrap) hidden."""
    mount_fs("none", "/", None, MS_REC | MS_PRIVATE)
    everything_read_only()
    if not mount_fs("tmpfs", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,mode=0555"):
        raise OSError("cannot cover /proc")
    for directory in PRIVATE_DIRS:
        if os.path.isdir(directory):  # read-only already; emptied too, so no two sandboxes meet here
            mount_fs("tmpfs", directory, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,mode=0555")
    hide_reference()


def _serve_connected_worker(listener: str) -> None:
    """In the grader's fork of S': the worker, pid 1 of new user, pid, network and IPC
    namespaces (the fork made them), which connects to the grader and serves one task.
    It forbids itself every process creation before it reads anything."""
    # (No id mapping: there is no /proc here to write it to, and nothing to create files in.)
    set_process_option(PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.closerange(3, 1 << 16)
    syscall_filter.install_worker()
    channel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    channel.connect(listener)
    _SEND(channel, {"worker": True})
    # The grader answers, once it has checked who connected, with this worker's own
    # output pipe; the task's request follows.
    _, fds, _, _ = socket.recv_fds(channel, 1, 1)
    if len(fds) != 1:
        return
    _redirect_output(fds[0])
    tasks.serve_tasks(channel, _SEND, _RECV, _apply_limits)


# ------------------------------------------------------------------------ worker


def _apply_limits(limits: dict) -> None:
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, name), (value, value))


def _redirect_output(output_fd: int) -> None:
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.close(output_fd)
    sys.stdin = open(0, closefd=False)


def serve_worker(channel_fd: int, output_fd: int) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    _redirect_output(output_fd)
    channel = socket.socket(fileno=channel_fd)
    # Up, before reading the task: a worker that never says so never came up (the machine
    # had no room for it), and nothing the submission does can say it in its stead, since
    # the submission's code arrives with the task.
    _SEND(channel, {"up": True})
    tasks.serve_tasks(channel, _SEND, _RECV, _apply_limits)


if __name__ == "__main__":
    main()
