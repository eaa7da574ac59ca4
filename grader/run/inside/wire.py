"""Plain-data messages between the grader and the sandboxed worker.

A frame is an 8-byte big-endian length and a UTF-8 JSON body. Tensors travel as
{"__tensor__": [dtype, shape, base64 bytes]}; the reader rebuilds them from raw
bytes with a dtype whitelist, so nothing the worker sends can run code in the
grader (no pickle anywhere).
"""

from __future__ import annotations

import base64
import json
import math
import struct
import time

MAX_FRAME_BYTES = 16 * 1024 * 1024
# Each [ or { becomes a Python object of ~60+ bytes: bound them so a small frame cannot
# make the grader build millions of objects.
MAX_CONTAINERS = 200_000
# And each item of them (a number, a string) is another: bounded by the commas between them.
MAX_ITEMS = 2_000_000
# JSON writes an int in decimal, and Python refuses more than 4,300 digits.
_LONGEST_INT_BITS = 13_000
_HEADER = struct.Struct(">Q")
_DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")


class WireError(Exception):
    """The other side sent something that is not a well-formed frame."""


class OverLimits(Exception):
    """A message this side would send is over the limits the other side reads by (its
    bytes, its lists and objects, its items): refused before it is sent, as the sender's
    failure, so the reader never meets it (`over_limits`)."""


def over_limits(body: bytes) -> "str | None":
    """What a frame's body breaks of the limits every reader holds it to, in words; None
    where it keeps them. The one test both sides apply: a sender before it sends, a reader
    before it decodes."""
    if len(body) > MAX_FRAME_BYTES:
        return f"a {len(body)}-byte message is over the {MAX_FRAME_BYTES}-byte limit"
    if body.count(b"[") + body.count(b"{") > MAX_CONTAINERS:
        return f"a message with more than {MAX_CONTAINERS} lists and objects is refused"
    if body.count(b",") > MAX_ITEMS:
        return f"a message with more than {MAX_ITEMS} items is refused"
    return None


def encode(value, _depth=0):
    """Turn results into JSON-ready data; anything unknown becomes a short repr."""
    kind = type(value)  # (exact types first: a part's call is mostly these, thousands deep)
    if kind is float:
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if value is None or kind is str or kind is int or kind is bool:
        return value
    if _depth > 64:
        return {"__repr__": "<nested too deeply>"}
    if kind is list or kind is tuple:
        return [encode(v, _depth + 1) for v in value]
    if kind is dict:
        return {k if type(k) is str else str(k): encode(v, _depth + 1) for k, v in value.items()}
    if _depth > 64:
        return {"__repr__": "<nested too deeply>"}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if isinstance(value, (list, tuple)):
        return [encode(v, _depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, BaseException):
        return {"__exception__": [type(value).__name__, str(value)[:2000]]}
    try:
        import torch
    except ImportError:  # pragma: no cover - the worker always has torch
        torch = None
    if torch is not None and isinstance(value, torch.Tensor):
        return _tensor(value)
    if torch is not None and isinstance(value, (torch.Size,)):
        return list(value)
    try:
        text = repr(value)[:500]
    except Exception:  # noqa: BLE001 - a repr that raises is the submission's problem, not the wire's
        text = f"<a {type(value).__name__} whose repr fails>"
    return {"__repr__": text}


class Budget:
    """What one answer may still hold: containers (MAX_CONTAINERS), items (MAX_ITEMS) and
    tensor bytes (what fits a frame once base64 has grown it by a third). What it does not
    count (the bytes of numbers and text) the sender checks once the answer is encoded
    (`over_limits`)."""

    def __init__(self):
        self.containers, self.items = MAX_CONTAINERS - 1, MAX_ITEMS - 1
        self.tensor_bytes = MAX_FRAME_BYTES * 3 // 4 - 64 * 1024

    def spend(self, containers: int = 0, tensor_bytes: int = 0, items: int = 0) -> None:
        self.containers -= containers
        self.tensor_bytes -= tensor_bytes
        self.items -= items
        if self.containers < 0 or self.tensor_bytes < 0 or self.items < 0:
            raise OverBudget


class OverBudget(Exception):
    pass


TOO_LARGE = (f"more than {MAX_CONTAINERS:,} lists and dicts, {MAX_ITEMS:,} items, {MAX_FRAME_BYTES >> 20} MB "
             f"in all or {MAX_FRAME_BYTES * 3 // 4 >> 20} MB of tensors")


def plain(value):
    """`_plain`, bounded: an answer over the wire's limits (TOO_LARGE) is said to be so,
    as the submission's failure, before it is encoded."""
    try:
        return _plain(value, 0, Budget())
    except OverBudget:
        return {"__too_large__": TOO_LARGE}


def _plain(value, _depth, budget):
    """A probe's answer as plain data, made in the worker while the task's rules still hold
    (grader/run/inside/tasks.py answers inside the probe's window), so whatever code of the
    answer's own runs while it is read (a property, an __iter__, a __float__, a tensor's
    __torch_function__) runs under those rules: None, bools, ints, floats and strings of
    exactly those types; lists of what lists, tuples and dicts hold (keys strings or ints);
    a torch.Tensor or Parameter of exactly that class, materialised now. `encode` then
    finds nothing that runs code. A tensor of any other class is not read (its values
    could be computed as they are read), and an object of any other type is named by its
    type, never by a repr of its own."""
    kind = type(value)
    if kind is int and value.bit_length() > _LONGEST_INT_BITS:
        return {"__repr__": "<a whole number of more than 4,000 digits>"}
    if value is None or kind is bool or kind is int or kind is str:
        return value
    if kind is float:
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if _depth > 64:
        return {"__repr__": "<nested too deeply>"}
    if kind is list or kind is tuple:
        budget.spend(containers=1, items=len(value))
        return [_plain(item, _depth + 1, budget) for item in kind.__iter__(value)]
    if kind is dict:
        return _plain_dict(list(dict.items(value)), _depth, budget)
    import torch

    if kind is torch.Tensor or kind is torch.nn.Parameter:
        budget.spend(tensor_bytes=value.numel() * value.element_size())
        with torch.no_grad():  # reading it is the grader's work: no autograd of the task's runs here
            return _tensor(value)
    if isinstance(value, torch.Tensor):
        return {"__repr__": f"<a tensor of the class {kind.__name__}, not torch.Tensor: return a plain tensor>"}
    if isinstance(value, BaseException):
        return {"__exception__": [kind.__name__, str(value)[:2000]]}
    # Subclasses of plain types (numpy's float64, a named tuple, an OrderedDict, the
    # submission's own): read through their own methods, under the rules, into exact ones.
    if isinstance(value, int):
        return _plain(int(value), _depth + 1, budget)
    if isinstance(value, float):
        return _plain(float(value), _depth + 1, budget)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, (list, tuple, torch.Size)):
        items = list(value)
        budget.spend(containers=1, items=len(items))
        return [_plain(item, _depth + 1, budget) for item in items]
    if isinstance(value, dict):
        return _plain_dict(list(value.items()), _depth, budget)
    return {"__repr__": f"<an object of the type {kind.__name__}, which is not plain data (a tensor, a number, a "
                        f"string, or a list, tuple or dict of those)>"}


