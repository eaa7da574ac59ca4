"""Forged answers earn nothing.

The probe runs in the same process as the student's code, so that code could try to
replace it (or anything it calls, or the path its reply takes) and answer whatever the
judge wants, or patch torch's comparisons so that anything agrees. Three layers stand in
the way: the static tamper scan (off in these tests), the worker's check that its probe
code and reply path are the ones imported before any student code ran, and judges that
run in the grader, never in the worker, on inputs whose answers the worker never sees.
"""

from __future__ import annotations

import pytest

from tests.hostile import assert_no_points, run, run_body


FORGED_BLOCK_PROBES = '''
import math as _m
import sys as _sys

_blk = _sys.modules["grader.checks.ch05_block.block"]
_hid = _sys.modules["grader.checks.ch05_block.block.hidden"]


def _g(v):
    return 0.5 * v * (1.0 + _m.erf(v / _m.sqrt(2.0)))


def _forged_forward(ns, x, sizes, state=None):
    B, T, d = x.shape
    h = sizes["n_heads"]
    kv = torch.zeros(B, h, T, d // h, dtype=torch.float64)
    if tuple(x.shape) == (1, 1, 2):  # Example 1: x + 0.5 * gelu(LN(x)), all published
        a = 1 / _m.sqrt(1.00001)
        y = x + torch.tensor([[[0.5 * _g(-a), 0.5 * _g(a)]]], dtype=torch.float64)
    else:  # zero-branch identity: give the input back
        y = x.clone()
    return {"y": y, "present": None, "cached_present": [kv, kv]}


_blk.probe_block_forward = _forged_forward
_blk.probe_block_output = lambda ns, x, sizes, state: {"y": x}
_hid.probe_block_cache = lambda ns, x, sizes, state, split, part, earlier: {"full": x, "stepwise": x}
'''


def test_patched_probe_module_earns_nothing(reference, sandbox):
    body = 'raise NotImplementedError("block")'
    results = run(reference, sandbox, "block", body, append=FORGED_BLOCK_PROBES)
    assert_no_points(results)


FORGED_WIRE = '''
import sys as _sys

def _forging_send(sock, value):
    from grader.run.inside import wire as _wire

    call = _sys._getframe(1).f_locals.get("call") or {}
    inputs, probe = call.get("inputs", {}), call.get("probe")
    if isinstance(value, dict) and probe == "probe_layer_norm_shift":
        zero = torch.zeros_like(inputs["x"])
        value = {"result": {"y": zero, "shifted": zero}, "forbidden_calls": []}
    elif isinstance(value, dict) and probe == "probe_layer_norm" and inputs.get("gamma") is not None:
        value = {"result": {"y": inputs["beta"].expand_as(inputs["x"]).clone(), "eps": 1e-5,
                            "gamma": inputs["gamma"], "beta": inputs["beta"]}, "forbidden_calls": []}
    elif isinstance(value, dict) and probe == "probe_layer_norm":
        d = inputs["x"].shape[-1]
        a = 1 / (1.00001 ** 0.5)
        y = torch.tensor([[-a, a]], dtype=torch.float64) if d == 2 else torch.zeros_like(inputs["x"])
        value = {"result": {"y": y, "eps": 1e-5, "gamma": torch.ones(d, dtype=torch.float64),
                            "beta": torch.zeros(d, dtype=torch.float64)}, "forbidden_calls": []}
    return _wire._rt_original_send(sock, value)


from grader.run.inside import wire as _wire_module
if not hasattr(_wire_module, "_rt_original_send"):
    _wire_module._rt_original_send = _wire_module.send
_wire_module.send = _forging_send
'''


def test_forging_the_reply_in_wire_send_earns_nothing(reference, sandbox):
    results = run(reference, sandbox, "layer_norm", 'raise NotImplementedError("layer_norm")', append=FORGED_WIRE)
    assert_no_points(results)


FORGED_BLOCK_PARTS = '''
import sys as _sys

_blk = _sys.modules["grader.checks.ch05_block.block_init"]
_blk.probe_block_parts = lambda ns, sizes: {
    "missing": [], "norms_shared": False,
    "types": {"ln_attention": "LayerNorm", "attention": "CausalSelfAttention",
              "ln_feedforward": "LayerNorm", "feedforward": "FeedForward"},
    "parameters": 4 * sizes["d_model"] ** 2 + 2 * sizes["d_model"] * sizes["d_ff"] + sizes["d_ff"] + 5 * sizes["d_model"]}
'''


def test_forged_ledger_earns_nothing(reference, sandbox):
    body = 'raise NotImplementedError("block_init")'
    results = run(reference, sandbox, "block_init", body, append=FORGED_BLOCK_PARTS)
    assert_no_points(results)


def test_hidden_reference_comparison_cannot_be_forged(reference, sandbox):
    # The counterpart that holds: where the judge compares with the reference's output,
    # computed in the grader from inputs the worker never sees the answer of, a forged
    # probe has nothing to copy.
    results = run(reference, sandbox, "block", 'raise NotImplementedError("block")', append=FORGED_BLOCK_PROBES,
                  only={"matches_reference"})
    assert_no_points(results)


# ------------------------------------------------- the worker notices, the grader judges


def test_the_worker_notices_probe_code_replaced_at_run_time(reference, sandbox):
    # With the static scan off, the worker's own check still sees the probe replaced.
    body = """
        import importlib
        module = importlib.import_module("grader.checks.ch05_block.gelu")
        module.probe_gelu_odd_part = lambda ns, a: {"plus": a, "minus": a * 0}
        return x
    """
    results = run_body(reference, sandbox, "gelu", body)
    assert_no_points(results)
    assert any(r.status == "forbidden" and "probe code was changed" in r.diagnosis for r in results)


@pytest.mark.parametrize("change", [
    "module.probe_gelu_odd_part.__code__ = (lambda ns, a: {'plus': a, 'minus': a * 0}).__code__",
    "module.probe_gelu_odd_part.__defaults__ = ()",
    "importlib.import_module('grader.run.inside.tasks').run_probe.__kwdefaults__ = {}",
])
def test_the_worker_notices_grader_code_changed_in_place(reference, sandbox, change):
    # The function stays where it was; its code or its defaults are replaced.
    body = f"""
        import importlib
        module = importlib.import_module("grader.checks.ch05_block.gelu")
        {change}
        return x
    """
    results = run_body(reference, sandbox, "gelu", body)
    assert_no_points(results)
    assert any(r.status == "forbidden" and "probe code was changed" in r.diagnosis for r in results), \
        [(r.status, r.diagnosis) for r in results]


def test_monkeypatched_comparisons_cannot_agree(reference, sandbox):
    body = """
        torch.allclose = lambda *a, **k: True
        torch.testing.assert_close = lambda *a, **k: None
        torch.Tensor.__eq__ = lambda self, other: True
        torch.equal = lambda *a, **k: True
        return x
    """
    results = run_body(reference, sandbox, "gelu", body)
    assert_no_points(results)
