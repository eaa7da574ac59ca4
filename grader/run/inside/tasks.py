"""Serving a task's probes: the part of a worker that is the same wherever it runs.

A worker receives one task's request (the student's package as source text, the
certified parts as compiled code, the task's rules), builds the hybrid the task is
graded on, runs probes one at a time and answers with plain data. The Linux sandbox's
zygote (zygote.py) and the portable worker (portable_worker.py) both serve tasks
through serve_tasks; this module uses nothing one platform lacks.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import linecache
import sys
import types

from grader.run.inside import parts, sealed, wire
from grader.run.inside.messages import (CaughtCall, Cause, Exit, Failure, LowPrecision, MessageError, Operation,
                                        PartsRequest, ProbeCall, ProbeReply, Ready, SetupFailed, TaskRequest,
                                        from_data, to_data)
from grader.checks.course import Unfit
from grader.run.inside.op_rules import ForbiddenCall


class MissingModule(ModuleNotFoundError):
    """The task's module is not in the submission."""

    def __init__(self, module: str):
        super().__init__(f"the submission has no {module}.py")
        self.module = module


class ExitCalled(RuntimeError):
    """The code called sys.exit (or raised SystemExit) while a probe ran."""

    def __init__(self, code):
        super().__init__(f"the code called sys.exit({code!r})")


# The package imported once for every task a process serves: {"student": modules by
# name, "broken": the modules whose import failed, with their exceptions}.
IMPORTED_ONCE: dict = {}

GRADER_CODE: dict = {}
# Grader functions whose code or defaults were replaced in place, as "module.name".
CHANGED_IN_PLACE: list = []
_IN_PLACE = frozenset({"__code__", "__defaults__", "__kwdefaults__"})


def snapshot_grader_code() -> None:
    """Note every function of the grader's modules, before any student code exists. A
    function replaced in its module is found by identity after each probe; one whose code
    or defaults are replaced in place is reported by the audit event the assignment raises
    (reading each function's __code__ after every probe cost milliseconds: every read of it
    is an audited event, which the seal's hook answers)."""
    for name, module in list(sys.modules.items()):
        if name.startswith("grader."):
            for attr, value in vars(module).items():
                if isinstance(value, types.FunctionType):
                    GRADER_CODE[(name, attr)] = value
    watched = {id(function): (f"{name}.{attr}", function) for (name, attr), function in GRADER_CODE.items()}

    def notice_in_place(event, args, _watched=watched, _attributes=_IN_PLACE, _note=CHANGED_IN_PLACE.append):
        if event == "object.__setattr__" and len(args) > 1 and args[1] in _attributes:
            known = _watched.get(id(args[0]))
            if known is not None and known[1] is args[0]:
                _note(known[0])

    sys.addaudithook(notice_in_place)


def grader_code_changed() -> str | None:
    if CHANGED_IN_PLACE:
        return CHANGED_IN_PLACE[0]
    for (name, attr), function in GRADER_CODE.items():
        module = sys.modules.get(name)
        if module is None or module.__dict__.get(attr) is not function:
            return f"{name}.{attr}"
    return None




def every_operator_rule() -> list[str]:
    """The forbidden_ops patterns of every task whose module this process imported."""
    return sorted({pattern for name, module in list(sys.modules.items()) if name.startswith("grader.checks.")
                   for task in getattr(module, "TASKS", ()) for pattern in getattr(task, "forbidden_ops", ())})


# ------------------------------------------------------------------------ serving


