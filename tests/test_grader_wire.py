"""The wire format: plain data in, plain data out, and nothing else accepted."""

from __future__ import annotations

import base64
import json
import math

import pytest
import torch

from grader.run.inside import wire


@pytest.mark.parametrize("tensor", [
    torch.tensor(3.5, dtype=torch.float64),
    torch.randn(2, 3, dtype=torch.float64),
    torch.randn(4, dtype=torch.float32).t(),
    torch.arange(6).reshape(2, 3).t(),
    torch.tensor([True, False]),
    torch.empty(0, 3),
    torch.randn(3, dtype=torch.bfloat16),
])
def test_tensors_round_trip_exactly(tensor):
    back = wire.decode(json.dumps(wire.encode({"t": tensor})).encode())["t"]
    assert back.dtype == tensor.dtype and back.shape == tensor.shape
    assert torch.equal(back, tensor)


def test_plain_values_and_specials_round_trip():
    value = {"a": [1, 2.5, "x", None, True], "nan": float("nan"), "inf": -math.inf, "tuple": (1, 2)}
    back = wire.decode(json.dumps(wire.encode(value), allow_nan=False).encode())
    assert back["a"] == [1, 2.5, "x", None, True] and math.isnan(back["nan"]) and back["inf"] == -math.inf
    assert back["tuple"] == [1, 2]


def test_unknown_objects_come_back_as_opaque_text():
    class Evil:
        def __reduce__(self):
            raise AssertionError("never pickled")

    back = wire.decode(json.dumps(wire.encode({"x": Evil()})).encode())["x"]
    assert isinstance(back, wire.Opaque) and "Evil" in repr(back)


def test_exceptions_travel_as_data():
    back = wire.decode(json.dumps(wire.encode(ValueError("bad id 7"))).encode())
    assert isinstance(back, wire.RemoteError) and back.kind == "ValueError" and "7" in back.message


@pytest.mark.parametrize("spec", [
    ["object", [1], ""],
    ["float64", [2], base64.b64encode(b"\x00" * 8).decode()],
    ["float64", [-1], ""],
    ["float64", "nope", ""],
])
def test_malformed_tensors_are_refused(spec):
    with pytest.raises(wire.WireError):
        wire.decode(json.dumps({"__tensor__": spec}).encode())


def test_bad_float_and_bad_json_are_refused():
    with pytest.raises(wire.WireError):
        wire.decode(json.dumps({"__float__": "__import__('os')"}).encode())
    with pytest.raises(wire.WireError):
        wire.decode(b"{not json")


def test_frames_over_the_limit_are_refused(monkeypatch):
    import socket

    a, b = socket.socketpair()
    monkeypatch.setattr(wire, "MAX_FRAME_BYTES", 10)
    a.sendall(wire._HEADER.pack(1000) + b"x" * 20)
    with pytest.raises(wire.WireError):
        wire.recv(b)
    a.close()
    b.close()
