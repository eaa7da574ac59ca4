"""Run-time rules: the torch operators a task's probe may not run.

The static scan and the tripwires judge a submission by the names it writes, and a
name can be spelled so that neither sees it (`getattr(torch.ops, "aten").gelu`,
`torch.group_norm` for a layer norm). What torch dispatches cannot be respelled: while
the probe of a task with a rule runs, a TorchDispatchMode sees every aten operator
that reaches a kernel, and a TorchFunctionMode every torch function called from
Python (which also sees the composite ones, such as scaled_dot_product_attention,
that the dispatcher decomposes before the first layer sees them). Each operator is
matched against the task's rule, sent by the grader in the request.

The two modes watch each other: a call the function layer sees while the dispatch
layer is missing from its stack is someone switching the recorder off, and so are
the private torch entry points that pop or disable modes, which are wrapped before
any student code is imported (a reference the student keeps is the wrapper). Both
modes must still be in place, unmodified, when the probe returns.
"""

from __future__ import annotations

import _thread
import threading
from contextlib import contextmanager
from fnmatch import fnmatchcase

import torch
import torch.overrides
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode


class ForbiddenCall(RuntimeError):
    """A task's probe called what the task forbids: a tripwire's name, an operator of
    its rule, autograd where gradients are by hand, or the recorder switched off.
    `code` says which as data ({"kind": ..., ...}); the grader words it (feedback.py)."""

    def __init__(self, message: str, code: dict | None = None):
        super().__init__(message)
        self.code = code


# What to do instead, by operator family; the first matching pattern wins.
HINTS = (
    ("_foreach_*", "loop over the tensors with ordinary tensor operations"),
    ("_fused_*", "update each parameter with ordinary tensor operations"),
    ("*_backward*", "derive the gradient by hand"),
    ("*attention*", "compute the scores, the causal mask and the softmax yourself"),
    ("_masked_softmax*", "compute the scores, the causal mask and the softmax yourself"),
    ("*norm*", "compute the mean and the variance yourself"),
    ("*gelu*", "write x·Φ(x) with torch.erf yourself"),
    ("_addmm_activation", "apply your own gelu after the linear layer"),
    ("*embedding*", "pick the weight's rows by indexing"),
    ("*softmax*", "compute the log-sum-exp yourself"),
    ("*nll*", "pick the target's log-probability by indexing"),
    ("*cross_entropy*", "compute the log-sum-exp yourself"),
)
FORWARD_AD = frozenset({"_make_dual", "_unpack_dual", "make_dual", "unpack_dual"})


def hint(op: str) -> str:
    return next((text for pattern, text in HINTS if fnmatchcase(op, pattern)), "use ordinary tensor operations")


class Rules:
    """A task's rule, as the grader sent it: operator patterns (fnmatch, on the base
    name: 'native_layer_norm', '_foreach_*') and whether autograd may run at all."""

    __slots__ = ("ops", "no_autograd", "_verdicts")

    def __init__(self, ops=(), no_autograd=False):
        self.ops = tuple(str(op) for op in ops)
        self.no_autograd = bool(no_autograd)
        self._verdicts: dict[str, bool] = {}

    @classmethod
    def from_request(cls, value) -> "Rules":
        value = value if isinstance(value, dict) else {}
        return cls(value.get("ops") or (), value.get("no_autograd", False))

    def __bool__(self) -> bool:
        return bool(self.ops) or self.no_autograd

    def forbids(self, op: str) -> bool:
        verdict = self._verdicts.get(op)
        if verdict is None:
            verdict = self._verdicts[op] = any(fnmatchcase(op, pattern) for pattern in self.ops)
        return verdict


def _op_name(func) -> str:
    """The base operator name: aten::native_group_norm, aten.gelu.default, F.gelu -> gelu."""
    schema = getattr(func, "_schema", None)
    if schema is not None:
        return schema.name.rpartition("::")[2]
    return str(getattr(func, "__name__", "")).partition(".")[0]


def _tensors(values):
    for value in values:
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            yield from (v for v in value if isinstance(v, torch.Tensor))


class _Watch:
    """One probe's recorder: what it found goes to `tripped`, the worker's list."""

    def __init__(self, rules: Rules, tripped: list):
        self.rules, self.tripped = rules, tripped
        self.dispatch = _DispatchRecorder(self)
        self.function = _FunctionRecorder(self)
        self.in_handler = False  # our own checks touch tensors: not the student's calls

    def trip(self, code: dict):
        self.note(code)
        raise ForbiddenCall("a call this task forbids", code)

    def check_op(self, op: str, layer: str):
        if self.rules.forbids(op):
            self.trip({"kind": "op", "layer": layer, "name": op})
        if self.rules.no_autograd and op in FORWARD_AD:
            self.trip({"kind": "forward_autograd", "name": op})

    def check_grad(self, tensors, op: str, recording: bool):
        # A parameter may require grad (nn.Module makes them so); autograd runs once an
        # operator takes one with grad mode on, or returns a tensor with a grad_fn.
        for tensor in tensors:
            if (recording and tensor.requires_grad) or tensor.grad_fn is not None:
                self.trip({"kind": "autograd", "name": op})

    def dispatch_in_place(self) -> bool:
        # Anywhere on the stack: a mode pushed above it still hands every kernel down.
        return any(torch._C._get_dispatch_stack_at(i) is self.dispatch
                   for i in range(torch._C._len_torch_dispatch_stack()))

    def tampered(self, how: str, name: str = ""):
        self.note({"kind": "recorder_off", "how": how, "name": name})

    def note(self, code: dict):
        if code not in self.tripped:
            self.tripped.append(code)


