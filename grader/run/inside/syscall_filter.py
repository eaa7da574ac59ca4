"""A seccomp filter that leaves a process no way to make something it could share.

A submission's package is imported once, in a process every task worker is then forked
from. Code that ran there could have set up a channel for those workers to pass answers
(or certified code) along: a pipe or socket pair they all inherit, shared memory, a
message queue, a file lock, a signal, a mount. This filter is installed before that
code runs, and the kernel keeps it on that process and every process it starts: the
calls that make such things fail with EPERM. What stays allowed is what computing
needs, plus connect() of a plain Unix stream socket, the one way a worker reaches the
grader (nothing in the sandbox may bind or listen, so the grader is all it can reach).

No process of its own: student code must compute in the process the grader gave it.
A process it started (a fresh interpreter, say) would have a clean torch outside every
rule of the task, and could be reached from every worker as a helper. So the filter
also refuses fork, vfork, execve and execveat and every clone, a thread's included (a
thread runs outside the dispatch modes that record a task's operators), and the ioctls that make a pseudo-terminal usable. The grader still has to fork each
task's worker from this process: it does so with one raw clone of its own (new user,
pid, network and IPC namespaces at once, a shape no library call uses), which carries a
64-bit key, drawn for this process alone, in an argument the kernel ignores for that
shape. The filter admits a clone of exactly that shape with exactly that key. The
function that makes it is bound before any student code runs, and a worker, once
forked, adds a second filter that admits no process creation at all (worker_program);
so does a worker forked by the zygote. Above the filter an audit hook refuses the same
attempts in words (refuse_processes), so a check can say what happened.

Only x86-64 is described here; elsewhere `supported()` is False and the grader imports
a submission once per task instead.
"""

from __future__ import annotations

import ctypes
import platform
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
RET_ALLOW, RET_KILL = 0x7FFF0000, 0x80000000
EPERM, ENOSYS = 1, 38


def _errno(code: int) -> int:
    return 0x00050000 | code


# Calls refused outright, by what they would let a process share or reach.
DENIED = {
    "signals": {"kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297,
                "pidfd_send_signal": 424, "pidfd_open": 434, "pidfd_getfd": 438},
    "other processes' memory": {"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
                                "process_madvise": 440},
    "mounts": {"mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "setns": 308, "open_tree": 428,
               "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
               "mount_setattr": 442},
    "sockets to each other": {"socketpair": 53, "bind": 49, "listen": 50, "accept": 43, "accept4": 288},
    "pipes and event files": {"pipe": 22, "pipe2": 293, "eventfd": 284, "eventfd2": 290, "memfd_create": 319,
                              "memfd_secret": 447, "userfaultfd": 323, "inotify_init": 253, "inotify_init1": 294,
                              "fanotify_init": 300},
    "System V and POSIX IPC": {"shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64, "semop": 65,
                               "semctl": 66, "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70,
                               "msgctl": 71, "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242,
                               "mq_timedreceive": 243, "mq_notify": 244, "mq_getsetattr": 245},
    "kernel objects": {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "bpf": 321,
                       "perf_event_open": 298, "add_key": 248, "request_key": 249, "keyctl": 250,
                       "name_to_handle_at": 303, "open_by_handle_at": 304},
    "file locks": {"flock": 73},
}
# Ways to a new process: refused outright (clone is judged by its flags, below).
PROCESS_CALLS = {"fork": 57, "vfork": 58, "execve": 59, "execveat": 322, "unshare": 272}
MMAP, SOCKET, FCNTL, CLONE3 = 9, 41, 72, 435
CLONE, IOCTL = 56, 16
# The grader's own fork of a worker: new user, pid, network and IPC namespaces, SIGCHLD
# on exit, nothing else. Python's os and subprocess modules, and the C library's fork,
# vfork and posix_spawn, never ask for namespaces, so none of them can match it.
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC, SIGCHLD = 0x10000000, 0x20000000, 0x40000000, 0x08000000, 17
GRADER_CLONE = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | SIGCHLD
# What makes a pseudo-terminal usable: its number, unlocking it, opening its other end.
PTY_IOCTLS = {"TIOCGPTN": 0x80045430, "TIOCSPTLCK": 0x40045431, "TIOCGPTPEER": 0x5441}
MAP_SHARED = 0x01
AF_UNIX, SOCK_STREAM, SOCK_FLAGS = 1, 1, 0o4000 | 0o2000000  # SOCK_NONBLOCK | SOCK_CLOEXEC
LOCKING_FCNTL = (6, 7, 37, 38, 1024, 1026)  # F_SETLK(W), F_OFD_SETLK(W), F_SETLEASE, F_NOTIFY

