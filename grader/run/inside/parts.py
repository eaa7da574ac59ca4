"""Certified parts that run apart: the worker holds their guard and a call across, never
their code.

A part whose reference is a function of the values it is given (Task.pure: a GELU, a
LayerNorm's forward, a backward by hand, a tokenizer's encode) runs in a process of its
own, the parts' process, which the grader starts beside a worker the first time a probe
calls such a part. No student code runs there, and the worker holds nothing of the part
for a signal handler, the collector or a read of memory to find: its code is the
worker's certified stub, `return __hero_part__("gelu", {"x": x})`
(grader/run/reference.py, _called_across), which begins with the part's guard like any
certified part's (grader/run/inside/sealed.py), so the course's order and a group's
tasks hold as before.

A call crosses by value, by way of the grader, which checks every message as it passes
(grader/run/worker.py): the arguments are packed here (`pack`: numbers, strings, tensors
of torch's own classes, lists, tuples, dicts, and objects of the package's classes by
their tensors and settings), the parts' process unpacks them onto its own classes, runs
the part, and packs its result back. Where autograd wants the part's gradient, the call
is a torch.autograd.Function whose backward crosses again: the parts' process runs the
part once more on the same values and returns the gradients of the inputs asked for.
"""

from __future__ import annotations

import sys
import types

from grader.run.inside import wire
from grader.run.inside.messages import PartCall, PartReply, PartsRequest

# Tags of packed values that JSON has no word for.
TUPLE, DICT, TENSOR, OBJECT, DTYPE = "__tuple__", "__dict__", "__t__", "__object__", "__dtype__"
STUDENT_PACKAGE, CERTIFIED_PACKAGE = "hero_transformer", "_certified_hero_transformer"
# The name under which a certified module finds call_part: set in its globals before it runs.
CALL_ACROSS = "__hero_part__"
_PLAIN_ATTRIBUTE = (bool, int, float, str, type(None))


class CannotCross(TypeError):
    """An argument a certified part running apart cannot be given: said in the student's terms."""


# ----------------------------------------------------------------------- packing


def pack(value, tensors: list, budget=None, _depth: int = 0):
    """`value` as plain data; each tensor is noted in `tensors` (its number in the data),
    so that a gradient can name it."""
    import torch

    budget = budget if budget is not None else wire._Budget()
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return value if value == value and value not in (float("inf"), float("-inf")) else {"__float__": repr(value)}
    if _depth > 32:
        raise CannotCross("arguments nested more than 32 deep")
    try:
        budget.spend(containers=1)
    except wire._TooLarge:
        raise CannotCross(f"arguments of {wire.TOO_LARGE}") from None
    if kind is list:
        return [pack(item, tensors, budget, _depth + 1) for item in value]
    if kind is tuple or kind is torch.Size:
        return {TUPLE: [pack(item, tensors, budget, _depth + 1) for item in value]}
    if kind is dict:
        return {DICT: [[pack(k, tensors, budget, _depth + 1), pack(v, tensors, budget, _depth + 1)]
                       for k, v in value.items()]}
    if kind is torch.Tensor or kind is torch.nn.Parameter:
        try:
            budget.spend(tensor_bytes=value.numel() * value.element_size())
        except wire._TooLarge:
            raise CannotCross(f"arguments of {wire.TOO_LARGE}") from None
        tensors.append(value)
        return {TENSOR: len(tensors) - 1, "v": value.detach(), "p": kind is torch.nn.Parameter,
                "g": bool(value.requires_grad)}
    if kind is torch.dtype:
        return {DTYPE: str(value).removeprefix("torch.")}
    module = getattr(kind, "__module__", "")
    if isinstance(module, str) and (module == STUDENT_PACKAGE or module.startswith(STUDENT_PACKAGE + ".")):
        return {OBJECT: [module[len(STUDENT_PACKAGE) + 1:], kind.__qualname__, _state(value, tensors, budget, _depth)]}
    raise CannotCross(f"a {kind.__name__}: the course's own parts take tensors, numbers, strings, lists, tuples "
                      f"and dicts of those, and the package's own objects")


def _state(value, tensors: list, budget, depth: int) -> dict:
    """An object of the package's classes, as a part reads it: its parameters and buffers
    (an nn.Module's), and its attributes that are numbers, strings or lists, tuples and
    dicts of them. Submodules and other objects stay behind (no part that runs apart reads
    them); nothing of the object's own code runs, since its dict is read directly."""
    import torch

    attributes = object.__getattribute__(value, "__dict__")
    state = {"parameters": {}, "buffers": {}, "attributes": {}}
    if isinstance(value, torch.nn.Module):
        for key in ("parameters", "buffers"):
            for name, tensor in dict.items(attributes.get(f"_{key}", {})):
                if tensor is not None and type(name) is str:
                    state[key][name] = pack(tensor, tensors, budget, depth + 1)
    for name, item in list(dict.items(attributes)):
        if type(name) is str and not name.startswith("_") and _plain(item):
            state["attributes"][name] = pack(item, tensors, budget, depth + 1)
    return state