# The keys the wire's own objects are told by (_decode_object): an answer's dict holding
# one would be read as the wire's, so it is not sent as it is.
RESERVED_KEYS = frozenset({"__tensor__", "__float__", "__exception__", "__repr__", "__too_large__"})


def _plain_dict(items: list, depth: int, budget: Budget):
    budget.spend(containers=1, items=len(items))
    if not all(type(key) is str or type(key) is int for key, _ in items):
        return {"__repr__": "<a dict whose keys are not all strings or ints>"}
    if any(key in RESERVED_KEYS for key, _ in items):
        return {"__repr__": "<a dict with a key the grader's messages reserve (such as '__tensor__')>"}
    return {str(key): _plain(item, depth + 1, budget) for key, item in items}


def _tensor(value) -> dict:
    import torch

    try:
        tensor = value.detach().cpu().to_dense().contiguous()
    except Exception:  # noqa: BLE001 - a tensor that cannot be read as bytes is sent as its kind
        return {"__repr__": f"<a {type(value).__name__} that cannot be sent>"}
    dtype = str(tensor.dtype).removeprefix("torch.")
    if dtype not in _DTYPES:
        tensor, dtype = tensor.to(torch.float64), "float64"
    raw = tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
    return {"__tensor__": [dtype, list(tensor.shape), base64.b64encode(raw).decode("ascii")]}


def _decode_object(obj):
    if "__tensor__" in obj:
        return _decode_tensor(obj["__tensor__"])
    if "__float__" in obj:
        text = obj["__float__"]
        if text not in ("nan", "inf", "-inf"):
            raise WireError(f"bad float {text!r}")
        return float(text)
    if "__exception__" in obj:
        kind, message = obj["__exception__"]
        return RemoteError(str(kind), str(message))
    if "__repr__" in obj:
        return Opaque(str(obj["__repr__"]))
    if "__too_large__" in obj:
        return TooLarge(str(obj["__too_large__"]))
    return obj


def _decode_tensor(spec):
    import torch

    dtype, shape, data = spec
    if dtype not in _DTYPES:
        raise WireError(f"dtype {dtype!r} is not accepted")
    if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise WireError("a tensor shape must be a list of non-negative integers")
    if len(shape) > 64 or any(n > MAX_FRAME_BYTES for n in shape):
        raise WireError("a tensor shape beyond any frame")
    torch_dtype = getattr(torch, dtype)
    if not isinstance(data, str):
        raise WireError("tensor bytes must be text")
    raw = base64.b64decode(data, validate=True)
    count = math.prod(shape)
    itemsize = torch_dtype.itemsize
    if len(raw) != count * itemsize:
        raise WireError("tensor bytes do not match its shape")
    try:
        if count == 0:
            return torch.empty(shape, dtype=torch_dtype)
        return torch.frombuffer(bytearray(raw), dtype=torch_dtype).reshape(shape).clone()
    except (RuntimeError, ValueError, OverflowError) as error:  # a shape torch refuses
        raise WireError(f"a tensor torch cannot build: {str(error)[:200]}") from None