def serve_tasks(channel, send, recv, apply_limits=None, many: bool = False, prepare=None,
                _decode=from_data, _encode=to_data) -> None:
    """Serve one task's request and probes on `channel`; with many=True, go on to the
    next task's request after each Exit (the portable worker, which holds no certified
    part), else return; `prepare(request)` runs before each task's set-up (the portable
    worker imports the package once there). `send` and `recv` were bound before any
    student code existed, and so were the messages' decoder and encoder (the defaults):
    replacing json, struct or the wire's or the messages' functions changes neither how
    answers leave nor how calls arrive."""
    from grader.run.inside import op_rules

    SERVES_MANY[0] = many
    # The line a certified part's call across takes (grader/run/inside/parts.py), and how a
    # call back is answered and its failure worded, bound now.
    parts.LINE[:] = [channel, send, recv, _decode, _encode]
    parts.HERE[0], parts.DESCRIBE[0] = parts.answer_back, describe
    while True:
        try:
            request = _decode(recv(channel), TaskRequest, Exit, *(() if many else (PartsRequest,)))
        except (EOFError, MessageError):
            return
        if isinstance(request, Exit):
            return
        if isinstance(request, PartsRequest):  # this process runs certified parts, and no student code
            if apply_limits is not None:
                apply_limits(request.limits)
            parts.serve(channel, send, recv, request, _decode, _encode, describe, load)
            return
        if apply_limits is not None:
            apply_limits(request.limits)
        tripped: list = []
        # A worker that serves a group of tasks arms each task's rules for that task's
        # probes only (a name one task forbids may be another's legitimate call): the
        # tripwires around each probe, the operator rules from the task's first probe to
        # its last (the group's tasks run one after another), undone in between.
        grouped = request.group is not None
        own = request.rules if not grouped else None
        undo = set_tripwires(own.tripwires if own else [], tripped)
        rules = op_rules.Rules.of(own)
        op_rules.arm(rules, reversible=many or grouped)
        try:
            if prepare is not None:
                try:
                    prepare(request)
                except Exception as error:  # noqa: BLE001 - the task cannot be set up: say so, as data
                    send(channel, _encode(SetupFailed(describe(error))))
                    continue
            _serve_one(channel, send, recv, request, rules, tripped, _decode, _encode)
        finally:
            undo()
            if many or grouped:
                op_rules.disarm()
        if not many:
            return


def _serve_one(channel, send, recv, request: TaskRequest, rules, tripped: list, decode, encode,
               _over_limits=wire.OverLimits, _too_large=wire.TOO_LARGE) -> None:
    from grader.run.inside import op_rules

    namespace = _set_up(channel, send, request, encode)
    if namespace is None:
        return
    group_rules: dict = {}  # in a group's worker: the rules of the task whose probes run now
    # The task whose probe runs now, which run_probe names to the seal for the guards of
    # a group's certified parts (grader/run/inside/sealed.py).
    probing = None
    while True:
        try:
            call = decode(recv(channel), ProbeCall, Exit)
        except (EOFError, MessageError):
            return
        if isinstance(call, Exit):
            return
        tripped.clear()
        TAUGHT_LATER.clear()
        op_rules.FAILED_OP.clear()
        parts.forget()
        probe_rules, disarm = rules, None
        try:
            grouped = request.group is not None
            probing = call.task if grouped else request.task
            if grouped:
                # The task this probe grades, among the group's: its rules for this probe only.
                entry = request.group[call.task]
                _turn_to(call.task, namespace)
                disarm = set_tripwires(entry.tripwires, tripped)
                probe_rules = _group_task_rules(op_rules, call.task, entry, group_rules)
            module = importlib.import_module(f"grader.checks.{call.module}")
            probe = getattr(module, call.probe)
            # One window: the answer is plain data (run_probe) and a failure is text before the
            # task's rules are lifted, so whatever code of the answer's own runs as it is read
            # (a tensor computed on reading, a property, an exception's __str__) runs under them.
            # run_probe is called from this frame: the seal takes the probed task only from there.
            result, error = None, None
            with op_rules.watching(probe_rules, tripped, name_failure=call.name_failure), \
                    op_rules.noting_precision(call.name_precision):
                try:
                    result = run_probe(probe, namespace, call.inputs, probing)
                except BaseException as raised:  # noqa: BLE001 - any failure is the submission's
                    error = _probe_failure(raised)
            # The first operator of the code's that computed below float64, where that was asked.
            low = LowPrecision(**op_rules.LOW_PRECISION[0]) if call.name_precision and op_rules.LOW_PRECISION \
                else None
        except BaseException as raised:  # noqa: BLE001
            result, error, low = None, _probe_failure(raised), None
        finally:
            probing = None
            if disarm is not None:
                disarm()
            PROBING[0] = None
        reply = _reply(result, error, low, tripped)
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            send(channel, encode(reply))
        except _over_limits:
            # An answer over what the grader reads is the code's own failure, said as one
            # (its budget spent encoding it): nothing was sent, and this is.
            send(channel, encode(_reply({"__too_large__": _too_large}, None, low, tripped)))