def _plain(item, depth: int = 0) -> bool:
    if type(item) in _PLAIN_ATTRIBUTE:
        return True
    if depth < 4 and type(item) in (list, tuple):
        return all(_plain(x, depth + 1) for x in item)
    if depth < 4 and type(item) is dict:
        return all(type(k) in (str, int) and _plain(v, depth + 1) for k, v in item.items())
    return False


def unpack(data, modules: dict | None = None, grad_of: set | None = None, found: dict | None = None):
    """Packed data as values. `modules`: the package's modules (short name -> module) whose
    classes objects are rebuilt on; `grad_of`: the tensors (by number) to take a gradient
    of, made leaves that require one; `found`: those tensors by number, as made here."""
    import torch

    if isinstance(data, list):
        return [unpack(item, modules, grad_of, found) for item in data]
    if not isinstance(data, dict):
        return data
    if TUPLE in data:
        return tuple(unpack(item, modules, grad_of, found) for item in data[TUPLE])
    if DICT in data:
        return {unpack(k, modules, grad_of, found): unpack(v, modules, grad_of, found) for k, v in data[DICT]}
    if TENSOR in data:
        tensor = data["v"]
        if not isinstance(tensor, torch.Tensor):
            raise wire.WireError("a packed tensor without its values")
        number = data[TENSOR]
        if data.get("p"):
            tensor = torch.nn.Parameter(tensor, requires_grad=bool(data.get("g")))
        if grad_of and number in grad_of:
            tensor = tensor.detach().requires_grad_(True) if not isinstance(tensor, torch.nn.Parameter) \
                else torch.nn.Parameter(tensor.detach(), requires_grad=True)
        if found is not None:
            found[number] = tensor
        return tensor
    if DTYPE in data:
        dtype = getattr(torch, str(data[DTYPE]), None)
        if not isinstance(dtype, torch.dtype):
            raise wire.WireError(f"no dtype {data[DTYPE]!r}")
        return dtype
    if OBJECT in data:
        return _rebuilt(data[OBJECT], modules or {}, grad_of, found)
    raise wire.WireError("a packed value of no known kind")


def _rebuilt(spec, modules: dict, grad_of, found):
    """An object of the package's class `qualname` in `module`, as the parts' process has
    the class: made without running its __init__, its state set as the worker read it."""
    import torch

    module, qualname, state = spec
    owner = modules.get(module)
    for name in str(qualname).split("."):
        owner = getattr(owner, name, None)
    if not isinstance(owner, type):
        raise wire.WireError(f"no class {qualname!r} in the package's {module!r}")
    made = owner.__new__(owner)
    if isinstance(made, torch.nn.Module):
        torch.nn.Module.__init__(made)
        for name, tensor in state.get("parameters", {}).items():
            value = unpack(tensor, modules, grad_of, found)
            made.register_parameter(name, value if isinstance(value, torch.nn.Parameter)
                                    else torch.nn.Parameter(value, requires_grad=value.requires_grad))
        for name, tensor in state.get("buffers", {}).items():
            made.register_buffer(name, unpack(tensor, modules, grad_of, found))
    for name, value in state.get("attributes", {}).items():
        object.__setattr__(made, name, unpack(value, modules, grad_of, found))
    return made


