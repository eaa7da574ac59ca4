"""Running untrusted code: the grader's side of the zygote (grader/run/inside/zygote.py).

Where bubblewrap works, the zygote runs in it as an unprivileged user with no network,
an empty read-only /tmp, and only the Python install, the venv and grader/{run/inside,checks}
visible: the reference, the engine, the submission on disk and the results file are not
in its filesystem at all (the check modules are, but the expected values they judge
against are computed by the reference, in the grader). Elsewhere it runs as a plain child process (as
`nobody` when the grader is root) with the same resource limits; `Sandbox.kind` says
which, and the report shows it.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

from grader import KIT_ROOT
from grader.run import cpu_clock
from grader.run.inside import wire
from grader.run.submission_process import DOOR_INSIDE, DoorFolder, SubmissionProcess
from grader.run.processes import Limits
from grader.run.worker import OutputTail, Worker

GRADER_DIR = KIT_ROOT / "grader"
SANDBOX_ROOT = "/sandbox"
NOBODY = 65534
# Folders of the course that hold what no worker may read (the reference), where the
# worker shares the grader's filesystem (no bubblewrap).
HIDDEN_FROM_WORKERS = ("solutions",)


def bwrap_works() -> bool:
    exe = shutil.which("bwrap")
    if not exe:
        return False
    try:
        done = subprocess.run(_bwrap_prefix(exe) + [sys.executable, "-I", "-c", "pass"],
                              capture_output=True, timeout=30)
        return done.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _python_roots() -> list[str]:
    roots = {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix),
             os.path.realpath(os.path.dirname(os.path.realpath(sys.executable)) + "/..")}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(os.path.realpath(path))
    # Keep only the outermost folders; bind each once.
    ordered = sorted(roots, key=len)
    return [r for i, r in enumerate(ordered) if not any(r.startswith(o + "/") for o in ordered[:i])]


def _bwrap_prefix(exe: str, door_dir: str | None = None, checks: Path | None = None) -> list[str]:
    args = [exe, "--unshare-all", "--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY),
            "--cap-drop", "ALL", "--die-with-parent", "--new-session",
            "--ro-bind", "/usr", "/usr", "--proc", "/proc", *_devices(), "--tmpfs", "/tmp",
            "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
            "--setenv", "OMP_NUM_THREADS", "1", "--setenv", "MKL_NUM_THREADS", "1",
            "--chdir", "/tmp"]
    for link in ("/lib", "/lib64", "/bin", "/sbin"):
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    for etc in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/passwd", "/etc/group"):
        if os.path.exists(etc):
            args += ["--ro-bind", etc, etc]
    for root in _python_roots():
        args += ["--ro-bind", root, root]
    # Only the sandbox-side code of the grader, never grader/ as a whole nor solutions/; of
    # the checks, what the students' bundle holds and the hidden checks' probes (worker_view).
    args += ["--ro-bind", str(GRADER_DIR / "__init__.py"), f"{SANDBOX_ROOT}/grader/__init__.py",
             "--ro-bind", str(GRADER_DIR / "run" / "__init__.py"), f"{SANDBOX_ROOT}/grader/run/__init__.py",
             "--ro-bind", str(GRADER_DIR / "run" / "inside"), f"{SANDBOX_ROOT}/grader/run/inside"]
    if checks is not None:
        args += ["--ro-bind", str(checks), f"{SANDBOX_ROOT}/grader/checks"]
    if door_dir:
        args += ["--ro-bind", door_dir, DOOR_INSIDE]
    # Last, once every mount point under it exists (the venv may live in /tmp): /tmp is an
    # empty, read-only tmpfs, so nothing a worker writes can reach a later one.
    args += ["--remount-ro", "/tmp"]
    return args


def kit_files_in_the_sandbox(checks: Path) -> dict[str, Path]:
    """{path under SANDBOX_ROOT: the kit's file bound there}: every file of the kit a
    worker can read (the door folder aside, which no worker can list), read off the same
    bind list the sandbox starts with."""
    args = _bwrap_prefix("bwrap", None, checks)
    found = {}
    for i, arg in enumerate(args):
        if arg == "--ro-bind" and args[i + 2].startswith(SANDBOX_ROOT + "/"):
            source, inside = Path(args[i + 1]), args[i + 2][len(SANDBOX_ROOT) + 1:]
            files = [source] if source.is_file() else [p for p in source.rglob("*") if p.is_file()]
            for path in files:
                found[inside if path == source else f"{inside}/{path.relative_to(source).as_posix()}"] = path
    return found


# The device files computing may use: bubblewrap's own --dev set, less the terminals
# (ptmx, pts/, tty), through which a process could be driven from outside its sandbox.
DEVICES = ("null", "zero", "full", "random", "urandom")


def _devices() -> list[str]:
    args = ["--tmpfs", "/dev"]
    for name in DEVICES:
        if os.path.exists(f"/dev/{name}"):
            args += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    args += ["--symlink", "/proc/self/fd", "/dev/fd", "--symlink", "/proc/self/fd/0", "/dev/stdin",
             "--symlink", "/proc/self/fd/1", "/dev/stdout", "--symlink", "/proc/self/fd/2", "/dev/stderr",
             "--dir", "/dev/shm", "--remount-ro", "/dev"]
    return args


class _PidsCgroup:
    """The sandbox's cgroup-v1 pids groups, where the machine offers them (root, with
    /sys/fs/cgroup/pids). One folder per sandbox, with no cap of its own, holds a group
    for each thing whose processes and threads are counted apart:

        zygote/          bubblewrap and the zygote, and each child the zygote forks, until
                         the grader places it (the zygote forks one at a time, for it)
        upload.<pid>/    one submission's import-once process, capped at Limits.processes
        worker.<pid>/    one worker, capped at Limits.worker_processes

    Student code runs only in the last two, and only once placed, so no upload can use up
    the processes another upload's import or workers need, nor those the zygote needs to
    fork them. close() ends every process in every group."""

    ROOT = Path("/sys/fs/cgroup/pids")

    PREFIX = "hero_transformer_grader."
    ZYGOTE = "zygote"

    def __init__(self, limit: int):
        self.path = None
        self._born: set[int] = set()  # the zygote group's own processes (bwrap, the zygote)
        self._sweep()
        try:
            path = self.ROOT / f"{self.PREFIX}{os.getpid()}.{id(self)}"
            path.mkdir()
            try:
                (path / self.ZYGOTE).mkdir()
                (path / self.ZYGOTE / "pids.max").write_text(str(limit))
            except OSError:
                path.rmdir()
                raise
            self.path = path
        except OSError:
            self.path = None

    @classmethod
    def _sweep(cls):
        """Remove the empty groups of graders that are gone (one killed before its close())."""
        try:
            entries = list(cls.ROOT.glob(cls.PREFIX + "*"))
        except OSError:
            return
        for entry in entries:
            owner = entry.name[len(cls.PREFIX):].split(".")[0]
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                for group in [*entry.glob("*/"), entry]:
                    try:
                        group.rmdir()  # fails, harmlessly, while processes remain in it
                    except OSError:
                        pass

    def join(self):
        """In the forked child before exec: move it (and all it will start) into the zygote's group."""
        if self.path is not None:
            with open(self.path / self.ZYGOTE / "cgroup.procs", "w") as procs:
                procs.write(str(os.getpid()))

    def _procs(self, group: Path) -> list[int]:
        """The processes of a group, as this process numbers them (the zygote's own
        numbers are those of the sandbox's pid namespace, never to be written here)."""
        try:
            return [int(p) for p in (group / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def _ours(self, pid: int) -> bool:
        """Whether `pid` is in one of this sandbox's groups: no other process is ever moved."""
        inside = "/" + self.path.relative_to(self.ROOT).as_posix()
        try:
            with open(f"/proc/{pid}/cgroup") as groups:
                for line in groups:
                    _, controllers, where = line.rstrip("\n").split(":", 2)
                    if "pids" in controllers.split(","):
                        return where == inside or where.startswith(inside + "/")
        except (OSError, ValueError):
            pass
        return False

    def booted(self) -> None:
        """The zygote is up: what its group holds now is the zygote's own."""
        if self.path is not None:
            self._born = set(self._procs(self.path / self.ZYGOTE))

    def _group(self, name: str, limit: int) -> Path | None:
        for old in [*self.path.glob("worker.*"), *self.path.glob("upload.*")]:
            try:
                old.rmdir()  # fails, harmlessly, while a process remains in it
            except OSError:
                pass
        group = self.path / name
        try:
            group.mkdir(exist_ok=True)
            (group / "pids.max").write_text(str(limit))
        except OSError:
            return None
        return group

    def _move(self, pid: int, group: Path) -> bool:
        if not self._ours(pid):
            return False
        try:
            (group / "cgroup.procs").write_text(str(pid))
            return True
        except OSError:
            return False  # gone already

    def place_new(self, kind: str, limit: int) -> bool:
        """Move the zygote's new child (before it runs anything of a submission's), with
        whatever it started before it moved, out of the zygote's group into a group of
        its own ("worker" or "upload"), capped at `limit`. The zygote forks only when
        asked, one child at a time, under the sandbox's lock: whatever its group holds
        besides the zygote's own processes is that child. False where nothing could be
        moved."""
        if self.path is None:
            return False
        zygote, group, moved = self.path / self.ZYGOTE, None, False
        for _ in range(20):  # until no child of the new one is left behind (one born as its parent moved)
            new = [pid for pid in self._procs(zygote) if pid not in self._born]
            if not new:
                break
            if group is None:
                group = self._group(f"{kind}.{min(new)}", limit)
                if group is None:
                    return False
            for pid in new:
                moved = self._move(pid, group) or moved
        return moved

    def place(self, pid: int, name: str, limit: int) -> bool:
        """Move `pid`, one of this sandbox's processes (a worker forked by a submission's
        process, numbered as this process sees it), into a group of its own, `name`,
        capped at `limit`."""
        if self.path is None:
            return False
        group = self._group(name, limit)
        return group is not None and self._move(pid, group)

    def close(self):
        if self.path is None:
            return
        # A killed process leaves its group within milliseconds: asked again that often
        # (for up to a second), since every grading waits here before it ends.
        for _ in range(500):
            groups = [*self.path.glob("*/"), self.path]
            for group in groups:
                for pid in self._procs(group):
                    try:
                        os.kill(pid, 9)
                    except ProcessLookupError:
                        pass
            try:
                for group in groups:
                    group.rmdir()
                self.path = None
                return
            except OSError:
                time.sleep(0.002)


class Sandbox:
    """One zygote, restarted whenever it dies; `worker()` forks a fresh worker."""

    def __init__(self, limits: Limits | None = None, isolation: str = "auto", reuse_zygote: bool = True,
                 import_once: bool = True, public: bool | None = None):
        self.limits = limits or Limits()
        # Whether the runs it serves hold no reference (a student's own check), so that its
        # report line is read by the student. None: public wherever this copy of the
        # course has no reference to hand out (a student's copy).
        if public is None:
            from grader.run.reference import Reference

            public = Reference.available() is None
        self.public = public
        # Two grading threads: forked workers start in a few ms, so two keep both cores busy.
        self.threads = max(1, min(2, os.cpu_count() or 1))
        # reuse_zygote=False starts a fresh interpreter (and torch import) for every
        # worker: slower, kept to measure what the zygote saves (`make bench`).
        self.reuse_zygote = reuse_zygote
        if isolation == "auto":
            isolation = "bwrap" if bwrap_works() else "process"
        self.kind = isolation
        self.as_nobody = isolation == "process" and os.geteuid() == 0
        self._process = None
        self._control = None
        self._ready = False
        self._lock = threading.Lock()
        self._pids: _PidsCgroup | None = None  # made when the first zygote starts
        self._zygote_host: int | None = None
        self.isolated = False  # whether each worker gets namespaces of its own (the zygote says)
        # import_once=False imports a submission's package in every task's worker, as
        # where the seccomp filter is not available (kept to measure what it saves).
        from grader.run.inside import syscall_filter

        self.door_folder = DoorFolder() if import_once and reuse_zygote and syscall_filter.supported() else None
        self.imported_once = False  # whether the last submission was imported once (the report says so)

    def describe(self, imported_once: bool | None = None) -> str:
        """The sandbox in words; `imported_once` for the submission being reported (two
        uploads graded side by side may differ), else the last one started. A public
        run's line is the student's: how their code ran, in their terms; the staff's
        names every layer of isolation, and what is missing where it matters."""
        if self.public:
            return self._describe_to_student()
        imported_once = self.imported_once if imported_once is None else imported_once
        capped = self.counts_processes()
        cap = (f", at most {self.limits.processes} processes for a submission's import and "
               f"{self.limits.worker_processes} for each worker, counted apart" if capped else "")
        apart = ("each worker in namespaces of its own (pids, network, IPC, mounts)" if self.isolated else
                 "workers share one set of namespaces: this machine refuses unprivileged user namespaces, so "
                 "a worker can reach its siblings through IPC, abstract sockets and signals")
        if imported_once:
            apart += ("; the package imported once per submission, in a process sealed by a seccomp filter "
                      "that each task's worker is forked from")
        if self.kind == "bwrap":
            return (f"bubblewrap (no network, empty read-only /tmp, reference and grader files not visible, "
                    f"user nobody{cap}; {apart})")
        who = "user nobody" if self.as_nobody else "the grader's own user"
        return (f"separate process as {who} with resource limits; {apart} (bubblewrap unavailable: "
                f"install it for full isolation)")

    def counts_processes(self) -> bool:
        """Whether pids groups count each submission's and each worker's processes apart
        (else the processes' own RLIMIT_NPROC, in their user namespaces, stands in)."""
        return self._pids is not None and self._pids.path is not None

    def _describe_to_student(self) -> str:
        # A student's check needs no more isolation than any of these gives: nothing to
        # install, so nothing is suggested.
        where = " in the Linux sandbox (no network, files read-only)" if self.kind == "bwrap" else ""
        return (f"separate processes{where}, each check within its time limit (at most "
                f"{self.limits.check_seconds:g} s) and {self.limits.memory_bytes / 1024**3:g} GB of memory")

    def start(self) -> "Sandbox":
        """Begin booting the zygote now (it imports torch, ~1 s) without waiting for it,
        so that the grader's own start-up overlaps with it."""
        with self._lock:
            if self._process is None:
                self._spawn()
        return self

    def _start(self):
        self._spawn()
        self._await_ready()

    def _spawn(self):
        if self._pids is None:
            self._pids = _PidsCgroup(self.limits.processes)
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fd = child_end.fileno()
        if self.kind == "bwrap":
            from grader.run import worker_view  # it reads the checks, and so imports torch: not before now

            root = SANDBOX_ROOT
            command = _bwrap_prefix(shutil.which("bwrap"), self.door_folder.dir if self.door_folder else None,
                                    worker_view.folder()) + [
                sys.executable, "-I", f"{root}/grader/run/inside/zygote.py", str(fd), root]
            preexec, env, cwd = self._pids.join, None, "/"
        else:
            root = str(GRADER_DIR.parent)
            command = [sys.executable, "-I", str(GRADER_DIR / "run" / "inside" / "zygote.py"), str(fd), root]
            env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                   # Each worker's own mount namespace covers these with an empty folder.
                   "HERO_TRANSFORMER_HIDE": os.pathsep.join(str(GRADER_DIR.parent / d) for d in HIDDEN_FROM_WORKERS)}

            def preexec():
                self._pids.join()
                if self.as_nobody:
                    _drop_to_nobody()

            cwd = "/tmp"
        try:
            self._process = subprocess.Popen(command, pass_fds=[fd], stdin=subprocess.DEVNULL,
                                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                             env=env, cwd=cwd, preexec_fn=preexec,
                                             start_new_session=True)
        except OSError:
            parent_end.close()
            child_end.close()
            if self.as_nobody:
                # `nobody` may be unable to reach this Python (e.g. one under /root).
                self.as_nobody = False
                return self._spawn()
            raise
        child_end.close()
        self._control = parent_end
        self._ready = False
        self._spawned = time.monotonic()

    def _await_ready(self):
        from grader.profile import PHASES

        with PHASES.phase("sandbox boot"):
            self._wait_for_zygote()

    def _wait_for_zygote(self):
        parent_end = self._control
        parent_end.settimeout(self.limits.setup_seconds + 30)
        try:
            ready = json.loads(parent_end.recv(4096) or b"{}")
        except (OSError, ValueError):
            ready = {}
        if not ready.get("ready"):
            self._process.kill()
            self._process.wait()
            error = (self._process.stderr.read() or b"").decode("utf-8", "replace")[-2000:]
            parent_end.close()
            self._process = self._control = None
            if self.as_nobody:
                # `nobody` may be unable to reach this Python (e.g. one under /root).
                self.as_nobody = False
                return self._start()
            raise RuntimeError(f"the sandbox did not start ({self.kind}): {error}")
        parent_end.settimeout(30)
        if isinstance(ready.get("at"), float):
            from grader.profile import PHASES

            PHASES.note("zygote boot", ready["at"] - self._spawned)
        self.isolated = ready.get("isolated") is True
        # The zygote as this process numbers it: its children's processor time is read there.
        self._zygote_host = cpu_clock.numbered(ready["pid"], self._process.pid) \
            if isinstance(ready.get("pid"), int) else None
        self._pids.booted()
        self._ready = True

    def booting(self) -> bool:
        """Whether the zygote is still starting (it has not said it is ready), asked without
        waiting: the grader may use that time for work of its own."""
        control = self._control
        if self._ready or control is None:
            return False
        try:
            readable, _, _ = select.select([control], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    def _ensure(self):
        if self._process is None or self._process.poll() is not None:
            self._shutdown_process()
            self._start()
        elif not self._ready:
            self._await_ready()

    holds_reference = True  # certified parts reach only the workers it isolates

    def fork(self, op: str) -> tuple[int, socket.socket, int]:
        """Ask the zygote for a child (`op`: "fork" for a task's worker, "submission"
        for a package imported once): (its pid, our end of its channel, the read end of
        its output), placed in a pids group of its own (where there are such) before it
        runs anything of a submission's. A dead zygote is started again, once; OSError if
        that fails too."""
        with self._lock:
            for attempt in range(2):
                if not self.reuse_zygote and op == "fork":
                    self._shutdown_process()
                self._ensure()
                ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                out_read, out_write = os.pipe()
                try:
                    socket.send_fds(self._control, [json.dumps({"op": op}).encode()], [theirs.fileno(), out_write])
                    reply = json.loads(self._control.recv(4096) or b"{}")
                    pid = int(reply["pid"])
                except (OSError, ValueError, KeyError) as error:
                    # The zygote died (perhaps a worker killed it): start a new one.
                    ours.close()
                    os.close(out_read)
                    self._shutdown_process()
                    if attempt:
                        raise OSError(f"the sandbox's zygote gave no {op}: {error!r}") from None
                    continue
                finally:
                    theirs.close()
                    os.close(out_write)
                if self._pids is not None:
                    if op == "fork":
                        self._pids.place_new("worker", self.limits.worker_processes)
                    else:
                        self._pids.place_new("upload", self.limits.processes)
                return pid, ours, out_read
        raise OSError("unreachable")

    # How often a worker that never came up is asked for again, and the first pause.
    START_ATTEMPTS, START_PAUSE = 3, 0.25

    def worker(self) -> Worker:
        """A fresh worker, up and waiting for its task (_forked)."""
        return self._forked()

    def parts_process(self) -> Worker:
        """A fresh process for the certified parts a worker calls across (grader/run/inside/
        parts.py): forked from the zygote like a task's worker, never from an upload's
        imported package, and told to serve parts instead of a task."""
        return self._forked()

    def _forked(self) -> Worker:
        """A fresh child of the zygote, up and waiting for what it serves. One that never comes up found no
        room for a process (the machine's, or a limit the grader shares): it is asked for
        again, after a pause that doubles; OSError once START_ATTEMPTS have failed, so
        that the check is the grader's failure, never the submission's."""
        why = ""
        for attempt in range(self.START_ATTEMPTS):
            if attempt:
                time.sleep(self.START_PAUSE * 2 ** (attempt - 1))
            pid, channel, out_read = self.fork("fork")
            worker = Worker(pid, channel, OutputTail(out_read), end=lambda clean, pid=pid: self.kill(pid),
                            host_pid=self.host_pid(pid))
            try:
                up = wire.recv(channel, deadline=time.monotonic() + self.limits.setup_seconds)
            except (EOFError, OSError, TimeoutError, wire.WireError) as error:
                up, why = None, repr(error)
            if isinstance(up, dict) and up.get("up") is True:
                return worker
            worker.kill()
        raise OSError(f"no worker came up in {self.START_ATTEMPTS} attempts ({why or 'it said nothing'})")

    def host_pid(self, pid: int) -> int | None:
        """A child of the zygote, named by the zygote's numbering, as this process numbers
        it (None where that cannot be read: its limits are then kept in wall-clock time)."""
        zygote = getattr(self, "_zygote_host", None)
        return cpu_clock.child_numbered(zygote, pid) if zygote is not None else None

    def isolates_workers(self) -> bool:
        """Whether each worker gets namespaces of its own (the zygote says so when it boots)."""
        with self._lock:
            self._ensure()
            return self.isolated

    def confine_worker(self, pid: int) -> None:
        """Cap a new worker forked from a submission's process (Limits.worker_processes)
        apart from that process and its siblings; `pid` as this process numbers it (the
        door's peer credentials)."""
        if self._pids is not None:
            self._pids.place(pid, f"worker.{pid}", self.limits.worker_processes)

    def kill(self, pid: int) -> None:
        """End one of the zygote's children."""
        with self._lock:
            if self._control is not None and self._process is not None and self._process.poll() is None:
                try:
                    self._control.send(json.dumps({"op": "kill", "pid": pid}).encode())
                except OSError:
                    pass

    def _shutdown_process(self):
        if self._process is not None:
            # Its own session: the whole group goes (without bwrap, workers outlive a
            # killed zygote otherwise).
            try:
                os.killpg(self._process.pid, 9)
            except (ProcessLookupError, PermissionError):
                pass
            self._process.kill()
            self._process.wait()
        if self._control is not None:
            self._control.close()
        self._process = self._control = None
        self._ready = False

    def package(self, sources: dict[str, str]) -> "SubmissionProcess | None":
        """The submission's package imported once, ready to fork workers from; None where
        that cannot be done (no seccomp filter or namespaces here, or the import hung or
        died), and the caller imports it in each task's worker instead."""
        if self.door_folder is None:
            self.imported_once = False
            return None
        process = SubmissionProcess(self, sources)
        try:
            started = process.start()
        except Exception:  # noqa: BLE001 - importing per task always works
            started = False
        if not started:
            process.close()
        self.imported_once = started
        return process if started else None

    def close(self):
        with self._lock:
            self._shutdown_process()
            if self._pids is not None:
                self._pids.close()
                self._pids = None
            if self.door_folder is not None:
                self.door_folder.close()
                self.door_folder = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _drop_to_nobody():
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