# struct seccomp_data: nr (u32), arch (u32), instruction_pointer (u64), args[6] (u64)
NR, ARCH = 0, 4


def _arg(index: int) -> int:
    return 16 + 8 * index  # the low 32 bits, on a little-endian machine


LD_W_ABS, JEQ_K, JSET_K, AND_K, RET_K = 0x20, 0x15, 0x45, 0x54, 0x06


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> tuple:
    return (code, jt, jf, k & 0xFFFFFFFF)


def _preamble() -> list[tuple]:
    """Kill a call of another architecture; load the call's number; refuse x32 calls."""
    return [_ins(LD_W_ABS, ARCH), _ins(JEQ_K, AUDIT_ARCH_X86_64, 1, 0), _ins(RET_K, RET_KILL),
            _ins(LD_W_ABS, NR),
            # x32 calls (bit 30) reach the same kernel code under other numbers.
            _ins(JSET_K, 0x40000000, 0, 1), _ins(RET_K, _errno(EPERM))]


def _process_rules(key: int | None) -> list[tuple]:
    """With the call's number loaded: no new process, no new thread, no terminal. A clone
    passes only when (key given) it is the grader's fork carrying `key`. Every branch that
    loads an argument ends in a verdict, so what follows sees the number.

    No thread either: a thread's dispatch modes start empty, so work it did would escape
    the rules of the task being graded, and a thread torch starts for the student (an
    inter-op pool behind torch.jit.fork, say) is as much a way round them as one Python
    starts. These processes start none of their own: torch runs one intra-op thread, the
    caller's, and the grader's fork copies only the thread that made it."""
    deny, allow = _ins(RET_K, _errno(EPERM)), _ins(RET_K, RET_ALLOW)
    out = []
    for number in PROCESS_CALLS.values():
        out += [_ins(JEQ_K, number, 0, 1), deny]
    # clone3 hides its flags in memory the filter cannot read: make the C library fall
    # back to clone(), whose flags it can.
    out += [_ins(JEQ_K, CLONE3, 0, 1), _ins(RET_K, _errno(ENOSYS))]
    body = []
    if key is not None:
        # (The kernel reads only the low 32 bits of clone's flags.)
        body += [_ins(LD_W_ABS, _arg(0)), _ins(JEQ_K, GRADER_CLONE, 0, 5),
                 _ins(LD_W_ABS, _arg(4)), _ins(JEQ_K, key & 0xFFFFFFFF, 0, 3),
                 _ins(LD_W_ABS, _arg(4) + 4), _ins(JEQ_K, key >> 32, 0, 1), allow]
    body.append(deny)
    out += [_ins(JEQ_K, CLONE, 0, len(body)), *body]
    body = [_ins(LD_W_ABS, _arg(1))]
    for request in PTY_IOCTLS.values():
        body += [_ins(JEQ_K, request, 0, 1), deny]
    body.append(allow)
    out += [_ins(JEQ_K, IOCTL, 0, len(body)), *body]
    return out


def worker_program() -> list[tuple]:
    """What a worker adds before it serves a task: no process creation of any kind."""
    return [*_preamble(), *_process_rules(None), _ins(RET_K, RET_ALLOW)]


def program(key: int | None = None) -> list[tuple]:
    """The sealed import-once process's filter: nothing to share, and no process but the
    grader's fork carrying `key` (None: none at all)."""
    deny = _ins(RET_K, _errno(EPERM))
    out = _preamble()
    for numbers in DENIED.values():
        for number in numbers.values():
            out += [_ins(JEQ_K, number, 0, 1), deny]
    out += _process_rules(key)
    allow = _ins(RET_K, RET_ALLOW)
    # mmap: no MAP_SHARED mapping (it would be shared with every later fork).
    out += [_ins(JEQ_K, MMAP, 0, 4), _ins(LD_W_ABS, _arg(3)), _ins(JSET_K, MAP_SHARED, 0, 1), deny, allow]
    # socket: Unix stream sockets only, to connect to the grader.
    out += [_ins(JEQ_K, SOCKET, 0, 8), _ins(LD_W_ABS, _arg(0)), _ins(JEQ_K, AF_UNIX, 1, 0), deny,
            _ins(LD_W_ABS, _arg(1)), _ins(AND_K, ~SOCK_FLAGS), _ins(JEQ_K, SOCK_STREAM, 1, 0), deny, allow]
    # fcntl: no locks, leases or change notices (they are seen across processes).
    body = [_ins(LD_W_ABS, _arg(1))]
    for command in LOCKING_FCNTL:
        body += [_ins(JEQ_K, command, 0, 1), deny]
    out += [_ins(JEQ_K, FCNTL, 0, len(body) + 1), *body, allow]
    out += [_ins(RET_K, RET_ALLOW)]
    return out