def _tensors_of(value, into: list) -> list:
    """The tensors of a result, in order (a tensor, or lists and tuples of them)."""
    import torch

    if isinstance(value, torch.Tensor):
        into.append(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _tensors_of(item, into)
    return into


# ------------------------------------------------------------- the worker's side

# (channel, send, recv, decode, encode): the worker's line to the grader, bound by
# serve_tasks before any student code runs.
LINE: list = []


def call_part(part: str, arguments: dict):
    """A certified part's call across, from its stub in the worker: its result, as the
    part computed it in the parts' process. Where autograd wants the part's gradient (an
    input requires one and grad mode is on), the call is a node of the graph whose
    backward crosses too."""
    import torch

    tensors: list = []
    try:
        packed = pack(arguments, tensors)
    except CannotCross as error:
        raise CannotCross(f"the course's {part} runs in a process of its own and cannot be given {error}") from None
    wrt = [i for i, tensor in enumerate(tensors) if tensor.requires_grad]
    if not wrt or not torch.is_grad_enabled():
        return _across(part, packed)
    crossing = _Crossing(part, packed, wrt)
    outputs = _CrossingFunction.apply(crossing, *(tensors[i] for i in wrt))
    return crossing.rebuild(outputs)


def _across(part: str, packed, wrt=(), grad_outputs=None):
    channel, send, recv, decode, encode = LINE
    send(channel, encode(PartCall(part=part, arguments=packed, wrt=list(wrt), grad_outputs=grad_outputs)))
    reply = decode(recv(channel), PartReply)
    if reply.error is not None:
        raise _raised(reply.error)
    return unpack(reply.result)


def _raised(failure) -> BaseException:
    """The part's failure, raised again in the worker as the class it was where Python or
    torch names it (a ValueError the part raises on a bad id), else as a RuntimeError."""
    import builtins

    import torch

    kind = getattr(builtins, failure.type, None) or getattr(torch, failure.type, None)
    if not (isinstance(kind, type) and issubclass(kind, Exception)):
        kind = RuntimeError
    try:
        return kind(failure.message)
    except Exception:  # noqa: BLE001 - a class that wants other arguments
        return RuntimeError(failure.message)


class _Crossing:
    """One call across that autograd may ask the gradient of: its packed arguments are kept
    to be sent again with the gradients of its outputs."""

    def __init__(self, part: str, packed, wrt: list[int]):
        self.part, self.packed, self.wrt = part, packed, wrt
        self.result, self.layout = None, []

    def forward(self) -> tuple:
        self.result = _across(self.part, self.packed)
        outputs = _tensors_of(self.result, [])
        if not outputs:
            raise TypeError(f"the course's {self.part} gave no tensor to take a gradient of")
        return tuple(outputs)

    def rebuild(self, outputs):
        """The result, with its tensors replaced by the graph's outputs."""
        remaining = list(outputs) if isinstance(outputs, tuple) else [outputs]

        def swap(value):
            import torch

            if isinstance(value, torch.Tensor):
                return remaining.pop(0)
            if isinstance(value, (list, tuple)):
                return type(value)(swap(item) for item in value)
            return value

        return swap(self.result)

    def backward(self, grads: tuple) -> list:
        tensors: list = []
        grad_outputs = [None if g is None else pack(g, tensors) for g in grads]
        return list(_across(self.part, self.packed, self.wrt, grad_outputs))


def _crossing_function():
    import torch

    class CrossingFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, crossing, *inputs):
            ctx.crossing = crossing
            return crossing.forward()

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, *grads):
            return (None, *ctx.crossing.backward(grads))

    return CrossingFunction


class _LazyFunction:
    def __init__(self):
        self.function = None

    def apply(self, *args):
        if self.function is None:
            self.function = _crossing_function()
        return self.function.apply(*args)


_CrossingFunction = _LazyFunction()


# ----------------------------------------------------- the parts' process's side


def serve(channel, send, recv, request: PartsRequest, decode, encode, describe) -> None:
    """Serve calls across until the grader closes the channel: load the certified modules,
    then answer each PartCall with the part's result (or gradients), or its failure."""
    from grader.run.inside import tasks

    compiled, request.certified = request.certified, None
    modules = tasks.load(CERTIFIED_PACKAGE, compiled, "certified",
                         sorted(k[:-3] for k in compiled if k.endswith(".py") and "/" not in k
                                and k != "__init__.py"), {})
    compiled.clear()
    where = {region.task: (region.module, region.qualname) for region in request.regions}
    send(channel, encode(_ready()))
    while True:
        try:
            call = decode(recv(channel), PartCall)
        except (EOFError, OSError, wire.WireError):
            return
        try:
            result = _answer(call, modules, where)
            reply = PartReply(result=result)
        except BaseException as error:  # noqa: BLE001 - the part's failure, on the values it was given
            reply = PartReply(error=describe(error))
        send(channel, encode(reply))


def _ready():
    from grader.run.inside.messages import Ready

    return Ready()


def _answer(call: PartCall, modules: dict, where: dict):
    import torch

    module, qualname = where[call.part]
    function = modules[module]
    for name in qualname.split("."):
        function = vars(function)[name] if isinstance(function, (type, types.ModuleType)) else None
    if not call.wrt:
        with torch.no_grad():
            return pack(function(**unpack(call.arguments, modules)), [])
    found: dict = {}
    arguments = unpack(call.arguments, modules, set(call.wrt), found)
    with torch.enable_grad():
        outputs = _tensors_of(function(**arguments), [])
    grads = unpack(call.grad_outputs) if call.grad_outputs is not None else []
    pairs = [(out, grad) for out, grad in zip(outputs, grads) if grad is not None and out.requires_grad]
    inputs = [found[i] for i in call.wrt]
    if not pairs:
        return pack([None] * len(inputs), [])
    computed = torch.autograd.grad([o for o, _ in pairs], inputs, [g for _, g in pairs], allow_unused=True)
    return pack(list(computed), [])
