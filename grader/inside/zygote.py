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

import importlib.abc
import importlib.util
import json
import os
import resource
import signal
import socket
import sys
import traceback
import types


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    sys.path.insert(0, sys.argv[2])
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    # Everything imported here is imported once, not once per forked worker.
    import pkgutil

    import torch.nn.functional  # noqa: F401
    import torch.optim  # noqa: F401

    import grader.checks
    from grader.inside import op_rules, wire  # noqa: F401

    for info in pkgutil.iter_modules(grader.checks.__path__):
        importlib.import_module(f"grader.checks.{info.name}")
    _snapshot_grader_code()
    _harden_process()

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps workers
    children: set[int] = set()
    control.send(json.dumps({"ready": True, "pid": os.getpid()}).encode())
    while True:
        try:
            message, fds, _flags, _addr = socket.recv_fds(control, 4096, 2)
        except (ConnectionError, OSError):
            return
        if not message:
            return
        command = json.loads(message)
        children = _kill_strays(children)
        if command["op"] == "fork" and len(fds) != 2:
            for fd in fds:
                os.close(fd)
            return  # the grader sees the zygote gone and starts a new one
        if command["op"] == "fork":
            pid = os.fork()
            if pid == 0:
                control.close()
                status = 0
                try:
                    serve_worker(*fds)
                except BaseException:  # noqa: BLE001 - the worker must end here, whatever happened
                    status = 70
                os._exit(status)
            for fd in fds:
                os.close(fd)
            children.add(pid)
            control.send(json.dumps({"pid": pid}).encode())
        elif command["op"] == "kill":
            pid = int(command["pid"])
            if pid in children:
                children.discard(pid)
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


# ------------------------------------------------------------ keeping workers apart

_LIBC = None


def _prctl(option: int, value: int) -> None:
    global _LIBC
    import ctypes

    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    _LIBC.prctl(option, value, 0, 0, 0)


def _harden_process() -> None:
    """Not dumpable: no worker can open another's (or the zygote's) /proc/PID/mem.
    Child subreaper: a worker's double-forked leftovers become the zygote's children,
    so _kill_strays can end them before they touch the next worker."""
    PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36
    try:
        _prctl(PR_SET_DUMPABLE, 0)
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
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


# The probe code as imported before any student code ran, to notice it being replaced.
_GRADER_CODE: dict = {}


def _snapshot_grader_code() -> None:
    for name, module in list(sys.modules.items()):
        if name.startswith("grader."):
            for attr, value in vars(module).items():
                if isinstance(value, types.FunctionType):
                    _GRADER_CODE[(name, attr)] = (value, value.__code__, value.__defaults__)


def _original_send():
    """wire.send as imported before any student code ran, even if it was replaced since."""
    function, code, defaults = _GRADER_CODE.get(("grader.inside.wire", "send"), (None, None, None))
    if function is None:
        from grader.inside import wire

        return wire.send
    return types.FunctionType(code, function.__globals__, "send", defaults)


def _grader_code_changed() -> str | None:
    for (name, attr), (function, code, defaults) in _GRADER_CODE.items():
        module = sys.modules.get(name)
        current = getattr(module, attr, None) if module is not None else None
        if current is not function or function.__code__ is not code or function.__defaults__ is not defaults:
            return f"{name}.{attr}"
    return None


# ------------------------------------------------------------------------ worker


def _apply_limits(limits: dict) -> None:
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, name), (value, value))


def serve_worker(channel_fd: int, output_fd: int) -> None:
    from grader.inside import op_rules, wire

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.close(output_fd)
    sys.stdin = open(0, closefd=False)
    channel = socket.socket(fileno=channel_fd)
    # Bound before any student code runs: every answer leaves through the real send.
    send = _original_send()
    request = wire.recv(channel)
    _apply_limits(request.get("limits", {}))
    tripped: list[str] = []
    _set_tripwires(request.get("tripwires", []), tripped)
    rules = op_rules.Rules.from_request(request.get("op_rules"))
    op_rules.arm(rules)
    try:
        namespace = build_namespace(request)
    except BaseException as error:  # noqa: BLE001 - any failure is the submission's
        send(channel, {"setup_error": _describe(error)})
        return
    send(channel, {"ready": True, "certified": namespace.certified_tasks})
    while True:
        try:
            call = wire.recv(channel)
        except EOFError:
            return
        if call.get("op") == "exit":
            return
        tripped.clear()
        try:
            module = importlib.import_module(f"grader.checks.{call['module']}")
            probe = getattr(module, call["probe"])
            with op_rules.watching(rules, tripped):
                result = probe(namespace, **call["inputs"])
            reply = {"result": result}
        except BaseException as error:  # noqa: BLE001
            if isinstance(error, SystemExit):
                error = RuntimeError(f"the code called sys.exit({error.code!r})")
            reply = {"error": _describe(error)}
        reply["forbidden_calls"] = list(tripped)
        changed = _grader_code_changed()
        if changed:
            reply = {"tampered": changed, "error": {"type": "Tampering", "message": changed}}
        sys.stdout.flush()
        sys.stderr.flush()
        send(channel, reply)


def _describe(error: BaseException) -> dict:
    frames = traceback.extract_tb(error.__traceback__)
    # Only frames from the submission are worth showing a student.
    student = [f for f in frames if f.filename.startswith("submission/")]
    where = f"{student[-1].filename}:{student[-1].lineno}" if student else None
    line = student[-1].line if student else None
    if isinstance(error, SyntaxError):
        where, line = f"{error.filename}:{error.lineno}", (error.text or "").strip()
    return {
        "type": type(error).__name__,
        "message": str(error)[:1000],
        "where": where,
        "not_implemented": isinstance(error, NotImplementedError),
        "line": line,
    }