def _set_up(channel, send, request: TaskRequest, encode) -> types.SimpleNamespace | None:
    """The hybrid the task is graded on, after telling the grader it is ready; None, after
    telling the grader why, where it could not be built."""
    parts.REGIONS.clear()
    parts.REGIONS.update({region.task: (region.module, region.qualname) for region in request.regions})
    try:
        namespace = build_namespace(request)
    except BaseException as error:  # noqa: BLE001 - any failure is the submission's
        send(channel, encode(SetupFailed(describe(error))))
        return None
    finally:
        # The certified sources are compiled now: keep no text of them for student code to find.
        request.certified = None
        forget_certified_sources()
    send(channel, encode(Ready(certified=namespace.certified_tasks)))
    return namespace


def _turn_to(task: str, namespace: types.SimpleNamespace) -> None:
    """In a group's worker, before a probe of `task`: the namespace grades it, and the
    group's other tasks are watched for the probe reaching them."""
    namespace.task = task
    PROBING[0] = task
    CROSSED.clear()
    watch_all_but(task)


def _group_task_rules(op_rules, task: str, entry, group_rules: dict):
    """The operator rules of the group's task whose probe runs now. The group's tasks run
    one after another: a new task's rules are armed at its first probe, the last one's
    undone first. (`op_rules` comes from the caller: no import runs between probes.)"""
    probe_rules = group_rules.get(task)
    if probe_rules is None:
        op_rules.disarm()
        group_rules.clear()
        probe_rules = group_rules[task] = op_rules.Rules.of(entry)
        op_rules.arm(probe_rules, reversible=True)
    return probe_rules


def _probe_failure(raised: BaseException) -> Failure:
    """What a probe raised, as data: SystemExit said as the code's call of sys.exit."""
    return describe(ExitCalled(raised.code) if isinstance(raised, SystemExit) else raised)


def _reply(result, error, low, tripped: list) -> ProbeReply:
    """The probe's answer, with the forbidden calls it made; only the tampering, where the
    grader's own code was changed while it ran."""
    reply = ProbeReply(result=result, error=error, low_precision=low, crossed=sorted(CROSSED),
                       forbidden_calls=[CaughtCall.of(code) for code in [*TAUGHT_LATER, *tripped]])
    changed = grader_code_changed()
    if changed:
        reply = ProbeReply(tampered=changed, error=Failure(type="Tampering", message=changed))
    return reply


def run_probe(probe, namespace, inputs: dict, probing, _audit=sys.audit, _starts=sealed.PROBE_STARTS,
              _plain=wire.plain):
    """One probe's call, which first tells the seal which task it grades: the guards of a
    group's certified parts answer by it (grader/run/inside/sealed.py), and its answer as
    plain data (grader/run/inside/wire.py, `plain`), read while the task's rules hold. The
    defaults bind what it calls before any student code exists (replacing them is
    tampering the worker reports)."""
    _audit(_starts, probing)
    return _plain(probe(namespace, **inputs))


def describe(error: BaseException) -> Failure:
    # Read as text only: a traceback through certified code holds its frames
    # (grader/run/inside/sealed.py), and no frame of it may sit here while the
    # exception's own code (its __str__) runs below.
    frames = sealed.trace_of(error.__traceback__)
    # Only frames from the submission are worth showing a student.
    student = [(file, line) for file, line, _ in frames if file.startswith("submission/")]
    where = f"{student[-1][0]}:{student[-1][1]}" if student else None
    line = (linecache.getline(*student[-1]).strip() or None) if student else None
    if isinstance(error, SyntaxError):
        where, line = f"{error.filename}:{error.lineno}", (error.text or "").strip()
    from grader.run.inside import op_rules

    # What the grader decides on travels as codes (Cause), never as words it would parse back.
    forbidden = CaughtCall.of(error.code) if isinstance(error, ForbiddenCall) and isinstance(error.code, dict) \
        else None
    failed_op = op_rules.FAILED_OP[0] if op_rules.FAILED_OP and isinstance(
        error, (RuntimeError, TypeError, ValueError, IndexError)) else None
    return Failure(
        type=type(error).__name__,
        message=str(error)[:1000],
        cause=cause_of(error, forbidden),
        where=where,
        line=line,
        # Python's or torch's own class, not one the submission made (or named alike).
        standard=type(error) in STANDARD_EXCEPTIONS,
        # Every frame, certified ones too, for course staff.
        trace=[f"{file}:{number} in {name}" for file, number, name in frames[-12:]],
        forbidden=forbidden,
        unfit=error.key if isinstance(error, Unfit) else None,
        missing_module=error.module if isinstance(error, MissingModule) else None,
        # The submission's line unpacked a sequence into this many names.
        unpacked=sealed.unpacked_names(error.__traceback__) if type(error) is ValueError else None,
        operation=Operation(**failed_op) if failed_op is not None else None,
    )


