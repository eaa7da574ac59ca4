"""The typed messages between grader and worker (grader/run/inside/messages.py).

Every kind survives the trip through the wire as it was sent; anything else the other
side could send (an unknown or misspelt field, a missing one, a value of another type, a
message of another kind) is a MessageError where it is read, never a default quietly put
in its place.
"""

from __future__ import annotations

import pytest
import torch

from grader.run.inside import wire
from grader.run.inside.messages import (Cause, CaughtCall, Exit, Failure, ForbiddenKind, LowPrecision,
                                        MessageError, Operation, PartCall, PartReply, PartsRequest, ProbeCall,
                                        ProbeReply, Ready, Region, SetupFailed, TaskRequest, TaskRules, from_data,
                                        to_data)
from grader.run.inside.wire import WireError


def _body(data) -> bytes:
    import json

    return json.dumps(wire.encode(data)).encode()


EVERY_KIND = [
    TaskRequest(task="gelu", student={"hero/gelu.py": "def gelu(x): ..."}, certified={"hero/ln.py": "..."},
                certify=["layer_norm"], regions=[Region("gelu", "hero.activations", "gelu")],
                needs=["hero.activations"], limits={"memory": 1 << 30},
                rules=TaskRules(tripwires=["torch.nn.functional.gelu"], ops=["aten::gelu*"], no_autograd=True),
                group={"gelu": TaskRules()}, fresh=True),
    ProbeCall(module="grader.checks.ch05_blocks.gelu", probe="exact_values", inputs={"seed": 3},
              task="gelu", name_failure=True, name_precision=False),
    Exit(),
    Ready(certified=["layer_norm", "linear"]),
    SetupFailed(error=Failure(type="ModuleNotFoundError", message="no hero.activations",
                              cause=Cause.MISSING_MODULE, missing_module="hero.activations")),
    ProbeReply(result={"y": [1.0, 2.5]}, forbidden_calls=[CaughtCall(ForbiddenKind.OP, "aten::gelu", "kernel")],
               crossed=["linear"], low_precision=LowPrecision(op="aten.mm", dtype="float32", shape=[2, 3], made=False)),
    ProbeReply(error=Failure(type="ValueError", message="too many values to unpack", where="hero/ln.py:12",
                             line="B, T, C = x.shape", standard=True, trace=["hero/ln.py:12"], unpacked=3,
                             operation=Operation(op="aten.mm", tensors=[["float64", [2, 3]]], dtype=None)),
               tampered=None),
    PartsRequest(certified={"model.py": "..."}, regions=[Region("gelu", "model", "gelu")],
                 limits={"RLIMIT_AS": 1 << 30}),
    PartCall(part="gelu", arguments={"__dict__": [["x", 1.5]]}, wrt=[0], grad_outputs=[None]),
    PartReply(result=[1.0, None]),
    PartReply(error=Failure(type="ValueError", message="token id 7 is outside the vocabulary", standard=True)),
]


@pytest.mark.parametrize("message", EVERY_KIND, ids=lambda m: type(m).__name__)
def test_every_kind_comes_back_as_it_was_sent(message):
    back = from_data(wire.decode(_body(to_data(message))))
    assert back == message
    assert type(back) is type(message)


def test_a_tensor_answer_travels_as_a_tensor_and_enums_come_back_as_enums():
    reply = ProbeReply(result={"y": torch.arange(6, dtype=torch.float64).reshape(2, 3)},
                       error=None, forbidden_calls=[CaughtCall.of({"kind": "library", "name": "torch.nn"})])
    back = from_data(wire.decode(_body(to_data(reply))), ProbeReply)
    torch.testing.assert_close(back.result["y"], reply.result["y"], rtol=0, atol=0)
    assert back.forbidden_calls[0].kind is ForbiddenKind.LIBRARY
    assert back.answered


def _reply(**fields):
    return {"message": "reply", **fields}


@pytest.mark.parametrize("data, said", [
    (_reply(reslut=1.0), "no field 'reslut'"),  # a misspelt key
    (_reply(result=1.0, extra=True), "no field 'extra'"),
    (_reply(error={"type": "ValueError"}), "needs its field 'message'"),
    (_reply(error={"type": "ValueError", "message": "x", "cause": "exploded"}), "not a Cause"),
    (_reply(error={"type": "ValueError", "message": "x", "standard": 1}), "true or false"),
    (_reply(error={"type": "ValueError", "message": "x", "unpacked": "3"}), "an integer"),
    (_reply(error={"type": "ValueError", "message": "x", "unpacked": True}), "an integer"),
    (_reply(forbidden_calls={"kind": "op"}), "a list"),
    (_reply(forbidden_calls=[{"kind": "op", "nmae": "aten::gelu"}]), "no field 'nmae'"),
    (_reply(forbidden_calls=[{"kind": "no_such_rule"}]), "not a ForbiddenKind"),
    (_reply(crossed=[1]), "text"),
    (_reply(low_precision="aten.mm"), "a LowPrecision"),
    (_reply(error="it broke"), "a Failure"),
    ({"message": "ready", "certified": {"a": "b"}}, "a list"),
    ({"message": "task", "task": "gelu"}, "needs its field"),
    ({"message": "part", "arguments": {}}, "needs its field 'part'"),
    ({"message": "part", "part": "gelu", "arguments": {}, "wrt": ["0"]}, "an integer"),
    ({"message": "part_reply", "error": "it broke"}, "a Failure"),
    ({"message": "parts", "certified": {}, "regions": [{"task": "gelu"}]}, "needs its field"),
])
def test_a_message_off_its_shape_is_refused_where_it_is_read(data, said):
    with pytest.raises(MessageError, match=said.replace("(", r"\(")):
        from_data(data)


@pytest.mark.parametrize("data", [
    {"result": 1.0, "forbidden_calls": []},  # untagged: what a worker sent before messages were typed
    {"message": "no_such_kind"},
    {"message": 7},
    [1, 2, 3],
    None,
])
def test_what_names_no_known_kind_is_refused(data):
    with pytest.raises(MessageError):
        from_data(data)


def test_a_message_of_another_kind_than_the_one_awaited_is_refused():
    with pytest.raises(MessageError, match="where reply was expected"):
        from_data(to_data(Ready()), ProbeReply)
    assert from_data(to_data(Ready()), Ready, SetupFailed) == Ready()


def test_a_message_error_is_a_wire_error_so_the_worker_is_called_garbage():
    # grader/run/worker.py turns any WireError into WorkerStatus.GARBAGE: this keeps a
    # well-framed message of the wrong shape on that same path.
    assert issubclass(MessageError, WireError)


def test_every_message_kind_is_in_the_test():
    from grader.run.inside import messages

    assert {type(m) for m in EVERY_KIND} == set(messages.KINDS.values())