# ---------------------------------------------------------- tripwires (forbidden calls)


class ForbiddenCall(RuntimeError):
    pass


def _set_tripwires(dotted_names: list[str], tripped: list[str]) -> None:
    for dotted in dotted_names:
        owner_path, _, attr = dotted.rpartition(".")
        if not owner_path:
            continue  # a whole module cannot be tripwired; the static scan covers it
        try:
            owner = importlib.import_module(owner_path)
        except ImportError:
            parent_path, _, class_name = owner_path.rpartition(".")
            try:
                owner = getattr(importlib.import_module(parent_path), class_name)
            except (ImportError, AttributeError, ValueError):
                continue

        def tripwire(*args, _name=dotted, **kwargs):
            tripped.append(_name)
            raise ForbiddenCall(f"{_name} is not allowed in this task")

        setattr(owner, attr, tripwire)


# ------------------------------------------------------------- packages from source


class _SourcePackage(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves one package's modules from a dict of source texts."""

    def __init__(self, name: str, sources: dict[str, str], label: str):
        self.name, self.sources, self.label = name, sources, label

    def _key(self, fullname: str):
        if fullname == self.name:
            return "__init__.py", True
        if not fullname.startswith(self.name + "."):
            return None, False
        rel = fullname[len(self.name) + 1 :].replace(".", "/")
        if rel + ".py" in self.sources:
            return rel + ".py", False
        if rel + "/__init__.py" in self.sources:
            return rel + "/__init__.py", True
        return None, False

    def find_spec(self, fullname, path=None, target=None):
        key, is_package = self._key(fullname)
        if key is None and fullname != self.name:
            return None
        spec = importlib.util.spec_from_loader(fullname, self, origin=f"{self.label}/{key}", is_package=is_package)
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        key, _ = self._key(module.__name__)
        source = self.sources.get(key, "") if key else ""
        module.__file__ = f"{self.label}/{key}"
        exec(compile(source, module.__file__, "exec", dont_inherit=True), module.__dict__)


STUDENT_PACKAGE = "hero_transformer"
CERTIFIED_PACKAGE = "_certified_hero_transformer"


def _load(name: str, sources: dict[str, str], label: str, wanted, broken: dict) -> dict[str, types.ModuleType]:
    """Import the wanted modules of the package (and whatever they import); a module
    that fails is noted in `broken` so that only the tasks that need it fail."""
    sys.meta_path.insert(0, _SourcePackage(name, sources, label))
    importlib.import_module(name)
    for short in wanted:
        if f"{short}.py" in sources or f"{short}/__init__.py" in sources:
            try:
                importlib.import_module(f"{name}.{short}")
            except Exception as error:  # noqa: BLE001 - a student's module may fail to import
                broken[short] = error
    prefix = name + "."
    return {key[len(prefix):]: module for key, module in list(sys.modules.items())
            if key.startswith(prefix) and module is not None}


def build_namespace(request: dict) -> types.SimpleNamespace:
    """The student's package, with every task but the graded one replaced by its
    certified version, and the certified code calling back into the student's objects."""
    broken: dict[str, BaseException] = {}
    # Only the graded task's module and what it imports: faster, and less to go wrong.
    student = _load(STUDENT_PACKAGE, request["student"], "submission", request.get("needs", []), broken)
    certified = (_load(CERTIFIED_PACKAGE, request["certified"], "certified", sorted(student), {})
                 if request.get("certified") else {})
    graded = request["task"]
    for module in request.get("needs", []):
        if module in broken:
            raise broken[module]
        if module not in student:
            raise ModuleNotFoundError(f"the submission has no {module}.py")
    replaced_functions, installed = {}, []
    for region in request["regions"]:
        module, qualname = region["module"], region["qualname"]
        if region["task"] == graded or module not in certified or module not in student:
            continue
        *class_path, attr = qualname.split(".")
        source_owner = _walk(certified[module], class_path)
        target_owner = _walk(student[module], class_path)
        if source_owner is None or target_owner is None:
            continue
        original = getattr(target_owner, attr, None)
        setattr(target_owner, attr, _rebind(getattr(source_owner, attr), target_owner))
        installed.append(region["task"])
        if not class_path and original is not None:
            replaced_functions[id(original)] = getattr(source_owner, attr)
    # Aliases (`from .model import gelu`) must see the certified function too.
    for module in student.values():
        for key, value in list(vars(module).items()):
            if id(value) in replaced_functions:
                setattr(module, key, replaced_functions[id(value)])
    # Certified code looks names up in its own module: point them at the student's objects.
    owners = {(r["module"], r["qualname"].split(".")[0]) for r in request["regions"]}
    for module, top in owners:
        if module in certified and module in student and hasattr(student[module], top):
            setattr(certified[module], top, getattr(student[module], top))
    return types.SimpleNamespace(task=graded, certified_tasks=sorted(installed), **student)


def _rebind(function, owner):
    """A certified method moved onto the student's class: its zero-argument super()
    must now mean the student's class, so give it a fresh __class__ cell."""
    code = getattr(function, "__code__", None)
    if code is None or not isinstance(owner, type) or "__class__" not in code.co_freevars:
        return function
    closure = tuple(types.CellType(owner) if name == "__class__" else cell
                    for name, cell in zip(code.co_freevars, function.__closure__))
    moved = types.FunctionType(code, function.__globals__, function.__name__, function.__defaults__, closure)
    moved.__kwdefaults__ = function.__kwdefaults__
    moved.__qualname__, moved.__doc__ = function.__qualname__, function.__doc__
    return moved


def _walk(module, class_path):
    owner = module
    for part in class_path:
        owner = getattr(owner, part, None)
        if owner is None:
            return None
    return owner


if __name__ == "__main__":
    main()