def cause_of(error: BaseException, forbidden: "CaughtCall | None") -> Cause:
    """What the worker knows of an exception's cause (its first match, in this order)."""
    if isinstance(error, NotImplementedError):
        return Cause.NOT_IMPLEMENTED
    if forbidden is not None:
        return Cause.FORBIDDEN
    if isinstance(error, Unfit):
        return Cause.UNFIT
    if isinstance(error, sealed.Sealed):
        return Cause.NOT_BUILT_ON if isinstance(error, sealed.NotBuiltOn) else Cause.SEALED_READ
    if isinstance(error, ExitCalled):
        return Cause.EXIT
    if isinstance(error, MissingModule):
        return Cause.MISSING_MODULE
    if isinstance(error, parts.CannotCross):
        return Cause.TOO_LARGE_TO_CROSS if isinstance(error, parts.TooLargeToCross) else Cause.CANNOT_CROSS
    return Cause.RAISED


# The exception classes Python and torch name at their top level, taken when the first
# package is loaded, before any student code exists: what `describe` calls standard
# (the grader's feedback shows a student no other type).
STANDARD_EXCEPTIONS: frozenset = frozenset()


def standard_exceptions() -> frozenset:
    """The exception classes Python and torch name at their top level (ValueError,
    torch.OutOfMemoryError; no warning): the grader words an error by these names only."""
    import builtins

    import torch

    return frozenset(value for module in (builtins, torch) for value in vars(module).values()
                     if isinstance(value, type) and issubclass(value, BaseException) and not issubclass(value, Warning))


# ---------------------------------------------------------- tripwires (forbidden calls)


def set_tripwires(dotted_names: list[str], tripped: list):
    """Replace each named function with one that trips; returns what puts them back
    (a process that serves several tasks arms each task's own names only)."""
    restore = []
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
            code = {"kind": "name", "name": _name}
            tripped.append(code)
            raise ForbiddenCall(f"{_name} is not allowed in this task", code)

        missing = object()
        restore.append((owner, attr, owner.__dict__.get(attr, missing) if hasattr(owner, "__dict__") else missing,
                        missing))
        setattr(owner, attr, tripwire)

    def undo():
        for owner, attr, original, missing in reversed(restore):
            try:
                if original is missing:
                    delattr(owner, attr)
                else:
                    setattr(owner, attr, original)
            except (AttributeError, TypeError):
                pass

    return undo

def forget_certified_sources() -> None:
    for finder in sys.meta_path:
        if isinstance(finder, SourcePackage) and finder.name == CERTIFIED_PACKAGE:
            finder.sources = {}


# ------------------------------------------------------------- packages from source


class SourcePackage(importlib.abc.MetaPathFinder, importlib.abc.Loader):
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
        # Certified modules come compiled by the grader; the student's come as text.
        from grader.run.inside.wire import module_code

        if self.name == CERTIFIED_PACKAGE:  # its globals known to the seal before it runs
            sys.audit(sealed.CERTIFIED_MODULE, module.__dict__)
            module.__dict__[parts.CALL_ACROSS] = parts.call_part  # what a part that runs apart calls
        code = module_code(source, module.__file__)
        if self.name == STUDENT_PACKAGE:
            STUDENT_CODES.extend(sealed.nested_codes(code))
        exec(code, module.__dict__)


STUDENT_PACKAGE = "hero_transformer"
CERTIFIED_PACKAGE = "_certified_hero_transformer"
# Every code object the upload's modules define (their functions, methods, properties,
# lambdas, at any depth), as they were compiled: what counts as a task's own code
# wherever it runs, bar the functions of the other tasks (_name_own_code).
STUDENT_CODES: list = []


# Whether this process serves one task after another (the portable worker, which never
# holds a certified part and runs on students' own machines).
SERVES_MANY: list = [False]


