"""Run-time rules: the torch operators a task's probe may not run.

The static scan and the tripwires judge a submission by the names it writes, and a
name can be spelled so that neither sees it (`getattr(torch.ops, "aten").gelu`,
`torch.group_norm` for a layer norm). What torch runs cannot be respelled. Three
layers judge it; the first two depend on nothing the submission can switch off.

1. The dispatcher's own table. Before the first probe of a task with a rule, every
   kernel of every operator the rule forbids (any namespace; every dispatch key whose
   kernel computes: CPU, the composite keys, nested, quantized, sparse, batched, ...)
   is replaced by one that refuses. However the call arrives (torch.ops, a key set
   that skips the Python modes, `redispatch`, functorch, a thread, a mode stack emptied
   by any of torch's helpers), it ends in that table, so the forbidden kernel does not
   run at all: whatever is recorded, nothing was computed with it. The registrations
   are held where no Python object refers to them. What runs ATen's code past the
   table is disabled before any student code is imported: torch.library.get_kernel's
   handles, and TorchScript's engines (its fusers, static runtime, NNC lowering, its
   own operators named like a forbidden one, such as prim::MKLDNNLayerNorm).
2. Torch's own Python code that does the task: the functions torch registers or names
   as the Python implementation of a forbidden operator (torch._refs, torch._decomp)
   and those a rule names by module (the optimizers, gradient clipping). Their code is
   replaced in place by code that refuses, so every reference to them refuses, however
   it was kept or spelled; a permanent audit hook refuses new functions made from
   their code and their modules run again while the rule holds, and reports copies
   made before it (when the package was imported).
3. While the probe runs, a TorchDispatchMode sees every aten operator that reaches a
   kernel and a TorchFunctionMode every torch function called from Python (which also
   sees the composite ones, such as scaled_dot_product_attention, that the dispatcher
   decomposes before the first layer sees them). These modes name the call as the
   student wrote it, and check autograd where a task forbids it. The two modes watch
   each other: a call the function layer sees while the dispatch layer is missing
   from its stack is someone switching the recorder off, and so are the private torch
   entry points that pop or disable modes, which are wrapped before any student code
   is imported. Both modes must still be in place, unmodified, when the probe returns.
   A submission can still pop them (torch has many ways): what they alone judge is
   autograd in the tasks that forbid it, and where torch's library runs.

Where torch's library runs. A deny-list of torch's names is always a release behind: a
distribution's log_prob is a cross-entropy made of logsumexp and gather, kernels any
hand-written loss may run. So a task whose rule names torch's library (LIBRARY, "torch.*")
is judged by allow-list instead: every operator the dispatch layer sees is traced back
through the Python frames that issued it, up to the code that called torch (the
submission, the reference's parts, the grader's probe). Each of torch's own frames on that
way must be fair: in FAIR_EVERYWHERE (the tensor and its methods, nn.Module, Linear,
Embedding and Dropout, autograd, the machinery every call runs through) or among the
task's own building blocks ("!torch.distributions.normal.Normal.cdf"). Otherwise the
outermost unfair frame, what the submission called, is refused and named, whatever its
name, however it was reached. TorchScript runs code with no Python frame to trace, so
calling it is refused under such a rule.
"""

from __future__ import annotations

import _thread
import ctypes
import functools
import gc
import importlib
import os
import re
import sys
import sysconfig
import threading
import types
import warnings
from contextlib import contextmanager
from fnmatch import fnmatchcase, translate

import torch
import torch.overrides
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from grader.checks._api import LIBRARY  # the rule naming torch's whole library, judged by where it runs


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



# torch's Python code that does no task's work, fair wherever the library is judged: the
# tensor and its methods and operators, printing, torch's tensor functions written in Python
# (einsum, split, norm); how an operator, a mode or a decorated function is called, and the
# body of a module of torch's imported while a probe runs; autograd (backward, grad, grad
# modes, custom Functions); nn.Module, its containers, parameters, initialisers and hooks;
# the layers every chapter builds on (Linear, Embedding, Dropout), and the functional forms
# and modules that run one operator each (softmax, relu, ...).
FAIR_EVERYWHERE = (
    "torch._tensor.*", "torch._tensor_str.*", "torch.functional.*",
    "torch._ops.*", "torch.overrides.*", "torch.utils._python_dispatch.*", "torch._compile.*",
    "torch._dynamo.eval_frame.DisableContext.__call__.<locals>._fn", "torch.utils._contextlib.*",
    "torch._jit_internal.*", "torch.random.*", "torch*.<module>",
    "torch.autograd.backward", "torch.autograd.grad", "torch.autograd._*", "torch.autograd.graph.*",
    "torch.autograd.grad_mode.*", "torch.autograd.function.*",
    "torch.nn.modules.module.*", "torch.nn.modules.container.*", "torch.nn.parameter.*", "torch.nn.init.*",
    "torch.utils.hooks.*",
    "torch.nn.modules.linear.Linear.*", "torch.nn.modules.linear.Identity.*", "torch.nn.modules.sparse.Embedding.*",
    "torch.nn.modules.dropout.Dropout.*", "torch.nn.modules.dropout._DropoutNd.*",
    "torch.nn.functional.dropout", "torch.nn.functional.embedding", "torch.nn.functional.softmax",
    "torch.nn.functional.log_softmax", "torch.nn.functional.relu", "torch.nn.functional.sigmoid",
    "torch.nn.functional.tanh", "torch.nn.modules.activation.Softmax.*", "torch.nn.modules.activation.LogSoftmax.*",
    "torch.nn.modules.activation.ReLU.*", "torch.nn.modules.activation.Sigmoid.*", "torch.nn.modules.activation.Tanh.*",
)


