"""Every message between the grader and a worker, as a typed dataclass.

The grader sends a TaskRequest (the task, the upload, the certified parts it may hold,
the task's rules), then ProbeCalls, then an Exit; the worker answers the request with
Ready or SetupFailed and each call with a ProbeReply. A failure of the code travels as
a Failure whose `cause` (an enum) says what the worker knows of it; a forbidden call as
a CaughtCall whose `kind` is an enum too.

`to_data` and `from_data` are the only encoder and decoder: a message becomes a dict
tagged with its class's MESSAGE name, whose values are plain data for the wire
(grader/run/inside/wire.py carries tensors; nothing is pickled). `from_data` checks a
message field by field against its class's annotations: a field the class does not
declare, a missing one or a value of another type is a MessageError at once, so a
misspelt key is caught where it is read, never silently ignored. Everything the worker
sends is data the submission could have written itself: the grader decodes it here,
and words it elsewhere (grader/run/feedback.py).
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar

from grader.run.inside.wire import WireError


class MessageError(WireError):
    """A message that is not one of the kinds expected, or not of its kind's shape."""


# ------------------------------------------------------------------ causes and kinds


class Cause(str, enum.Enum):
    """What the worker knows of an exception raised while the code ran, beyond its type."""

    RAISED = "raised"  # the code raised it; nothing more is known
    NOT_IMPLEMENTED = "not_implemented"  # NotImplementedError: a task left as the starter has it
    FORBIDDEN = "forbidden"  # a forbidden call refused at once (Failure.forbidden says which)
    SEALED_READ = "sealed_read"  # the seal refused a read of a certified part's code
    NOT_BUILT_ON = "not_built_on"  # the seal refused a certified part the task does not build on
    UNFIT = "unfit"  # a probe's own finding that the answer cannot be probed (Failure.unfit)
    EXIT = "exit"  # the code called sys.exit
    MISSING_MODULE = "missing_module"  # the upload lacks the task's module (Failure.missing_module)
    CANNOT_CROSS = "cannot_cross"  # a certified part running apart was given what cannot cross to it
    TOO_LARGE_TO_CROSS = "too_large_to_cross"  # ... values, or an answer, over the wire's limits


class ForbiddenKind(str, enum.Enum):
    """Which rule a forbidden call broke (grader/run/inside/op_rules.py, tasks.py, sealed.py)."""

    NAME = "name"  # a tripwire: a dotted name the task forbids
    OP = "op"  # a torch operator of the task's rule (`layer`: kernel or function)
    FORWARD_AUTOGRAD = "forward_autograd"
    AUTOGRAD = "autograd"
    RECORDER_OFF = "recorder_off"  # the operator recorder switched off (`how`)
    THREAD = "thread"
    LIBRARY = "library"  # torch's own Python code that does the task
    PROCESS = "process"  # a process started
    TAUGHT_LATER = "taught_later"  # the certified part of a task taught later, called from the task's code


class WorkerStatus(str, enum.Enum):
    """Why a worker gave no answer (grader/run/worker.py, WorkerFailed)."""

    TIMEOUT = "timeout"
    CRASHED = "crashed"
    GARBAGE = "garbage"
    BUSY = "busy"  # starved of a processor by the machine: the grader's failure, not the code's
    TAMPERED = "tampered"


# ------------------------------------------------------------------ parts of messages


@dataclass(frozen=True)
class CaughtCall:
    """One forbidden call, as the worker caught it; the grader words it."""

    kind: ForbiddenKind
    name: str = ""
    layer: str = ""  # OP: "kernel" or "function"
    how: str = ""  # RECORDER_OFF: how the recorder was switched off

    @classmethod
    def of(cls, code: dict) -> "CaughtCall":
        """From the worker's own note of it ({"kind": ..., ...})."""
        return cls(ForbiddenKind(code["kind"]), **{k: str(code.get(k, "")) for k in ("name", "layer", "how")})


@dataclass(frozen=True)
class Operation:
    """The torch operator that raised, as the recorder saw it: its name, each tensor's
    dtype and shape, and a dtype it was asked for."""

    op: str
    tensors: list[list[Any]] = field(default_factory=list)  # [[dtype, shape], ...]
    dtype: str | None = None


@dataclass(frozen=True)
class LowPrecision:
    """The first operator of the code's own that computed below float64."""

    op: str
    dtype: str
    shape: list[int]
    made: bool  # it made the tensor (torch.tensor without a dtype, .float()), not only read it