def seal() -> None:
    """Before the first package is loaded: certified code becomes unreadable in this
    process, for good (grader/run/inside/sealed.py)."""
    global STANDARD_EXCEPTIONS
    if SERVES_MANY[0]:
        return
    if not STANDARD_EXCEPTIONS:
        STANDARD_EXCEPTIONS = standard_exceptions()
    sealed.install(_serve_one, run_probe, CROSSED, TAUGHT_LATER)


def load(name: str, sources: dict[str, str], label: str, wanted, broken: dict) -> dict[str, types.ModuleType]:
    """Import the wanted modules of the package (and whatever they import); a module
    that fails is noted in `broken` so that only the tasks that need it fail."""
    seal()
    sys.meta_path.insert(0, SourcePackage(name, sources, label))
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


def build_namespace(request: TaskRequest) -> types.SimpleNamespace:
    """The student's package, with the certified parts the task builds on installed
    (request.certify; every other task stays the student's own code), and the
    certified code calling back into the student's objects."""
    # The certified parts first, and their compiled text dropped before any student
    # code runs beside it.
    certified = _load_certified(request)
    student = _student_package(request)
    graded = request.task
    group = set(request.group or ())
    installed = _install_certified(request, certified, student, set(request.certify) - group - {graded})
    _name_own_code(request, student, group or {graded})
    if group:
        _watch_group_crossings(request, student, group)
    # Certified code looks names up in its own module: point them at the student's objects.
    owners = {(r.module, r.qualname.split(".")[0]) for r in request.regions}
    for module, top in owners:
        if module in certified and module in student and hasattr(student[module], top):
            setattr(certified[module], top, getattr(student[module], top))
    return types.SimpleNamespace(task=graded, certified_tasks=sorted(installed), **student)


def _load_certified(request: TaskRequest) -> dict[str, types.ModuleType]:
    """The certified modules that hold a part the task installs, by short name. Their
    compiled code leaves the request as this begins: the finder's dict is the
    request's, emptied in place once they are loaded."""
    compiled, request.certified = request.certified or {}, None
    if not compiled:
        return {}
    modules = (sorted(IMPORTED_ONCE["student"]) if IMPORTED_ONCE else
               sorted(k[:-3] for k in request.student if k.endswith(".py") and "/" not in k))
    # Only the modules that hold a part to install (and what they import): running the
    # others' bodies took most of a worker's start, for parts it never installs.
    holding = {region.module for region in request.regions if region.task in request.certify}
    failed: dict = {}
    try:
        certified = load(CERTIFIED_PACKAGE, compiled, "certified",
                         [m for m in modules if m != "__init__" and m in holding], failed)
    finally:
        compiled.clear()
        forget_certified_sources()
    if failed:  # a part missing would leave the student's own code in its place, unsaid
        raise next(iter(failed.values()))
    return certified


def _student_package(request: TaskRequest) -> dict[str, types.ModuleType]:
    """The student's modules by short name, imported once for every task or now; raises
    what a module the task needs raised on import, or MissingModule where it is absent."""
    if IMPORTED_ONCE:
        student, broken = IMPORTED_ONCE["student"], IMPORTED_ONCE["broken"]
    else:
        broken = {}
        # Only the graded task's module and what it imports: faster, and less to go wrong.
        student = load(STUDENT_PACKAGE, request.student, "submission", request.needs, broken)
    for module in request.needs:
        if module in broken:
            raise broken[module]
        if module not in student:
            raise MissingModule(module)
    return student


def _install_certified(request: TaskRequest, certified: dict, student: dict, installing: set) -> list[str]:
    """Each region of the `installing` tasks: the certified function or method set in the
    student's module or class in place of the student's, and where a module of the package
    imported the function under a name of its own, there too. The tasks installed."""
    replaced_functions, installed = {}, []
    for region in request.regions:
        module, qualname = region.module, region.qualname
        if region.task not in installing or module not in certified or module not in student:
            continue
        *class_path, attr = qualname.split(".")
        source_owner = _walk(certified[module], class_path)
        target_owner = _walk(student[module], class_path)
        if source_owner is None or target_owner is None:
            continue
        original = getattr(target_owner, attr, None)
        setattr(target_owner, attr, _rebind(getattr(source_owner, attr), source_owner, target_owner))
        installed.append(region.task)
        if not class_path and original is not None:
            replaced_functions[id(original)] = getattr(source_owner, attr)
    # Aliases (`from .model import gelu`) must see the certified function too.
    for module in student.values():
        for key, value in list(vars(module).items()):
            if id(value) in replaced_functions:
                setattr(module, key, replaced_functions[id(value)])
    return installed