class _DispatchRecorder(TorchDispatchMode):
    def __init__(self, watch: _Watch):
        super().__init__()
        self.watch = watch

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        watch = self.watch
        watch.in_handler = True
        try:
            op = _op_name(func)
            watch.check_op(op, "kernel")
            if watch.rules.no_autograd:
                recording = torch.is_grad_enabled()
                watch.check_grad(_tensors(args), f"aten.{op}", recording)
                if kwargs:
                    watch.check_grad(_tensors(kwargs.values()), f"aten.{op}", recording)
        finally:
            watch.in_handler = False
        return func(*args, **(kwargs or {}))


class _FunctionRecorder(TorchFunctionMode):
    def __init__(self, watch: _Watch):
        super().__init__()
        self.watch = watch

    def __torch_function__(self, func, types, args=(), kwargs=None):
        watch = self.watch
        if not watch.in_handler:
            if not watch.dispatch_in_place():
                watch.tampered("dispatch_popped")
                raise ForbiddenCall("the grader's operator recorder was switched off",
                                    {"kind": "recorder_off", "how": "dispatch_popped", "name": ""})
            watch.check_op(_op_name(func), "function")
        result = func(*args, **(kwargs or {}))
        if watch.rules.no_autograd and not watch.in_handler:
            watch.check_grad(_tensors((result,)), _op_name(func) or "a torch function", False)
        return result


# TorchDispatchMode wraps the handler in torch._disable_dynamo, whose first call
# imports torch._dynamo (about a second, in every forked worker). The sandbox never
# compiles: let the wrapper find its answer already made.
_raw = getattr(_DispatchRecorder.__torch_dispatch__, "__wrapped__", None)
if _raw is not None:
    setattr(_raw, "__dynamo_disable", _raw)

# The handlers as imported before any student code ran: replacing them on the class
# would blind the recorder.
_HANDLERS = {cls: dict(vars(cls)) for cls in (_DispatchRecorder, _FunctionRecorder, _Watch)}

# ------------------------------------------------------------------ guards

_ACTIVE: list[_Watch] = []  # the watch of the probe now running, if any

# Private entry points that pop or disable the recorder's modes, or run code on a
# thread (whose mode stacks start empty). Torch's own code imported them by name
# before the worker started, so replacing the module attribute only reaches callers
# that look them up now: the student's. (torch.overrides._pop_mode and its kin are
# left alone: torch's handle_torch_function calls them by module lookup.)
GUARDED = (
    (torch._C, "DisableTorchFunction", "recorder_off"), (torch._C, "_DisableTorchDispatch", "recorder_off"),
    (torch._C, "_pop_torch_function_stack", "recorder_off"), (torch._C, "_pop_torch_dispatch_stack", "recorder_off"),
    (torch._C, "_set_torch_function_mode", "recorder_off"), (_thread, "start_new_thread", "thread"),
    (threading, "_start_new_thread", "thread"),
)


def _guard(owner, attr, kind):
    original = getattr(owner, attr, None)
    if original is None or getattr(original, "_op_rules_guard", False):
        return
    code = ({"kind": "thread"} if kind == "thread" else
            {"kind": "recorder_off", "how": "entry", "name": f"{owner.__name__}.{attr}"})

    def guarded(*args, **kwargs):
        if _ACTIVE and not _ACTIVE[-1].in_handler:
            _ACTIVE[-1].note(code)
            raise ForbiddenCall("a call this task forbids", code)
        return original(*args, **kwargs)

    guarded._op_rules_guard = True
    setattr(owner, attr, guarded)


def guard_switches() -> None:
    """Wrap what could switch the recorder off; the wrappers act only while it records."""
    for owner, attr, kind in GUARDED:
        _guard(owner, attr, kind)


def arm(rules: Rules) -> None:
    """Before any student code runs, in a worker whose task has a rule."""
    if rules:
        guard_switches()


@contextmanager
def watching(rules: Rules, tripped: list):
    """Record the operators the body runs and trip on those `rules` forbid. Adds to
    `tripped` what it found, including any sign that the recorder was switched off."""
    if not rules:
        yield
        return
    watch = _Watch(rules, tripped)
    function_depth = torch._C._len_torch_function_stack()
    dispatch_depth = torch._C._len_torch_dispatch_stack()
    with watch.function, watch.dispatch:
        _ACTIVE.append(watch)
        try:
            yield
        finally:
            _ACTIVE.remove(watch)
            intact = (torch._C._len_torch_function_stack() == function_depth + 1
                      and torch._C._get_function_stack_at(function_depth) is watch.function
                      and torch._C._len_torch_dispatch_stack() == dispatch_depth + 1
                      and watch.dispatch_in_place())
            if not intact:
                watch.tampered("stack_changed")
                _restore(function_depth, dispatch_depth, watch)
            changed = [cls.__name__ for cls, handlers in _HANDLERS.items() if dict(vars(cls)) != handlers]
            if changed:
                watch.tampered("handler_modified", changed[0])


def _restore(function_depth: int, dispatch_depth: int, watch: _Watch) -> None:
    """Put the stacks back as the `with` statement expects to leave them."""
    pop_function = torch.overrides.__dict__.get("_pop_torch_function_stack") or torch._C._pop_torch_function_stack
    while torch._C._len_torch_function_stack() > function_depth:
        pop_function()
    from torch.utils import _python_dispatch

    while torch._C._len_torch_dispatch_stack() > dispatch_depth:
        _python_dispatch._pop_torch_dispatch_stack()
    torch._C._push_on_torch_function_stack(watch.function)
    torch._C._push_on_torch_dispatch_stack(watch.dispatch)