@dataclass(frozen=True)
class Failure:
    """An exception raised where the code ran, as text and codes only: its type, message
    (the code's own choice: staff see it), where in the upload it was raised, and what the
    worker knows of its cause."""

    type: str
    message: str
    cause: Cause = Cause.RAISED
    where: str | None = None  # "file.py:line" of the upload's last frame
    line: str | None = None  # that line's text
    standard: bool = False  # a class Python or torch defines, not one the code made
    trace: list[str] = field(default_factory=list)  # every frame, certified ones too, for staff
    forbidden: CaughtCall | None = None  # Cause.FORBIDDEN
    unfit: str | None = None  # Cause.UNFIT: the probe's key for what was unfit
    missing_module: str | None = None  # Cause.MISSING_MODULE
    unpacked: int | None = None  # a ValueError on unpacking a sequence into this many names
    operation: Operation | None = None  # the operator that raised, where the recorder saw one

    @property
    def not_implemented(self) -> bool:
        return self.cause is Cause.NOT_IMPLEMENTED


# ------------------------------------------------------------------ the grader's messages


@dataclass(frozen=True)
class Region:
    """Where a task's code sits in the package: its module and qualified name."""

    task: str
    module: str
    qualname: str


@dataclass(frozen=True)
class TaskRules:
    """A task's rules, armed around its probes: tripwires (dotted names), operator patterns
    (grader/run/inside/op_rules.py) and whether autograd may run."""

    tripwires: list[str] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    no_autograd: bool = False


@dataclass
class TaskRequest:
    """A worker's set-up: the graded task, the upload's sources (empty where the package was
    imported once, before the fork), the certified parts as compiled code and the tasks they
    stand in for, every task's region, the modules to import, the process's limits, and the
    rules: the task's own, or (`group`) each of a shared worker's tasks' by name. Not frozen:
    the worker drops the certified code from it once compiled, before any student code runs."""

    MESSAGE: ClassVar[str] = "task"
    task: str
    student: dict[str, str]
    certified: dict[str, str] | None
    certify: list[str]
    regions: list[Region]
    needs: list[str]
    limits: dict[str, int]
    rules: TaskRules | None = None
    group: dict[str, TaskRules] | None = None
    fresh: bool = False  # the package must be imported anew, never kept from an earlier task


@dataclass(frozen=True)
class ProbeCall:
    """One probe to run: a function of a check module with its inputs. `task`: the task it
    grades, in a shared worker; `name_failure`: run again to name the operator that raised;
    `name_precision`: run again noting the first operator that computed below float64."""

    MESSAGE: ClassVar[str] = "probe"
    module: str
    probe: str
    inputs: dict[str, Any]
    task: str | None = None
    name_failure: bool = False
    name_precision: bool = False


@dataclass(frozen=True)
class Exit:
    MESSAGE: ClassVar[str] = "exit"


# ------------------------------------------------------------------ the worker's messages


@dataclass(frozen=True)
class Ready:
    """The task is set up; `certified`: the tasks whose certified parts the worker installed."""

    MESSAGE: ClassVar[str] = "ready"
    certified: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SetupFailed:
    """The task could not be set up: the upload's import failed, or a module is missing."""

    MESSAGE: ClassVar[str] = "setup_failed"
    error: Failure


@dataclass(frozen=True)
class ProbeReply:
    """One probe's outcome: its answer as plain data, or the failure it raised; the forbidden
    calls caught meanwhile; the tasks of a group its code crossed into; the operator that
    computed below float64 where that was asked (None: none did); grader code found changed."""

    MESSAGE: ClassVar[str] = "reply"
    result: Any = None
    error: Failure | None = None
    forbidden_calls: list[CaughtCall] = field(default_factory=list)
    crossed: list[str] = field(default_factory=list)
    low_precision: LowPrecision | None = None
    tampered: str | None = None

    @property
    def answered(self) -> bool:
        return self.error is None


# ------------------------------------------------------------ the parts' process's messages