class Rules:
    """A task's rule, as the grader sent it: operator patterns (fnmatch, on the base
    name: 'native_layer_norm', '_foreach_*'), patterns of torch's own Python code that
    does the task, refused in place (those with a dot, on the module and qualified name:
    'torch.optim.adam.*'), LIBRARY to judge torch's library by where it runs, the task's
    building blocks then ('!' and a pattern of torch's code: '!torch.special.*'), and
    whether autograd may run at all."""

    __slots__ = ("ops", "library", "no_autograd", "_verdicts", "_derived", "_match_op", "_match_library",
                 "implementations", "by_where", "building_blocks", "_match_fair", "_fair")

    def __init__(self, ops=(), no_autograd=False):
        patterns = tuple(str(op) for op in ops)
        self.building_blocks = tuple(p[1:] for p in patterns if p.startswith("!"))
        patterns = tuple(p for p in patterns if not p.startswith("!"))
        self.by_where = LIBRARY in patterns
        self.ops = tuple(p for p in patterns if "." not in p)
        self.library = tuple(p for p in patterns if "." in p and p != LIBRARY)
        self.no_autograd = bool(no_autograd)
        self._verdicts: dict[str, bool] = {}
        self._derived: frozenset[str] | None = None
        self.implementations: list | None = None  # see _implementations_of
        self._match_op = _matcher(self.ops)
        self._match_library = _matcher(self.library)
        self._match_fair = _matcher(FAIR_EVERYWHERE + self.building_blocks)
        self._fair: dict[str, bool] = {}

    @classmethod
    def of(cls, rules) -> "Rules":
        """A task's rules as its request carries them (messages.TaskRules; None: no rule)."""
        return cls(tuple(rules.ops), rules.no_autograd) if rules is not None else cls((), False)

    def __bool__(self) -> bool:
        return bool(self.ops) or bool(self.library) or self.no_autograd or self.by_where

    def forbids(self, op: str) -> bool:
        verdict = self._verdicts.get(op)
        if verdict is None:
            verdict = self._verdicts[op] = self._match_op(op)
        return verdict

    def derived(self) -> frozenset[str]:
        """The names of torch's Python implementations of the forbidden operators."""
        if self._derived is None:
            self._derived = frozenset(name for _, name in _implementations_of(self))
        return self._derived

    def forbids_library(self, name: str) -> bool:
        """Whether `name` (module.qualname of torch's code) is torch doing the task."""
        if not name.startswith("torch."):
            return False
        # Where torch's library is judged by where it runs, what ran is named by the call the
        # student made (torch.nn.functional.normalize): a module of torch's own and a
        # qualified name in it, nothing else.
        return self.refuses_in_place(name) or (self.by_where and library_module(name) is not None)

    def refuses_in_place(self, name: str) -> bool:
        """Whether the code named `name` is replaced by code that refuses (layer 2)."""
        return self._match_library(name) or name in self.derived()

    def fair(self, name: str) -> bool:
        """Whether torch's code named `name` may issue operators in this task's probes."""
        verdict = self._fair.get(name)
        if verdict is None:
            verdict = self._fair[name] = bool(self._match_fair(name))
        return verdict


@functools.lru_cache(maxsize=256)
def _matcher(patterns: tuple):
    """One compiled test for a tuple of fnmatch patterns (case-sensitive), compiled once
    per tuple: every probe makes its rules anew from the same few tuples."""
    if not patterns:
        return lambda name: False
    return re.compile("|".join(f"(?:{translate(p)})" for p in patterns)).match


def _op_name(func) -> str:
    """The base operator name: aten::native_group_norm, aten.gelu.default, F.gelu -> gelu."""
    schema = getattr(func, "_schema", None)
    if schema is not None:
        return schema.name.rpartition("::")[2]
    return str(getattr(func, "__name__", "")).partition(".")[0]


# The last operator that raised in this probe, as the kit saw it (its name, the shapes and
# dtypes of its tensors, a dtype it was asked for): what a student can act on when the
# message, which the code could have chosen, is kept for course staff.
FAILED_OP: list = []
# Whether the probe running now notes the operator that fails (watching): a certified part
# that runs apart is then asked to note its own (grader/run/inside/parts.py).
NAMING_FAILURES: list = [False]


