"""The wire format: plain data in, plain data out, and nothing else accepted.

And what the code in a worker sends back, returned or written as frames of its own on
the worker's end of the wire (grader/run/inside/wire.py), fails the checks it touches:
never a point, never the grader's error, never code run in the grader."""

from __future__ import annotations

import base64
import json
import math
import socket
import struct
import threading
import time

import pytest
import torch

from grader.run.inside import wire
from grader.run.processes import Limits
from grader.run.report import results_json
from grader.run.results import PASSED, GradeReport
from tests.hostile import assert_no_points, checks_of, grade_one, hostile_sources, run, run_body, string_console
from tests.timing import limit


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


def test_a_trickling_peer_cannot_outlast_the_timeout():
    ours, theirs = socket.socketpair()

    def trickle():
        theirs.sendall(struct.pack(">Q", 1000))
        for _ in range(20):
            time.sleep(0.2)
            try:
                theirs.sendall(b" ")
            except OSError:
                return

    threading.Thread(target=trickle, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        wire.recv(ours, deadline=time.monotonic() + 1.0)
    assert time.monotonic() - started < 1.0 + limit(1.0)
    ours.close()
    theirs.close()


def test_unsendable_values_come_back_as_text():
    class Loud:
        def __repr__(self):
            raise RuntimeError("no")

    sparse = __import__("torch").eye(3).to_sparse()
    back = wire.decode(__import__("json").dumps(wire.encode({"a": Loud(), "s": sparse})).encode())
    assert "Loud" in repr(back["a"])
    assert back["s"].shape == (3, 3)


# ============================================ what the code in a worker sends back
# The code can return anything, and it can write frames of its own on the worker's end of
# the wire. Whatever it writes must fail the affected checks, never raise out of the
# engine (a crash there loses the whole submission's report, and in grade-class the whole
# class's gradebook), and never run in the grader.


# Module-level code a submission can carry: it finds the worker's end of the channel
# (the only SOCK_STREAM socket in the worker) and writes raw frames on it.
CHANNEL = '''
def _rt_channels():
    import os, socket, stat
    found = []
    for fd in range(3, 512):
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            sock = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        if sock.type == socket.SOCK_STREAM:
            found.append(sock)
        else:
            sock.close()
    return found


def _rt_send_raw(*bodies):
    import struct
    for sock in _rt_channels():
        for body in bodies:
            sock.sendall(struct.pack(">Q", len(body)) + body)
        sock.close()
'''


RIGHT_GELU = "return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))"


REPLY_FRAMES = {
    "list": b"[]",
    "number": b"0",
    "string": b'"passed"',
    "null": b"null",
    "forbidden_calls_not_a_list": b'{"result": null, "forbidden_calls": 5}',
    "error_not_a_dict": b'{"error": 5}',
    "error_message_not_text": b'{"error": {"type": "X", "message": 5, "not_implemented": true}}',
    "deeply_nested": b"[" * 100_000 + b"]" * 100_000,
}


@pytest.mark.parametrize("frame", list(REPLY_FRAMES))
def test_malformed_reply_frames_fail_only_that_check(reference, sandbox, frame):
    body = f"_rt_send_raw({REPLY_FRAMES[frame]!r})\n{RIGHT_GELU}"
    results = run(reference, sandbox, "gelu", body, append=CHANNEL)
    assert len(results) == len(checks_of("gelu"))
    assert results[0].status != PASSED


READY_FRAMES = {
    "number": b"0",
    "list": b"[]",
    "certified_not_a_list": b'{"ready": true, "certified": 5}',
}


@pytest.mark.parametrize("frame", list(READY_FRAMES))
def test_malformed_ready_frame_fails_only_that_task(reference, sandbox, frame):
    append = CHANNEL + f"\n_rt_send_raw({READY_FRAMES[frame]!r})\n"
    results = grade_one(reference, sandbox, "gelu", hostile_sources(reference, append=append))
    assert len(results) == len(checks_of("gelu"))
    assert_no_points(results)


def test_forged_certified_list_cannot_stop_the_json(reference, tmp_path, monkeypatch):
    import grader.run.sandbox
    from grader.__main__ import run_grading

    monkeypatch.setattr(grader.run.sandbox, "Limits", lambda **given: Limits(**{"check_seconds": limit(3.0), **given}))
    append = CHANNEL + '\n_rt_send_raw(b\'{"ready": true, "certified": [{"x": 1}]}\')\n'
    package = tmp_path / "upload" / "hero_transformer"
    package.mkdir(parents=True)
    for name, text in hostile_sources(reference, append=append).items():
        (package / name).write_text(text)
    out = tmp_path / "results.json"
    try:
        run_grading(str(package.parent), ["05"], False, str(out), string_console())
    finally:
        assert out.exists(), "no results.json was written"
    data = json.loads(out.read_text())
    assert data["score"] < data["extra_data"]["max_score"]


def test_forged_certified_names_are_not_echoed(reference, sandbox):
    append = CHANNEL + '\n_rt_send_raw(b\'{"ready": true, "certified": ["ALL CHECKS PASSED"]}\')\n'
    results = grade_one(reference, sandbox, "gelu", hostile_sources(reference, append=append))
    assert_no_points(results)
    data = results_json(GradeReport("hostile", results, sandbox.describe(), "reference"))
    assert "ALL CHECKS PASSED" not in json.dumps(data)


def test_a_thread_left_running_after_the_reply_cannot_answer_later_checks(reference, sandbox):
    # A thread that keeps writing "correct" frames after each reply only desynchronises
    # its own worker; the checks it lands on must not pass by it.
    body = """
        import threading, time
        def spam():
            for _ in range(200):
                try:
                    _rt_send_raw(b'{"result": {"y": null}, "forbidden_calls": []}')
                except OSError:
                    return
                time.sleep(0.002)
        threading.Thread(target=spam, daemon=True).start()
        raise NotImplementedError("gelu")
    """
    results = run(reference, sandbox, "gelu", body, append=CHANNEL)
    assert_no_points(results)


def test_exotic_return_values_come_back_as_plain_data(reference, sandbox):
    body = """
        class Sneaky(torch.Tensor):
            def __eq__(self, other):
                return True
        class Liar(float):
            def __float__(self):
                return 0.0
            def __eq__(self, other):
                return True
        class Box(dict):
            def __getitem__(self, key):
                return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
        import sys
        kind = sys.modules[__name__].__dict__.setdefault("_rt_count", [0])
        kind[0] += 1
        if kind[0] == 1:
            return (x * 0).as_subclass(Sneaky)
        if kind[0] == 2:
            return Liar(1.0)
        return Box()
    """
    results = run(reference, sandbox, "gelu", body)
    assert_no_points(results)


def test_a_huge_answer_fails_without_hurting_the_grader(reference, sandbox):
    """An answer over the wire's limits is the upload's failure, measured in the worker
    before it is encoded (within the upload's own time), never the grader's error."""
    body = """
        return torch.zeros(7 * 1024 * 1024, dtype=torch.float64)  # 56 MB, 75 MB of base64: over the frame limit
    """
    results = run(reference, sandbox, "gelu", body, only={"exact_values"})
    assert_no_points(results)
    assert results[0].status == "failed", results[0]
    assert "too large to send back" in results[0].diagnosis, results[0].diagnosis


def test_an_answer_of_millions_of_containers_is_the_uploads_failure(reference, sandbox):
    """The issue's case: four million lists in the answer. The worker stops counting at
    the wire's bound and says so; the grader never decodes it."""
    body = """
        return [[0.0] for _ in range(4_000_000)]
    """
    results = run(reference, sandbox, "gelu", body, only={"exact_values"})
    assert_no_points(results)
    assert results[0].status == "failed", results[0]
    assert "more than 200,000 lists" in results[0].diagnosis, results[0].diagnosis


@pytest.mark.parametrize("body", [
    "return [0.0] * 3_000_000  # one list, more items than the grader reads",
    "return 'x' * (20 * 1024 * 1024)  # one string, over the frame's bytes",
], ids=["millions_of_numbers", "a_20_MB_string"])
def test_an_answer_over_any_of_the_wires_limits_is_the_uploads_failure(reference, sandbox, body):
    """Whatever limit an answer breaks (items, bytes, not only containers and tensors), the
    worker finds it before it sends: the reader never meets a frame it would refuse, so
    the check fails as the upload's own, never as a malformed answer (the grader's error)."""
    results = run(reference, sandbox, "gelu", body, only={"exact_values"})
    assert_no_points(results)
    assert results[0].status == "failed", results[0]
    assert "too large to send back" in results[0].diagnosis, results[0].diagnosis


def test_every_sender_keeps_the_limits_every_reader_holds_it_to():
    ours, theirs = socket.socketpair()
    try:
        for value in ([[]] * (wire.MAX_CONTAINERS + 1), [0] * (wire.MAX_ITEMS + 2), "x" * wire.MAX_FRAME_BYTES):
            body = json.dumps(wire.encode(value)).encode()
            assert wire.over_limits(body)
            with pytest.raises(wire.WireError):
                wire.decode(body)
            for send in (wire.send, wire.bound_sender()):
                with pytest.raises(wire.OverLimits):
                    send(ours, value)
        theirs.setblocking(False)
        with pytest.raises(BlockingIOError):
            theirs.recv(1)  # nothing was sent
        wire.send(ours, [0.5] * 1000)
        theirs.setblocking(True)
        assert wire.bound_receiver()(theirs) == [0.5] * 1000
    finally:
        ours.close()
        theirs.close()


def test_a_number_past_the_floats_range_is_the_answers_fault(reference, sandbox):
    """Chapter 00's answers are plain Python: an int too large for a float (10 ** 400)
    makes a judge's float arithmetic raise. That is the answer's form, told to the student,
    never the course's check failing on an answer of the right form."""
    body = """
        other = other if isinstance(other, Value) else Value(other)
        out = Value(0.0, (self, other), (1.0, 1.0))
        out.data = 10 ** 400
        return out
    """
    results = run(reference, sandbox, "micro_value_add", body)
    assert_no_points(results)
    for result in results:
        assert result.status == "failed", (result.check.name, result.status, result.staff_diagnosis)
        assert "too large for a float" in result.staff_diagnosis, result.staff_diagnosis


def test_an_answer_cannot_pass_for_the_wires_own_objects():
    """A dict an answer holds is its own: one with a key the wire's objects are told by is
    named, not sent as it is; a tensor the reader cannot build is a malformed message (never
    torch's own error in the grader); an int of more digits than JSON writes is named."""
    forged = {"__tensor__": ["float64", [0, 2 ** 62, 2 ** 62], ""]}
    for key in wire.RESERVED_KEYS:
        sent = wire.decode(json.dumps(wire.encode(wire.plain({"y": {key: "x"}}))).encode())
        assert isinstance(sent["y"], wire.Opaque) and "reserve" in repr(sent["y"]), key
    from grader.run.forms import difference, form_of

    said = difference({"y": sent["y"]}, form_of({"y": 1.0}))
    assert "not plain data" in said and "Opaque" not in said, said  # the kit's words, no class of its own
    with pytest.raises(wire.WireError):
        wire.decode(json.dumps(forged).encode())
    with pytest.raises(wire.WireError):
        wire.decode(json.dumps({"__tensor__": ["float64", [2 ** 40] * 3, ""]}).encode())
    assert isinstance(wire.decode(json.dumps(wire.encode(wire.plain([10 ** 5000]))).encode())[0], wire.Opaque)
    ours, theirs = socket.socketpair()
    try:
        with pytest.raises(wire.OverLimits):
            wire.send(ours, [10 ** 5000])
    finally:
        ours.close()
        theirs.close()


# Answers of the declared form (a tensor with so many axes, a number) that a judge cannot
# read: the reference's own answer to the same inputs tells the answer's fault (a shape,
# NaN) from the check's.
JUDGES_CANNOT_READ = {
    "gelu_one_short": ("gelu", """
        y = 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
        return y if float(x.reshape(-1)[0]) < 0 else y[..., :-1]
    """, "has shape"),
    "embedding_of_nans": ("embedding", """
        return torch.full((*idx.shape, self.weight.shape[1]), float("nan"), dtype=self.weight.dtype)
    """, "NaN"),
}


@pytest.mark.parametrize("case", list(JUDGES_CANNOT_READ))
def test_an_answer_a_judge_cannot_read_is_the_answers_fault_where_the_reference_tells(reference, sandbox, case):
    task, body, said = JUDGES_CANNOT_READ[case]
    results = run(reference, sandbox, task, body)
    assert any(r.status != PASSED for r in results)
    told = [r for r in results if said in r.staff_diagnosis]
    assert told, [(r.check.name, r.status, r.staff_diagnosis[:200]) for r in results]
    for result in results:
        assert "report it to course staff" not in result.diagnosis, (result.check.name, result.staff_diagnosis)


def test_a_small_frame_cannot_blow_up_the_graders_memory(reference, sandbox):
    import tracemalloc

    body = """
        _rt_send_raw(b'{"forbidden_calls": [], "result": [' + b"[]," * 4_000_000 + b"[]]}")
        raise RuntimeError("sent")
    """
    tracemalloc.start()
    try:
        results = run(reference, sandbox, "gelu", body, append=CHANNEL, only={"exact_values"})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert_no_points(results)
    assert peak < 128 * 1024**2, f"a 12 MB reply cost the grader {peak / 1024**2:.0f} MB"


def test_unpicklable_output_never_runs_in_the_grader(reference, sandbox, tmp_path):
    marker = tmp_path / "pwned"
    body = f"""
        class Evil:
            def __reduce__(self):
                import os
                return (os.system, ("touch {marker}",))
        class Output(dict):
            pass
        return Evil()
    """
    results = run_body(reference, sandbox, "gelu", body)
    assert_no_points(results)
    assert not marker.exists()


def test_garbage_on_the_channel_fails_cleanly(reference, sandbox):
    body = """
        import os
        for fd in range(3, 64):
            try:
                os.write(fd, b"\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x05{{{{{")
            except OSError:
                pass
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    """
    results = run_body(reference, sandbox, "gelu", body)
    assert_no_points(results)