@dataclass
class PartsRequest:
    """The parts' process's set-up (grader/run/inside/parts.py): the certified modules with
    the regions of the parts that run apart, compiled; every task's region. Not frozen: the
    compiled code leaves it once loaded."""

    MESSAGE: ClassVar[str] = "parts"
    certified: dict[str, str]
    regions: list[Region]
    limits: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PartCall:
    """A certified part called across, from a worker's probe to the parts' process by way
    of the grader: its task, what it is given by name as packed values (parts.Packer),
    torch's random state and whether grad mode is on; and for a gradient (`wrt`: the
    packed tensors, by number, the gradient is of) the gradients of the part's new tensors,
    packed (None where one has none)."""

    MESSAGE: ClassVar[str] = "part"
    part: str
    arguments: Any
    rng: Any = None
    grad_enabled: bool = True
    name_failure: bool = False  # note the operator that fails, as the probe does
    epoch: int = 0  # tensors named as kept are kept for this epoch (parts.forget)
    # How chapter 00's Values cross: "graph" for a part that walks the graph below those given
    # (Task.walks_graph), "numbers" for one whose answer depends on their numbers only
    # (Task.numbers_only: its answer's graph is sent whole, to be remembered), else None.
    mode: "str | None" = None
    # Chapter 00's Values kept by the parts' process that the worker changed since it sent
    # them, where the part walks the graph: [keys, data, grads].
    values: Any = None
    wrt: list[int] = field(default_factory=list)
    grad_outputs: Any = None


@dataclass(frozen=True)
class PartReply:
    """A certified part's answer: its result packed (or the gradients asked for, None
    where an input has none), what it changed of what it was given, and torch's random
    state after it; or the failure it raised."""

    MESSAGE: ClassVar[str] = "part_reply"
    result: Any = None
    changes: Any = None
    rng: Any = None
    error: Failure | None = None


KINDS = {cls.MESSAGE: cls for cls in (TaskRequest, ProbeCall, Exit, Ready, SetupFailed, ProbeReply, PartsRequest,
                                      PartCall, PartReply)}


# ------------------------------------------------------------------ encoding and decoding


def to_data(message) -> dict:
    """A message as plain data, tagged with its kind."""
    return {"message": type(message).MESSAGE, **_fields(message)}


def _fields(instance) -> dict:
    hints = _hints(type(instance))
    # A field of Any (a probe's inputs, its answer) is the wire's to carry as it is.
    return {f.name: (value if hints[f.name] is Any else _value(value))
            for f in dataclasses.fields(instance) for value in (getattr(instance, f.name),)}


def _value(value):
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _fields(value)
    if isinstance(value, list):
        return [_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _value(item) for key, item in value.items()}
    return value


def from_data(data, *expected: type):
    """The message `data` encodes, which must be of one of the `expected` classes."""
    if not isinstance(data, dict) or not isinstance(data.get("message"), str):
        raise MessageError("a message is a dict that names its kind")
    cls = KINDS.get(data["message"])
    if cls is None or (expected and cls not in expected):
        wanted = " or ".join(c.MESSAGE for c in expected) or "a known kind"
        raise MessageError(f"a message of kind {data['message'][:40]!r} where {wanted} was expected")
    return _build(cls, {k: v for k, v in data.items() if k != "message"}, cls.MESSAGE)


def _build(cls, values: dict, where: str):
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise MessageError(f"{where}: no field {unknown[0][:40]!r} in a {cls.__name__}")
    hints = _hints(cls)
    built = {}
    for name, spec in fields.items():
        if name not in values:
            if spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
                raise MessageError(f"{where}: a {cls.__name__} needs its field {name!r}")
            continue
        built[name] = _typed(values[name], hints[name], f"{where}.{name}")
    return cls(**built)


_HINTS: dict = {}


def _hints(cls) -> dict:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _typed(value, hint, where: str):
    """`value` checked against the annotation `hint` (and built, for dataclasses and enums)."""
    if hint is Any:
        return value
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _typed(value, inner[0], where)
        raise MessageError(f"{where}: an annotation the decoder does not read")  # pragma: no cover - a kit bug
    if origin is list:
        if not isinstance(value, list):
            raise MessageError(f"{where}: a list was expected")
        return [_typed(item, args[0], f"{where}[]") for item in value]
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
            raise MessageError(f"{where}: a dict with string keys was expected")
        return {key: _typed(item, args[1], f"{where}.{key[:40]}") for key, item in value.items()}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            raise MessageError(f"{where}: {str(value)[:40]!r} is not a {hint.__name__}") from None
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise MessageError(f"{where}: a {hint.__name__} was expected")
        return _build(hint, value, where)
    if hint is bool:
        if type(value) is not bool:
            raise MessageError(f"{where}: true or false was expected")
        return value
    if hint is int:
        if type(value) is not int:
            raise MessageError(f"{where}: an integer was expected")
        return value
    if hint is str:
        if type(value) is not str:
            raise MessageError(f"{where}: text was expected")
        return value
    raise MessageError(f"{where}: an annotation the decoder does not read")  # pragma: no cover - a kit bug