def failed_operation(op: str, args, kwargs) -> dict:
    tensors = list(_tensors(args))[:4]
    found = {"op": op, "tensors": [[str(t.dtype).removeprefix("torch."), list(t.shape)[:6]] for t in tensors]}
    asked = (kwargs or {}).get("dtype")
    if isinstance(asked, torch.dtype):
        found["dtype"] = str(asked).removeprefix("torch.")
    return found


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
            if watch.rules.by_where:
                library = _library_at_work(watch.rules, sys._getframe(1))
                if library:
                    watch.trip({"kind": "library", "name": library})
            if watch.rules.no_autograd:
                recording = torch.is_grad_enabled()
                watch.check_grad(_tensors(args), f"aten.{op}", recording)
                if kwargs:
                    watch.check_grad(_tensors(kwargs.values()), f"aten.{op}", recording)
        finally:
            watch.in_handler = False
        try:
            return func(*args, **(kwargs or {}))
        except Exception:
            FAILED_OP[:] = [failed_operation(op, args, kwargs)]
            raise


class FailureRecorder(TorchDispatchMode):
    """In a probe of a task with no operator rule: the operator that raises, noted."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        try:
            return func(*args, **(kwargs or {}))
        except Exception:
            FAILED_OP[:] = [failed_operation(_op_name(func), args, kwargs)]
            raise


# The dtypes below float64's precision an operator may compute in.
_LOW_PRECISION = (torch.float32, torch.float16, torch.bfloat16)
# Where the submission's code lives in a worker (grader/run/inside/tasks.py, SourcePackage).
SUBMISSION_FILES = "submission/"
# The first operator of the submission's own that computed below float64 in this probe,
# where the grader asked (LowPrecision): what the precision checks name.
LOW_PRECISION: list = []


class LowPrecision(TorchDispatchMode):
    """Notes the first operator that the submission's code issued and that took or made a
    float32 (or half) tensor: the precision a check speaks of is what ran, never a guess
    from the size of an error. The Python frame that issued the operator is found by
    climbing through torch's own frames: a probe's or a certified part's operators are not
    the code's. Run only on a probe the grader runs again for this (a Python call per
    operator)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if not LOW_PRECISION:
            taken = [t for t in _tensors((*args, *(kwargs or {}).values())) if t.dtype in _LOW_PRECISION]
            made = [t for t in _tensors(result if isinstance(result, (list, tuple)) else (result,))
                    if t.dtype in _LOW_PRECISION]
            if (taken or made) and _issued_by_submission(sys._getframe(1)):
                tensor = (taken or made)[0]
                LOW_PRECISION.append({"op": f"aten.{_op_name(func)}", "dtype": str(tensor.dtype).removeprefix("torch."),
                                      "shape": list(tensor.shape)[:6], "made": not taken})
        return result


_THIS_FILE = __file__  # the recorders' own frames (the function layer's) stand between,
# as does any mode's handler (a probe's own mode that watches the code's operators)


def _issued_by_submission(frame) -> bool:
    for _ in range(64):
        if frame is None:
            return False
        filename = frame.f_code.co_filename
        if filename.startswith(SUBMISSION_FILES):
            return True
        if not (filename.startswith(_TORCH_PREFIX) or filename.startswith("<") or filename == _THIS_FILE
                or frame.f_code.co_name in _HANDLER_NAMES):  # a mode's handler passes the call on
            return False  # the grader's probe, a certified part, the standard library
        frame = frame.f_back
    return False


@contextmanager
def noting_precision(wanted: bool):
    """Around a probe: LowPrecision notes, where `wanted`, into LOW_PRECISION (emptied first)."""
    LOW_PRECISION.clear()
    if not wanted:
        yield
        return
    with LowPrecision():
        yield


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


# ------------------------------------------------- where torch's library runs

_GRADER_PREFIX = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
# Code that is neither torch's nor a caller's: the standard library and other installed
# packages (a torch helper may run through functools or contextlib), code generated at run
# time (torch.fx's graphs, dataclasses' methods: their names start with "<").
_INSTALLED = tuple(sorted({os.path.join(path, "") for key in ("stdlib", "platstdlib", "purelib", "platlib")
                           if (path := sysconfig.get_paths().get(key))}))
_HANDLER_NAMES = frozenset({"__torch_function__", "__torch_dispatch__"})
# id(code) -> (code, torch's name for it, its module), for torch's own code only: holding
# the code keeps its id. Of any other frame nothing but its file's name is kept (the
# reference's parts run in the worker too, and student code can read this module).
_FRAME_KINDS: dict = {}
_CALLER_FILES: dict = {}  # file name -> whether its code is a caller's (_calls_torch)


def _calls_torch(filename: str) -> bool:
    """Whether code of `filename` (not torch's) is the code that called torch (the
    submission, the reference's parts, the grader's probe), where the walk below ends,
    rather than code it looks through."""
    if filename.startswith(_GRADER_PREFIX):
        return True
    return not (filename.startswith("<") or filename.startswith(_INSTALLED))