def supported() -> bool:
    return platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")


def new_key() -> int:
    """A key for one process's grader fork: 63 random bits, never 0 (it travels in a
    signed long)."""
    import secrets

    return secrets.randbelow(2**63 - 1) + 1


def install(key: int | None = None, instructions: list[tuple] | None = None) -> None:
    """Seal the calling process and all it will start (program(key), or `instructions`).
    Raises OSError when the kernel refuses, so the caller can fall back to importing per
    task."""
    if not supported():
        raise OSError("this machine's architecture has no syscall table here")
    instructions = instructions if instructions is not None else program(key)
    raw = b"".join(struct.pack("<HBBI", *ins) for ins in instructions)
    buffer = ctypes.create_string_buffer(raw, len(raw))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Program(len(instructions), ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "no_new_privs refused")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "the seccomp filter was refused")


def install_worker() -> None:
    """A worker, before it serves a task: no process of its own (stacked on whatever
    filter it inherited). Raises OSError where the kernel refuses."""
    install(instructions=worker_program())


def grader_fork(key: int):
    """The grader's fork, for the process whose filter carries `key`: a function that
    makes a child in new user, pid, network and IPC namespaces (pid 1 there) and returns
    its pid, or 0 in the child. Bound now, before any student code runs.

    A raw clone, so no at-fork hook runs (Python's or the C library's): nothing the
    package registered runs in the grader's fork. The call keeps the interpreter's lock
    (PyDLL), so the child wakes up holding it, as the only thread it has."""
    import ctypes

    libc = ctypes.PyDLL(None, use_errno=True)
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    syscall.argtypes = [ctypes.c_long] * 6
    get_errno = ctypes.get_errno

    def fork() -> int:
        pid = syscall(CLONE, GRADER_CLONE, 0, 0, 0, key)
        if pid < 0:
            code = get_errno()
            raise OSError(code, f"the grader's fork was refused (errno {code})")
        return pid

    return fork


# ------------------------------------------------------- the same, said in words
# The filter makes such a call fail with EPERM, which says nothing a student can act on.
# In the processes that run student code an audit hook refuses the same calls first, with
# the kit's forbidden-call code, so the check can say what happened.

PROCESS_EVENTS = frozenset({"os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.spawn", "os.system",
                            "subprocess.Popen", "os.startfile", "os.openpty", "os.login_tty", "pty.spawn"})
TERMINALS = ("/dev/ptmx", "/dev/tty", "/dev/pts")
_REFUSING: list = []


def refuse_processes() -> None:
    """In a process about to run student code: starting a process, or opening a
    terminal, raises the kit's ForbiddenCall (a PermissionError too, as the filter's
    EPERM would be) with the code {"kind": "process", "name": ...}. The audit hook is
    permanent and kept by every fork; os.openpty and os.login_tty, which raise no audit
    event, are replaced by refusals. Added once per process."""
    import os
    import posix
    import sys

    from grader.run.inside.op_rules import ForbiddenCall  # imported by the zygote, before any worker

    if _REFUSING:
        return

    class ProcessRefused(ForbiddenCall, PermissionError):
        def __init__(self, name: str):
            PermissionError.__init__(self, EPERM, f"{name}: your code must compute in the process the grader gave it")
            self.code = {"kind": "process", "name": name}

    def refused(name):
        def refuse(*_args, **_kwargs):
            raise ProcessRefused(name)

        return refuse

    def audit(event, args):
        if event in PROCESS_EVENTS:
            raise ProcessRefused(event)
        if event == "open" and args and isinstance(args[0], (str, bytes)):
            path = os.path.normpath(os.fsdecode(args[0]))
            if path.startswith(TERMINALS):
                raise ProcessRefused("os.openpty")

    for module in (os, posix):
        for name in ("openpty", "login_tty", "forkpty"):
            if hasattr(module, name):
                setattr(module, name, refused(f"os.{name}"))
    sys.addaudithook(audit)
    _REFUSING.append(ProcessRefused)