def _name_own_code(request: TaskRequest, student: dict, tasks: set, _audit=sys.audit,
                   _event=sealed.OWN_CODE) -> None:
    """Tell the seal which code is each graded task's own: the student's function (through
    any wrapper) and every function defined inside it, and every other piece of code the
    upload defined but another task's function (a helper, a property, a dunder method, a
    hook or a finaliser: wherever it runs, it runs for this task). A part taught after the
    task may not be called from any of it."""
    by_task: dict[str, list] = {}
    for region in request.regions:
        if region.module not in student:
            continue
        *class_path, attr = region.qualname.split(".")
        owner = _walk(student[region.module], class_path)
        function = (owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr, None)) \
            if owner is not None else None
        codes, seen = by_task.setdefault(region.task, []), 0
        while function is not None and seen < 8:  # a decorated function: every layer is the student's
            code = getattr(function, "__code__", None)  # (None for a certified function: it is sealed)
            if isinstance(code, types.CodeType):
                codes += list(sealed.nested_codes(code))
            function, seen = getattr(function, "__wrapped__", None) or getattr(function, "__func__", None), seen + 1
    for task in tasks:
        others = {id(code) for name, codes in by_task.items() if name != task for code in codes}
        own = [*by_task.get(task, ()), *(code for code in STUDENT_CODES if id(code) not in others)]
        if own:
            _audit(_event, task, tuple(own))


# In a worker that serves a group: the task whose probe runs now, and the group's other
# tasks whose code that probe reached. The grader grouped the tasks because no task's
# checks run another's; a probe that does all the same is answered again in a worker of
# its task's own, so a group never changes a verdict.
PROBING: list = [None]
CROSSED: set = set()
# The codes of the parts a probe's task's own code called though the lessons teach them
# after it (grader/run/inside/sealed.py): forbidden calls, however the code handled them.
TAUGHT_LATER: list = []


def _watch_group_crossings(request: TaskRequest, student: dict, group: set) -> None:
    import functools

    for region in request.regions:
        task, module = region.task, region.module
        if task not in group or module not in student:
            continue
        *class_path, attr = region.qualname.split(".")
        owner = _walk(student[module], class_path)
        function = owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr, None)
        if owner is None or not isinstance(function, types.FunctionType):
            continue

        def watched(*args, _function=function, _task=task, **kwargs):
            if PROBING[0] is not None and PROBING[0] != _task:
                CROSSED.add(_task)
            return _function(*args, **kwargs)

        functools.update_wrapper(watched, function)
        # Where the function is found: its owner, and (a function of a module) every
        # module of the package that imported it under a name of its own.
        places = [(owner, attr)] + ([] if class_path else [
            (other, key) for other in student.values() for key, value in list(vars(other).items())
            if value is function and (other, key) != (owner, attr)])
        WATCHED.setdefault(task, []).extend((place, function, watched) for place in places)
    watch_all_but(None)


# In a worker that serves a group: each task's functions as the student wrote them and
# wrapped to notice another task's probe reaching them. A task's own probes see its
# functions unwrapped (a probe that reads the student's code reads the student's code).
WATCHED: dict = {}


def watch_all_but(task) -> None:
    for name, entries in WATCHED.items():
        for (owner, attr), function, watched in entries:
            setattr(owner, attr, function if name == task else watched)


def _rebind(function, certified_class, owner):
    """A certified method moved onto the student's class: its zero-argument super()
    must now mean the student's class. Its `__class__` cell (the only cell holding the
    certified class) is pointed there in place: the method's code is never read."""
    if not isinstance(owner, type) or not isinstance(function, types.FunctionType):
        return function
    for cell in function.__closure__ or ():
        try:
            held = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if held is certified_class:
            cell.cell_contents = owner
    return function


def _walk(module, class_path):
    owner = module
    for part in class_path:
        owner = getattr(owner, part, None)
        if owner is None:
            return None
    return owner