def _library_at_work(rules: Rules, frame) -> str:
    """The module of torch's code that issued the operator now dispatched from `frame`
    without being fair in this task: of the outermost such frame before the caller (what
    the caller called), or ''. Every one of torch's frames on the way is judged, so a fair
    helper (broadcast_tensors) run by an unfair one (a distribution's log_prob) is unfair.
    Frames are told by their code's file, not their globals: torch's code run with the
    globals of another module is still torch's."""
    named = ""
    known_torch, callers = _FRAME_KINDS, _CALLER_FILES
    while frame is not None:
        code = frame.f_code
        known = known_torch.get(id(code))
        if known is None or known[0] is not code:
            filename = code.co_filename
            module = module_name(filename) if filename.startswith(_TORCH_PREFIX) else ""
            if not module:
                # A mode's or a subclass's handler passes a call on: who made the call decides.
                if code.co_name not in _HANDLER_NAMES:
                    caller = callers.get(filename)
                    if caller is None:
                        caller = callers[filename] = _calls_torch(filename)
                    if caller:
                        break
                frame = frame.f_back
                continue
            known = known_torch[id(code)] = (code, f"{module}.{code.co_qualname}", module)
        if not rules.fair(known[1]):
            named = known[1]
        frame = frame.f_back
    return named


# TorchDispatchMode wraps the handler in torch._disable_dynamo, whose first call
# imports torch._dynamo (about a second, in every forked worker). The sandbox never
# compiles: let the wrapper find its answer already made.
for _recorder in (_DispatchRecorder, FailureRecorder, LowPrecision):
    _raw = getattr(_recorder.__torch_dispatch__, "__wrapped__", None)
    if _raw is not None:
        setattr(_raw, "__dynamo_disable", _raw)

# The handlers, and the rule they consult, as imported before any student code ran:
# replacing them on the class would blind the recorder.
_HANDLERS = {cls: dict(vars(cls)) for cls in (_DispatchRecorder, FailureRecorder, LowPrecision, _FunctionRecorder, _Watch,
                                              Rules)}

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

    if kind == "thread":
        # No thread at all once student code may run (its import, a probe of any task,
        # between probes): a thread's mode stacks start empty, so what it ran would go
        # unrecorded, now or under a later task's rules. The grader's own code here
        # starts none.
        def refused(*args, **kwargs):
            if _ACTIVE and _ACTIVE[-1].in_handler:
                return original(*args, **kwargs)
            _refuse(dict(code))

        refused._op_rules_guard = True
        setattr(owner, attr, refused)
        return

    def guarded(*args, **kwargs):
        if _ACTIVE and not _ACTIVE[-1].in_handler:
            _ACTIVE[-1].note(code)
            raise ForbiddenCall("a call this task forbids", code)
        return original(*args, **kwargs)

    guarded._op_rules_guard = True
    setattr(owner, attr, guarded)


# TorchScript's interpreter runs compiled code (torch's own, scripted or traced at import,
# included) with no Python frame of it on the stack: where torch's library runs cannot be
# told there, so where a rule judges that, a call into it is refused. (Its run also upsets
# the modes, which report the recorder switched off: this says what happened instead.)
SCRIPTED = ((getattr(torch._C, "ScriptFunction", None), "__call__"),
            (getattr(torch._C, "ScriptMethod", None), "__call__"), (torch._C, "_jit_interpret_graph"),
            (getattr(torch._C, "LiteScriptModule", None), "forward"),
            (getattr(torch._C, "LiteScriptModule", None), "run_method"))
_SCRIPTED_CODE = {"kind": "library", "name": "torch.jit"}


def _guard_scripted(owner, attr):
    original = getattr(owner, attr, None) if owner is not None else None
    if original is None or getattr(original, "_op_rules_guard", False):
        return

    def guarded(*args, **kwargs):
        if _ACTIVE and _ACTIVE[-1].rules.by_where and not _ACTIVE[-1].in_handler:
            _refuse(dict(_SCRIPTED_CODE))
        return original(*args, **kwargs)

    guarded._op_rules_guard = True
    setattr(owner, attr, guarded)


def guard_switches() -> None:
    """Wrap what could switch the recorder off (the wrappers act only while it records),
    disable what could call a kernel past the dispatcher's table, and add the audit hook
    that watches torch's code being copied; before any student code is imported."""
    for owner, attr, kind in GUARDED:
        _guard(owner, attr, kind)
    for owner, attr in SCRIPTED:
        _guard_scripted(owner, attr)
    _disable_kernel_handles()
    _disable_engines()
    if not _AUDITING:
        sys.addaudithook(_audit)  # permanent: no Python code can remove an audit hook
        _AUDITING.append(True)


def arm(rules: Rules, reversible: bool = False) -> None:
    """Before any student code runs in a worker that serves a task. The rule itself is
    enforced from the task's first probe on (student modules imported before it ran as
    they always did); `reversible` (a process serving many tasks) keeps what disarm()
    needs to put torch back, which a worker serving one task never holds."""
    guard_switches()
    _PENDING[:] = [rules, reversible]


def disarm() -> None:
    """After a task, in a process that serves another next: torch as it was."""
    _PENDING.clear()
    _ENFORCED.clear()
    while _UNDO:
        _UNDO.pop()()
    _LATE.clear()
    _COPIED.clear()
    _MADE.clear()
    _LIBRARY_FILES.clear()


