"""A seccomp filter that leaves a process no way to make something it could share.

A submission's package is imported once, in a process every task worker is then forked
from. Code that ran there could have set up a channel for those workers to pass answers
(or certified code) along: a pipe or socket pair they all inherit, shared memory, a
message queue, a file lock, a signal, a mount. This filter is installed before that
code runs, and the kernel keeps it on that process and every process it starts: the
calls that make such things fail with EPERM. What stays allowed is what computing
needs, plus connect() of a plain Unix stream socket, the one way a worker reaches the
grader (nothing in the sandbox may bind or listen, so the grader is all it can reach).

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
MMAP, SOCKET, FCNTL, CLONE3 = 9, 41, 72, 435
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


def program() -> list[tuple]:
    deny = _ins(RET_K, _errno(EPERM))
    out = [_ins(LD_W_ABS, ARCH), _ins(JEQ_K, AUDIT_ARCH_X86_64, 1, 0), _ins(RET_K, RET_KILL),
           _ins(LD_W_ABS, NR),
           # x32 calls (bit 30) reach the same kernel code under other numbers.
           _ins(JSET_K, 0x40000000, 0, 1), deny]
    for numbers in DENIED.values():
        for number in numbers.values():
            out += [_ins(JEQ_K, number, 0, 1), deny]
    # clone3 hides its flags in memory the filter cannot read: make the C library fall
    # back to clone(), whose flags it can.
    out += [_ins(JEQ_K, CLONE3, 0, 1), _ins(RET_K, _errno(ENOSYS))]
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


def install() -> None:
    """Seal the calling (single-threaded) process and all it will start. Raises OSError
    when the kernel refuses, so the caller can fall back to importing per task."""
    if not supported():
        raise OSError("this machine's architecture has no syscall table here")
    instructions = program()
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