def decode(body: bytes, tensors: bool = True):
    """A frame's body as values; `tensors=False`: as JSON only, tensors left as their
    encoded dicts (what a relay checks and passes on as it came)."""
    broken = over_limits(body)
    if broken:
        raise WireError(broken)
    try:  # json.loads raises RecursionError on absurd nesting; that is garbage too
        return json.loads(body.decode("utf-8"), object_hook=_decode_object if tensors else None)
    except WireError:
        raise
    except (ValueError, TypeError, KeyError, RecursionError) as error:
        raise WireError(f"malformed message: {type(error).__name__}: {str(error)[:200]}") from None


class RemoteError:
    """An exception raised in the worker, as data: its type name and message."""

    def __init__(self, kind: str, message: str):
        self.kind, self.message = kind, message

    def __repr__(self):
        return f"{self.kind}: {self.message}"


class Opaque:
    """A value the worker could not express as plain data; only its repr came back."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self):
        return self.text


class TooLarge(Opaque):
    """An answer over the wire's limits, refused by the worker before it was encoded."""


def send(sock, value) -> None:
    """One message; OverLimits, with nothing sent, where the reader would refuse it."""
    try:
        body = json.dumps(encode(value), allow_nan=False).encode("utf-8")
    except ValueError as error:  # an int of more digits than Python writes
        raise OverLimits(f"a value that cannot be written: {str(error)[:200]}") from None
    broken = over_limits(body)
    if broken:
        raise OverLimits(broken)
    sock.sendall(_HEADER.pack(len(body)) + body)


# A module sent as code compiled by the grader (the worker's interpreter is the same
# one) rather than as source text: no worker spends its start compiling it.
COMPILED = "\x00marshal:"  # no source file starts so


def pack_code(source: str, filename: str) -> str:
    import marshal

    code = compile(source, filename, "exec", dont_inherit=True)
    return COMPILED + base64.b64encode(marshal.dumps(code)).decode("ascii")


def module_code(text: str, filename: str):
    """The code of a module sent either way."""
    if text.startswith(COMPILED):
        import marshal

        return marshal.loads(base64.b64decode(text[len(COMPILED):]))
    return compile(text, filename, "exec", dont_inherit=True)


def bound_sender():
    """send() with json, struct and encode bound now: code that later replaces them
    (json.dumps, wire.encode) does not change what this function sends."""
    dumps, pack, to_data, broken_by, over = json.dumps, _HEADER.pack, encode, over_limits, OverLimits

    def send_bound(sock, value) -> None:
        try:
            body = dumps(to_data(value), allow_nan=False).encode("utf-8")
        except ValueError as error:  # an int of more digits than Python writes
            raise over(f"a value that cannot be written: {str(error)[:200]}") from None
        broken = broken_by(body)
        if broken:
            raise over(broken)
        sock.sendall(pack(len(body)) + body)

    return send_bound


def bound_receiver():
    """recv() with json and the decoders bound now, for the same reason."""
    loads, unpack, size, hook, exact = json.loads, _HEADER.unpack, _HEADER.size, _decode_object, _recv_exact
    broken_by, error = over_limits, WireError

    def recv_bound(sock, deadline: float | None = None):
        (length,) = unpack(exact(sock, size, deadline))
        if length > MAX_FRAME_BYTES:
            raise error(f"a {length}-byte message is over the {MAX_FRAME_BYTES}-byte limit")
        body = exact(sock, length, deadline)
        broken = broken_by(body)
        if broken:
            raise error(broken)
        return loads(body.decode("utf-8"), object_hook=hook)

    return recv_bound


def _recv_exact(sock, size: int, deadline: float | None = None) -> bytes:
    chunks, remaining = [], size
    while remaining:
        if deadline is not None:
            # One timeout for the whole message, not one per recv: a peer that
            # trickles a byte at a time must not hold the reader for ever.
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the message did not arrive in time")
            sock.settimeout(left)
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the channel")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def recv(sock, deadline: float | None = None):
    """One message; with a deadline (time.monotonic()), TimeoutError once it passes."""
    return decode(recv_frame(sock, deadline))


def recv_frame(sock, deadline: float | None = None) -> bytes:
    """One frame's body, unread."""
    (size,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size, deadline))
    if size > MAX_FRAME_BYTES:
        raise WireError(f"a {size}-byte message is over the {MAX_FRAME_BYTES}-byte limit")
    return _recv_exact(sock, size, deadline)


def send_frame(sock, body: bytes) -> None:
    """A body passed on as it came (a relay's)."""
    sock.sendall(_HEADER.pack(len(body)) + body)