@contextmanager
def watching(rules: Rules, tripped: list, name_failure: bool = False):
    """Record the operators the body runs and trip on those `rules` forbid. Adds to
    `tripped` what it found, including any sign that the recorder was switched off.
    With no rule to keep, the operator that fails is noted (FAILED_OP) only where the
    grader asks (`name_failure`: it runs a failed probe again for that), since noting it
    costs a Python call per operator of every probe."""
    if not rules:
        if name_failure:
            with FailureRecorder():
                NAMING_FAILURES[0] = True
                try:
                    yield
                finally:
                    NAMING_FAILURES[0] = False
        else:
            yield
        return
    _enforce(rules)
    NAMING_FAILURES[0] = True
    watch = _Watch(rules, tripped)
    function_depth = torch._C._len_torch_function_stack()
    dispatch_depth = torch._C._len_torch_dispatch_stack()
    with watch.function, watch.dispatch:
        _ACTIVE.append(watch)
        try:
            yield
        finally:
            NAMING_FAILURES[0] = False
            _ACTIVE.remove(watch)
            while _LATE:  # refused while no probe ran (another thread, between probes)
                watch.note(_LATE.pop(0))
            for code in _COPIED:  # torch's code copied before the rule was enforced: every probe
                watch.note(code)
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


# ------------------------------------------------------- what no mode decides
# Layers 1 and 2 of the module's docstring: enforced from the task's first probe on,
# for the rest of the process (or until disarm(), where a process serves many tasks).

_PENDING: list = []  # [rules, reversible], set by arm()
_ENFORCED: list = []  # the rules now enforced
_UNDO: list = []  # what puts torch back, only where the process serves many tasks
_LATE: list = []  # codes refused while no probe ran, reported by the next one
_COPIED: list = []  # torch's code the rule refuses, copied before it was enforced
_AUDITING: list = []
_TORCH_DIR = os.path.dirname(torch.__file__)
_TORCH_PARENT = os.path.dirname(_TORCH_DIR)
_TORCH_PREFIX = _TORCH_DIR + os.sep
_pythonapi = ctypes.pythonapi  # resolved now, before any seccomp filter or student code


def code_name(code) -> str:
    """'torch.optim.adam._single_tensor_adam' for code in torch's own files, else ''.
    (Not cached: a code object's hash is computed from all its contents, each time.)"""
    module = module_name(code.co_filename)
    return f"{module}.{code.co_qualname}" if module else ""


def module_name(filename: str) -> str:
    """'torch.optim.adam' for a file of torch's own Python code, else ''."""
    if not (filename.startswith(_TORCH_PREFIX) and filename.endswith(".py")):
        return ""
    return filename[len(_TORCH_PARENT) + 1:-3].replace(os.sep, ".").removesuffix(".__init__")


@functools.lru_cache(maxsize=256)
def library_module(name: str) -> str | None:
    """The module of torch's Python code that `name` ('torch.nn.functional.normalize', or a
    module itself) lies in, where the rest of it is a qualified name; else None."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module, rest = ".".join(parts[:cut]), parts[cut:]
        if torch_module(module):
            if len(rest) > 4 or not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*|<[a-z]+>", p) for p in rest):
                return None
            # What is named must be there (up to a function's <locals>, which no attribute reaches).
            try:
                value = importlib.import_module(module)
            except Exception:  # noqa: BLE001 - a module of torch's that does not import names nothing
                return None
            for part in rest:
                if part.startswith("<"):
                    break
                value = getattr(value, part, None)
                if value is None:
                    return None
            return module
    return None


def torch_module(name: str) -> bool:
    """Whether `name` ('torch.distributions.categorical') is a module of torch's Python code."""
    if not re.fullmatch(r"torch(\.[A-Za-z_][A-Za-z0-9_]*)*", name):
        return False
    path = os.path.join(_TORCH_PARENT, *name.split("."))
    return os.path.isfile(path + ".py") or os.path.isfile(os.path.join(path, "__init__.py"))


def _refuse(code: dict, *_args, **_kwargs):
    if _ACTIVE:
        _ACTIVE[-1].note(code)
    elif code not in _LATE:
        _LATE.append(code)
    raise ForbiddenCall("a call this task forbids", code)


def _enforce(rules: Rules) -> None:
    if _ENFORCED or not _PENDING or _PENDING[0] is not rules:
        return
    reversible = _PENDING[1]
    _ENFORCED.append(rules)
    with _collector_paused():
        _refuse_kernels(rules, reversible)
        _refuse_library(rules, reversible)


# ------------------------------------------------------------ 1. the kernel table

def forbidden_operators(rules: Rules) -> dict[str, tuple[dict, list]]:
    """{'aten::native_layer_norm.out': (code, dispatch keys), ...}: every registered
    operator overload, in any namespace, whose base name the rule forbids, with what
    refusing it reports and the keys of the kernels that compute it."""
    found = {}
    for base, overloads in _catalogue()[0].items():
        if rules.forbids(base):
            code = {"kind": "op", "layer": "kernel", "name": base}
        elif rules.no_autograd and base in FORWARD_AD:
            code = {"kind": "forward_autograd", "name": base}
        else:
            continue
        found.update((qualified, (code, keys)) for qualified, keys in overloads)
    return found


# Dispatch keys whose kernels only hand the call on to the next key (or, Meta, compute
# shapes and no values): refusing the kernels below them refuses the call.
_HANDING_ON = re.compile(r"Autograd|Autocast|Tracer|Functionalize|ADInplaceOrView|FuncTorchDynamicLayer"
                         r"|FuncTorchVmapMode|VmapMode|Python|PreDispatch|Named|Conjugate|Negative|ZeroTensor"
                         r"|BackendSelect|DeferredInit|Fake|FuncTorchGradWrapper|TESTING_ONLY|Batched$|.*Meta$")


