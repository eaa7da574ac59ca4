"""How a worker is kept apart from every other: its own user, pid, network, IPC and
mount namespaces, a filesystem that is all read-only but for private scratch folders,
a /proc that shows only itself, the reference's folder covered, and no capabilities.
run_worker (in zygote.py) applies these in each forked worker; namespaces_work asks
once, at the zygote's start, whether this machine allows them."""

from __future__ import annotations

import os
import signal

_LIBC = None


def set_process_option(option: int, value: int) -> None:
    c_library().prctl(option, value, 0, 0, 0)


# Each worker gets its own user, pid, network, IPC and mount namespaces, so whatever it
# leaves behind (a daemon, an abstract socket, a message queue, System V shared memory, a
# file in /tmp) is gone with it and unreachable from any other worker, and no signal it
# sends can reach the zygote or a sibling: there is no pid outside its namespace to name.
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
CLONE_NEWNET, CLONE_NEWIPC = 0x40000000, 0x08000000
WORKER_NAMESPACES = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWNS
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 16384, 1 << 18
# The mount API's open_tree/move_mount have one number on every architecture (Linux >= 5.2).
SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_MOUNT_SETATTR = 428, 429, 442
MOUNT_ATTR_RDONLY, AT_RECURSIVE = 0x1, 0x8000
AT_FDCWD, OPEN_TREE_CLONE, OPEN_TREE_CLOEXEC, MOVE_MOUNT_F_EMPTY_PATH = -100, 1, 0o2000000, 0x4
# Places a worker (as `nobody`) could otherwise write to, and so leave something in for
# the next one: each gets a fresh private tmpfs. Under bubblewrap /tmp and /dev are
# already read-only; without it these are the host's.
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run/lock")




def c_library():
    global _LIBC
    import ctypes

    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def namespaces_work() -> bool:
    """Whether this machine lets a worker set itself up as run_worker does: its own
    namespaces, a read-only filesystem and a /proc of its own (the mount calls need a
    recent kernel). Asked once, by doing it all in a child; where any step fails every
    worker is served as before, and the report's sandbox line says so."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            status = in_new_namespaces(private_filesystem, ())
            code = 0 if status == 0 else 1
        except BaseException:  # noqa: BLE001 - any failure means: not here
            pass
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def in_new_namespaces(run, handed_down: tuple[int, ...]) -> int | None:
    """Enter new user, pid, network, IPC and mount namespaces and call run() in a child
    that is pid 1 there; this process stays outside, runs nothing else, closes the fds
    handed down to the child, and waits. When the grader has it killed, the kernel kills
    the child (parent-death signal) and with it, as the namespace's init, every process
    the child started. None (and nothing run) where the namespaces are refused."""
    uid, gid = os.getuid(), os.getgid()
    if c_library().unshare(WORKER_NAMESPACES) != 0:
        return None
    _map_own_ids(uid, gid)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    alive_read, alive_write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(alive_write)
        set_process_option(PR_SET_PDEATHSIG, signal.SIGKILL)
        import select

        if select.select([alive_read], [], [], 0)[0]:
            os._exit(70)  # the waiting parent died before the parent-death signal was set
        os.close(alive_read)
        code = 0
        try:
            run()
        except BaseException:  # noqa: BLE001 - the child must end here, whatever happened
            code = 70
        os._exit(code)
    os.close(alive_read)
    for fd in handed_down:
        os.close(fd)
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status) & 0xFF


def _map_own_ids(uid: int, gid: int) -> None:
    """The same user and group inside the new user namespace as outside; without a
    mapping the kernel refuses to create files (even on a private tmpfs)."""
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{uid} {uid} 1"),
                       ("/proc/self/gid_map", f"{gid} {gid} 1")):
        with open(path, "w") as out:
            out.write(text)


def mount_fs(source: str, target: str, kind: str | None, flags: int, data: str | None = None) -> bool:
    return c_library().mount(source.encode(), target.encode(), kind.encode() if kind else None, flags,
                         data.encode() if data else None) == 0


def everything_read_only() -> None:
    """Every mount read-only in this namespace (device files stay usable). Without
    bubblewrap a worker may share the host's filesystem as the grader's own user (where
    `nobody` cannot reach this Python); this leaves it nothing to write to but the
    private folders mounted next."""
    import ctypes

    class MountAttr(ctypes.Structure):
        _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                    ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

    attr = MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    libc = c_library()
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, b"/", AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr)) < 0:
        raise OSError(ctypes.get_errno(), "cannot make the filesystem read-only")


def private_filesystem() -> None:
    """A /proc that shows only this worker's namespace (refused under bubblewrap, whose
    /proc is partly covered; its workers still cannot signal what they see), and a
    private empty folder over every shared one it could write to."""
    # The folders a worker could write to before, each given a private empty one after.
    writable = {d for d in PRIVATE_DIRS if os.path.isdir(d) and os.access(d, os.W_OK)}
    mount_fs("none", "/", None, MS_REC | MS_PRIVATE)
    everything_read_only()
    if not mount_fs("proc", "/proc", "proc", MS_NOSUID | MS_NODEV):
        _proc_of_its_own()
    for directory in PRIVATE_DIRS:
        if directory in writable:
            mount_fs("tmpfs", directory, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=1777")
    hide_reference()


def hide_reference() -> None:
    """Without bubblewrap the host's filesystem is visible: cover the reference's folder
    (named by the grader) with an empty read-only one."""
    for secret in os.environ.get("HERO_TRANSFORMER_HIDE", "").split(os.pathsep):
        if secret and os.path.isdir(secret):
            mount_fs("tmpfs", secret, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,mode=0555")


def _proc_of_its_own() -> None:
    """Where a fresh /proc is refused (bubblewrap's is partly covered, so the kernel will
    not mount another), cover it with a read-only folder holding only this worker's own
    entry, as /proc/self: a worker that could list the others could read what they write
    into their /proc/PID/comm, a channel between workers."""
    import ctypes

    own = f"/proc/{os.readlink('/proc/self')}"
    libc = c_library()
    libc.syscall.restype = ctypes.c_long
    tree = libc.syscall(SYS_OPEN_TREE, AT_FDCWD, own.encode(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)
    if tree < 0:
        raise OSError(ctypes.get_errno(), "cannot take a copy of this worker's /proc entry")
    if not mount_fs("tmpfs", "/proc", "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0555"):
        raise OSError(ctypes.get_errno(), "cannot cover /proc")
    os.mkdir("/proc/self")
    if libc.syscall(SYS_MOVE_MOUNT, tree, b"", AT_FDCWD, b"/proc/self", MOVE_MOUNT_F_EMPTY_PATH) < 0:
        raise OSError(ctypes.get_errno(), "cannot place this worker's /proc entry")
    os.close(tree)
    mount_fs("tmpfs", "/proc", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def drop_capabilities() -> None:
    """The namespace's capabilities were needed for the mounts above; without them the
    student's code can neither undo those mounts nor make new ones."""
    import ctypes

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    set_process_option(PR_SET_NO_NEW_PRIVS, 1)
    c_library().capset(ctypes.byref(Header(0x20080522, 0)), (Data * 2)())