def _refuse_kernels(rules: Rules, reversible: bool) -> None:
    libraries: dict = {}
    kernels: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel", by design
        for qualified, (code, keys) in forbidden_operators(rules).items():
            namespace, _, name = qualified.partition("::")
            library = libraries.get(namespace)
            if library is None:
                library = libraries[namespace] = torch._C._dispatch_library("IMPL", namespace, "", __file__, 0)
            kernel = kernels.get(code["name"])
            if kernel is None:
                kernel = kernels[code["name"]] = functools.partial(_refuse, dict(code))
            for key in keys:
                try:
                    library.impl(name, key, kernel, False)
                except RuntimeError:
                    pass  # a key torch lets no Python kernel take: none computes on the CPU
    for library in libraries.values():
        if reversible:
            _UNDO.append(library.reset)
        else:
            # The registrations live as long as their library object. Hold it where no
            # Python object refers to it (the object is untracked by the collector), so
            # no code in this process can find it to take the registrations back.
            _pythonapi.Py_IncRef(ctypes.py_object(library))


def _disable_kernel_handles() -> None:
    """torch.library.get_kernel's handles call a kernel past the dispatcher's table, one
    taken before the rule was enforced included: nothing in a worker needs them."""
    handle_type = getattr(torch._C, "_SafeKernelFunction", None)
    if handle_type is None or getattr(handle_type.__dict__.get("call_boxed"), "_op_rules_guard", False):
        return
    code = {"kind": "recorder_off", "how": "entry", "name": "torch._C._SafeKernelFunction.call_boxed"}

    def call_boxed(*args, **kwargs):
        _refuse(code)

    call_boxed._op_rules_guard = True
    handle_type.call_boxed = call_boxed


# TorchScript's engines that run ATen's code past the dispatcher: its fusers (oneDNN
# Graph, NNC), the static runtime, NNC's own lowering of aten operators, and the pass that
# rewrites a frozen graph into its MKLDNN operators (prim::MKLDNNLayerNorm, ...). Nothing a
# submission needs; each is replaced, before any student code, by code that refuses and
# holds nothing of the original. The fusers stay off as torch starts them (off on the CPU).
ENGINES = (
    (torch._C, "_jit_set_llga_enabled"), (torch._C, "_jit_override_can_fuse_on_cpu"),
    (torch._C, "_jit_override_can_fuse_on_cpu_legacy"), (torch._C, "_jit_to_static_module"),
    (torch._C, "_fuse_to_static_module"), (torch._C, "_jit_pass_convert_frozen_ops_to_mkldnn"),
    (getattr(torch._C, "_te", None), "lower"), (getattr(getattr(torch._C, "_te", None), "TensorExprKernel", None),
                                                 "__init__"),
)


def _refuser(code: dict):
    def refused(*args, **kwargs):
        _refuse(code)

    refused._op_rules_guard = True
    return refused


def _disable_engines() -> None:
    for owner, attr in ENGINES:
        current = getattr(owner, attr, None) if owner is not None else None
        if current is None or getattr(current, "_op_rules_guard", False):
            continue
        name = f"{getattr(owner, '__module__', '') + '.' if isinstance(owner, type) else ''}{owner.__name__}.{attr}"
        setattr(owner, attr, _refuser({"kind": "recorder_off", "how": "entry", "name": name.lstrip(".")}))
    _guard_jit_operations()


def _guard_jit_operations() -> None:
    """TorchScript's own operators (registered with the JIT, not the dispatcher) run
    ATen's code directly; the lookups that hand one to Python (torch.ops.prim.X, also
    how TorchScript compiles a call to it) refuse those named like an operator a task
    forbids (prim::MKLDNNLayerNorm), whatever the task: taken before a rule was known, a
    handle could not be taken back."""
    for attr in ("_jit_get_operation", "_get_operation_overload"):
        original = getattr(torch._C, attr, None)
        if original is None or getattr(original, "_op_rules_guard", False):
            continue

        def guarded(name, *args, _original=original, **kwargs):
            if isinstance(name, str) and _jit_only_and_forbidden(name):
                _refuse({"kind": "recorder_off", "how": "entry", "name": f"torch.ops.{name.replace('::', '.')}"})
            return _original(name, *args, **kwargs)

        guarded._op_rules_guard = True
        setattr(torch._C, attr, guarded)


# ---------------------------------------------- 2. torch's Python code doing the task


def _functions_in(value, found: dict, depth: int = 0) -> None:
    """The Python functions a module's attribute holds: itself, what it wraps, what its
    closure holds; a class's methods, static and class methods and properties."""
    if depth > 6 or id(value) in found:
        return
    if isinstance(value, types.FunctionType):
        found[id(value)] = value
        wrapped = value.__dict__.get("__wrapped__")
        if wrapped is not None:
            _functions_in(wrapped, found, depth + 1)
        for cell in value.__closure__ or ():
            try:
                content = cell.cell_contents
            except ValueError:
                continue
            if isinstance(content, (types.FunctionType, staticmethod, classmethod)):
                _functions_in(content, found, depth + 1)
    elif isinstance(value, (staticmethod, classmethod)):
        _functions_in(value.__func__, found, depth + 1)
    elif isinstance(value, property):
        for accessor in (value.fget, value.fset, value.fdel):
            if accessor is not None:
                _functions_in(accessor, found, depth + 1)
    elif isinstance(value, type) and depth == 0:
        found[id(value)] = None
        for member in list(vars(value).values()):
            _functions_in(member, found, depth + 1)


def _torch_functions(prefixes) -> list:
    """Every Python function defined in torch's modules named by `prefixes` (and their
    submodules), as their namespaces and classes hold them."""
    found: dict = {}
    prefixes = tuple(prefixes)
    if not prefixes:
        return []
    starts = tuple(p + "." for p in prefixes)
    for name, module in list(sys.modules.items()):
        if module is None or not (name in prefixes or name.startswith(starts)):
            continue
        for value in list(vars(module).values()):
            _functions_in(value, found)
    return [f for f in found.values() if f is not None and code_name(f.__code__)]


# Where torch keeps Python implementations of its operators, named as the operators are.
IMPLEMENTATION_MODULES = ("torch._refs", "torch._decomp")


def _innermost(function):
    """What a decorator written with functools.wraps wraps, all the way down."""
    for _ in range(8):
        wrapped = getattr(function, "__wrapped__", None) if isinstance(function, types.FunctionType) else None
        if not isinstance(wrapped, types.FunctionType):
            break
        function = wrapped
    return function if isinstance(function, types.FunctionType) else None


def _implementations_of(rules: Rules) -> list:
    """[(function, its name)]: torch's Python implementations of the operators the rule
    forbids (named as their code was before any was refused)."""
    if rules.implementations is None:
        found = {id(function): (function, name) for base, entries in _catalogue()[1].items()
                 if rules.forbids(base) or (rules.no_autograd and base in FORWARD_AD) for function, name in entries}
        rules.implementations = list(found.values())
    return rules.implementations


_EVERY_RULE: list = []  # the operator patterns of every task, for the JIT's own operators


def prepare(patterns=()) -> None:
    """Survey torch once where workers are forked from (or a process serves many tasks);
    `patterns`: the operator patterns of every task the process may serve."""
    _EVERY_RULE[:] = [p for p in patterns if "." not in p]
    _squashed_rules.cache_clear()
    _catalogue.cache_clear()
    with _collector_paused():
        _catalogue()
        for freevars in range(3):
            _refusing_code(freevars)


@contextmanager
def _collector_paused():
    """The survey allocates thousands of small objects in a process holding all of
    torch: a collection of the old generations mid-way costs more than the survey."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _squashed(name: str) -> str:
    return name.replace("_", "").lower()


@functools.lru_cache(maxsize=1)
def _catalogue() -> tuple[dict, dict, frozenset]:
    """({base name: [(qualified operator overload, dispatch keys)]}, {operator base name:
    [(function, its name)]}, {'aten::gelu', ...}): every operator registered; torch's
    Python implementations of operators: those it registers for them (the decomposition
    tables, an operator's Python kernels) and the functions of its reference and
    decomposition modules named after them; the operators the dispatcher knows."""
    keys: dict = {}  # the keys of each operator's own kernels that compute (see _HANDING_ON)
    runtime = torch._C._dispatch_keyset_to_string(torch._C._dispatch_keyset_full())  # "DispatchKeySet(CPU, ...)"
    for key in sorted(set(torch._C.DispatchKey.__members__) | set(re.findall(r"\w+", runtime)) - {"DispatchKeySet"}):
        if _HANDING_ON.match(key) or not _a_dispatch_key(key):
            continue
        try:
            registered = torch._C._dispatch_get_registrations_for_dispatch_key(key)
        except RuntimeError:
            continue  # not a key that kernels are registered to
        for qualified in registered:
            keys.setdefault(qualified, []).append(key)
    operators: dict = {}
    for qualified in torch._C._dispatch_get_all_op_names():
        operators.setdefault(qualified.partition("::")[2].partition(".")[0], []).append(
            (qualified, keys.get(qualified, [])))
    registered = []
    decompositions = sys.modules.get("torch._decomp")
    for table in getattr(decompositions, "global_decomposition_table", {}).values():
        for op, function in list(table.items()):
            schema = getattr(op, "_schema", None)
            if schema is not None:
                registered.append((schema.name.partition("::")[2], function))
    for packet in list(vars(torch.ops.aten).values()):
        if isinstance(packet, torch._ops.OpOverloadPacket):
            for overload in list(vars(packet).values()):
                registered += [(packet.__name__, k) for k in list(getattr(overload, "py_kernels", {}).values())]
    registered += [(f.__code__.co_name, f) for f in _torch_functions(IMPLEMENTATION_MODULES)]
    implementations: dict = {}
    for base, function in registered:
        inner = _innermost(function)
        name = code_name(inner.__code__) if inner is not None else ""
        if name:
            implementations.setdefault(base, []).append((inner, name))
    dispatched = frozenset(qualified.partition(".")[0] for qualified in torch._C._dispatch_get_all_op_names())
    return operators, implementations, dispatched


def _a_dispatch_key(name: str) -> bool:
    """Whether torch's dispatcher reads `name` as a key, asked without making it raise: a
    C++ exception crossing into Python kills the process under Wine's C runtime, where
    the Windows check is tested."""
    parse = getattr(torch._C, "_parse_dispatch_key", None)
    return parse is None or parse(name) is not None


def _jit_only_and_forbidden(name: str) -> bool:
    """An operator the JIT registered (not the dispatcher) named like one any task
    forbids, case and underscores aside (prim::MKLDNNLayerNorm for '*_layer_norm')."""
    if name.partition(".")[0] in _catalogue()[2]:
        return False
    return bool(_squashed_rules()(_squashed(name.partition("::")[2].partition(".")[0])))


@functools.lru_cache(maxsize=1)
def _squashed_rules():
    return _matcher(tuple(_squashed(p) for p in _EVERY_RULE))


def _library_targets(rules: Rules) -> list:
    """[(function, its name, what refusing it reports)]: torch's code the rule refuses,
    found by the module names of its patterns and among the implementations of its
    operators; where autograd is forbidden, forward mode's Python entry point too
    (make_dual, which first imports and scripts torch's decompositions, some of which
    may be refused; unpack_dual stays, as printing any tensor calls it)."""
    prefixes = {re.split(r"[*?\[]", pattern, maxsplit=1)[0].rpartition(".")[0] for pattern in rules.library}
    named = [(f, code_name(f.__code__)) for f in _torch_functions(sorted(p for p in prefixes if p.startswith("torch")))]
    targets = {id(f): (f, name, {"kind": "library", "name": name})
               for f, name in named + _implementations_of(rules) if rules.refuses_in_place(name)}
    if rules.no_autograd:
        for function in _torch_functions(("torch.autograd.forward_ad",)):
            if function.__code__.co_name == "make_dual":
                targets[id(function)] = (function, code_name(function.__code__),
                                         {"kind": "forward_autograd", "name": function.__code__.co_name})
    return list(targets.values())


@functools.lru_cache(maxsize=None)
def _refusing_code(freevars: int):
    """A code object that refuses, with `freevars` free variables, so that it can
    replace the code of a function with a closure of that size."""
    cells = [f"cell{i}" for i in range(freevars)]
    lines = ["def outer():"]
    if cells:
        lines.append(f"    {' = '.join(cells)} = None")
    lines += ["    def refused(*args, **kwargs):", "        return '__refuse__'()"]
    if cells:
        lines.append(f"        {', '.join(cells)}")  # unreachable: makes them free, never read
    lines.append("    return refused")
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # calling a str constant, replaced below
        exec(compile("\n".join(lines), "<grader: torch's code that does this task, refused>", "exec"), namespace)
    return namespace["outer"]().__code__


def _refuse_library(rules: Rules, reversible: bool) -> None:
    rules.derived()  # named now, while their code is still torch's
    files = set()
    for function, name, code in _library_targets(rules):
        original = function.__code__
        if not code_name(original):
            continue  # refused already
        files.add(original.co_filename)
        refusing = _refusing_code(len(original.co_freevars))
        refusing = refusing.replace(
            co_consts=tuple(functools.partial(_refuse, code) if c == "__refuse__" else c for c in refusing.co_consts),
            co_name=original.co_name, co_qualname=original.co_qualname)
        function.__code__ = refusing
        if reversible:
            _UNDO.append(functools.partial(setattr, function, "__code__", original))
    _LIBRARY_FILES.clear()
    _LIBRARY_FILES.update(files)
    for event, name, filename in _MADE:  # torch's code copied before the rule was enforced
        code = {"kind": "library", "name": name}
        if _copies_library(rules, event, name, filename) and code not in _COPIED:
            _COPIED.append(code)
    _MADE.clear()


_LIBRARY_FILES: set = set()  # the files of torch's code a rule refuses
_MADE: list = []  # (event, name) of torch code made into new functions or run again
_AUDITED = frozenset({"function.__new__", "exec", "object.__setattr__"})


def _copies_library(rules: Rules, event: str, name: str, filename: str) -> bool:
    return filename in _LIBRARY_FILES if event == "exec" else rules.refuses_in_place(name)


def _audit(event: str, args) -> None:
    """The audit hook: torch's code that does the task made into a new function
    (types.FunctionType on its code), put into a function (`f.__code__ = ...`), or its
    module run again (a reload, exec of its source under its own name). Refused while
    the rule is enforced; before that (a copy made when the package was imported),
    reported by the first probe."""
    if event not in _AUDITED:
        return
    if event == "object.__setattr__":
        code = args[2] if len(args) == 3 and args[1] == "__code__" else None
    else:
        code = args[0] if args else None
    if not isinstance(code, types.CodeType):
        return
    name = code_name(code).removesuffix(".<module>")  # a module run again is named as the module
    if not name:
        return
    if not _ENFORCED:
        _MADE.append((event, name, code.co_filename))
    elif _copies_library(_ENFORCED[0], event, name, code.co_filename):
        _refuse({"kind": "library", "name": name})
