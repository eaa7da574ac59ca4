"""Certified parts that run apart (grader/run/inside/parts.py): a worker grading a task
holds none of the code of a part that runs apart, so the doors that no seal can close in
a process (a read of memory through ctypes, a signal handler handed the running frame,
gc.garbage under DEBUG_SAVEALL) find only the call across. Each door is shown to open
(it finds certified frames or code: the stubs) and to find no reference in them; the
same attacks find the reference where the parts stay in the worker. The crossing itself
is checked against torch's gradcheck, and its wire against what a forged call may ask.
(tests/test_certified_parts.py opens the same doors in the block's worker.)"""

from __future__ import annotations

import math
import textwrap

import pytest
import torch

from grader.checks import catalogue
from grader.mutants import apply, region_of
from grader.run.engine import grade_task
from grader.run.inside import parts
from grader.run.inside.messages import PartCall, PartReply, from_data, to_data
from grader.run.processes import Limits
from grader.run.reference import Reference
from grader.run.results import FAILED, PASSED, TIMEOUT
from grader.run.sandbox import Sandbox, bwrap_works
from grader.run.submission import Submission
from grader.run.worker_session import Grading, holdings_of, runs_apart
from tests.hostile import gc_garbage_attack, signal_handler_attack

sandboxed = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap is not usable on this machine")

# What the reference's code of the parts the residual backward holds names, and a stub's
# code never does: a door that hands out one of these handed out the reference.
REFERENCE_NAMES = {"sqrt", "mean", "erf", "exp", "reshape", "sum", "centred", "inv_std", "normalised", "dgamma",
                   "variance", "flat_grad", "cdf", "pdf"}


@pytest.fixture(scope="module")
def box():
    from tests.timing import limit

    with Sandbox(Limits(check_seconds=limit(20.0), memory_bytes=3 * 1024**3)) as sandbox:
        yield sandbox


def graded(reference, box, task_name: str, attack: str, seed: int = 11):
    task = catalogue.tasks()[task_name]
    _, body = region_of(reference.sources, task_name)
    sources = apply(reference.sources, task.module, task_name, textwrap.dedent(attack) + body)
    checks = [c for c in catalogue.chapter_of_task()[task_name].checks if c.task == task_name]
    return grade_task(task, checks, Grading(Submission("attack", sources), reference, box, seed=seed),
                      scan_for_tampering=False)


def all_points(results):
    assert results and all(r.status == PASSED for r in results), \
        [(r.check.name, r.status, r.staff_diagnosis or r.diagnosis) for r in results if r.status != PASSED]


def test_no_worker_holds_reference_code():
    """Every part runs apart, chapter 00's Value operations too (their Values cross node by
    node); a part that reaches the graded task calls it back instead of being kept in the
    worker."""
    for name, task in catalogue.tasks().items():
        held, _ = holdings_of([task])
        assert runs_apart(held) == held, (name, sorted(held - runs_apart(held)))
    for task in ("split_heads", "merge_heads", "train_loop", "residual_backward", "feedforward", "block",
                 "lm_forward", "evaluate", "generate", "micro_loss", "micro_value_add", "micro_sample"):
        held, _ = holdings_of([catalogue.tasks()[task]])
        assert held, task


def test_a_part_that_reaches_the_graded_task_calls_it_back(reference, box):
    """split_heads' worker holds attention's forward apart; run there, that forward
    reaches split_heads, which the parts' process does not hold: it calls the worker
    back, whose code of split_heads (the upload's) answers. So attention's checks, run in
    that worker, pass on the reference's split_heads and fail on a wrong one, with the
    wrong one's own mistake named."""
    task = catalogue.tasks()["split_heads"]
    checks = [c for c in catalogue.chapter_of_task()["attention"].checks if c.task == "attention" and not c.hidden]

    def graded_with(split_heads_body):
        sources = apply(reference.sources, task.module, "split_heads", split_heads_body)
        return grade_task(task, checks, Grading(Submission("calls back", sources), reference, box, seed=5),
                          scan_for_tampering=False)

    _, right = region_of(reference.sources, "split_heads")
    all_points(graded_with(right))
    wrong = graded_with("B, T, _ = x.shape\nreturn x.reshape(B, self.n_heads, T, self.d_head)\n")
    assert any(r.status != PASSED for r in wrong), [(r.check.name, r.status) for r in wrong]
    assert all(r.status in (PASSED, FAILED) for r in wrong), [(r.check.name, r.status, r.diagnosis) for r in wrong]


# ctypes reads a function's code pointer at its fixed offset, with no audit event: every
# certified function of the worker is read so.
READ_THROUGH_CTYPES = '''
import sys as _rt_sys
_rt_ct = getattr(_rt_sys, "mod" + "ules")["ct" + "ypes"]
_rt_mod = _rt_sys.modules[layer_norm_backward.__module__]
_rt_found = []
for _rt_fn in (layer_norm_backward, gelu_backward, linear_backward, gelu, LayerNorm.__dict__["forward"]):
    _rt_at = _rt_ct.cast(id(_rt_fn) + 6 * 8, _rt_ct.POINTER(_rt_ct.c_void_p))[0]  # PyFunctionObject.func_code
    _rt_code = _rt_ct.cast(_rt_at, _rt_ct.py_object).value
    if str(getattr(_rt_code, "co_filename", "")).startswith("certified/"):
        _rt_found.append(_rt_code)
if len(_rt_found) != 5:
    raise KeyError("the door did not open: %d certified functions read" % len(_rt_found))
_rt_seen = sorted({_rt_n for _rt_c in _rt_found for _rt_n in _rt_c.co_names + _rt_c.co_varnames} & REFERENCE_NAMES)
if _rt_seen:
    raise KeyError("ctypes read the reference's code: " + ",".join(_rt_seen))
'''


@sandboxed
def test_ctypes_reads_no_reference_code_of_parts_that_run_apart(reference, box):
    attack = f"REFERENCE_NAMES = set({sorted(REFERENCE_NAMES)!r})\n" + READ_THROUGH_CTYPES
    all_points(graded(reference, box, "residual_backward", attack))


# A real-time timer lands while the worker waits in the calls across: the handler is
# handed the frames there, the stubs' among them.
READ_THROUGH_A_SIGNAL = signal_handler_attack("""
for _ in range(40):
    layer_norm_backward(grad_out, x, gamma, eps)
    _layer_norm(x, gamma, beta, eps)
""", leaked="_rt_seen & REFERENCE_NAMES")


@sandboxed
def test_a_signal_handler_finds_no_reference_frame_of_parts_that_run_apart(reference, box):
    attack = f"REFERENCE_NAMES = set({sorted(REFERENCE_NAMES)!r})\n" + READ_THROUGH_A_SIGNAL
    all_points(graded(reference, box, "residual_backward", attack))


# Under gc.DEBUG_SAVEALL a traceback through a part, made into a cycle, leaves its frames
# in gc.garbage. A gamma one too long: the part's frame holds its normalised rows by then.
READ_THROUGH_GC_GARBAGE = gc_garbage_attack(
    "layer_norm_backward(grad_out, x, torch.ones(x.shape[-1] + 1, dtype=x.dtype), eps)",
    leaked="_rt_seen & REFERENCE_NAMES")


@sandboxed
def test_gc_garbage_holds_no_reference_frame_of_parts_that_run_apart(reference, box):
    attack = f"REFERENCE_NAMES = set({sorted(REFERENCE_NAMES)!r})\n" + READ_THROUGH_GC_GARBAGE
    all_points(graded(reference, box, "residual_backward", attack))


@sandboxed
def test_a_wrong_task_built_on_parts_apart_still_fails(reference, box):
    """The crossing changes nothing of a verdict: a feed-forward without its GELU fails."""
    results = graded(reference, box, "feedforward", "return self.fc2(self.fc1(x))\n")
    assert any(r.status != PASSED for r in results)


# ------------------------------------------------------------ the crossing itself


@pytest.fixture()
def line_to_the_reference(reference, monkeypatch):
    """parts.LINE served in this process by the parts' process's own answer, on the
    reference's regions as that process receives them (every pure-enough part, here under
    a package name of the test's own), each message through the wire's encoder and decoder."""
    import importlib
    import sys

    from grader.run.inside import tasks, wire
    from grader.run.inside.tasks import describe

    apart = frozenset(t.name for t in catalogue.tasks().values() if t.crosses)
    package = "_parts_apart_test"
    finder = tasks.SourcePackage(package, dict(reference.parts_apart(apart)), "certified")
    sys.meta_path.insert(0, finder)
    try:
        modules = {rel[:-3]: importlib.import_module(f"{package}.{rel[:-3]}")
                   for rel in reference.sources if rel != "__init__.py" and "/" not in rel}
    finally:
        sys.meta_path.remove(finder)
    where = {t.name: t.module for t in catalogue.tasks().values()}
    pending = []

    def through_the_wire(data):
        return wire.decode(wire.json.dumps(wire.encode(data)).encode())

    # The parts' process's own random state: it is a process of its own.
    held_there = [torch.Generator().manual_seed(99).get_state()]

    def send(_channel, data):
        call = from_data(through_the_wire(data), PartCall)
        held_here = torch.get_rng_state()
        torch.set_rng_state(held_there[0])
        try:
            pending.append(to_data(parts.answer(call, modules, where)))
        except Exception as error:  # noqa: BLE001
            pending.append(to_data(PartReply(error=describe(error))))
        finally:
            held_there[0] = torch.get_rng_state()
            torch.set_rng_state(held_here)

    def recv(_channel):
        return through_the_wire(pending.pop())

    # The reference's objects stand for the student's here: packed as the package's own.
    monkeypatch.setattr(parts, "STUDENT_PACKAGE", "_reference_hero_transformer")
    monkeypatch.setattr(parts, "CERTIFIED_PACKAGE", package)  # (its Values are chapter 00's there)
    monkeypatch.setattr(parts, "_VALUE_LINEAGES", {})
    before = list(parts.LINE)
    parts.LINE[:] = [None, send, recv, from_data, lambda message: to_data(message)]
    yield
    parts.LINE[:] = before
    for name in [n for n in sys.modules if n.startswith(package)]:
        del sys.modules[name]


def test_a_part_called_across_has_autograd_s_gradient(line_to_the_reference):
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: parts.call_part("gelu", {"x": t}), (x,))


def test_a_method_called_across_has_the_gradient_of_its_object_s_parameters(line_to_the_reference, reference):
    norm = reference.modules.model.LayerNorm(5).double()
    with torch.no_grad():
        norm.weight.copy_(torch.randn(5, dtype=torch.float64))
        norm.bias.copy_(torch.randn(5, dtype=torch.float64))
    x = torch.randn(2, 3, 5, dtype=torch.float64, requires_grad=True)

    def across(t, weight, bias):
        norm.weight, norm.bias = weight, bias
        return parts.call_part("layer_norm", {"self": norm, "x": t})

    weight = torch.nn.Parameter(norm.weight.detach().clone())
    bias = torch.nn.Parameter(norm.bias.detach().clone())
    assert torch.autograd.gradcheck(across, (x, weight, bias))
    torch.testing.assert_close(across(x, weight, bias), norm.forward(x), rtol=0, atol=0)


def test_a_tensor_sent_once_is_kept_until_it_changes_however_it_changes(line_to_the_reference):
    """Within a probe the parts' process keeps what it was sent; a tensor changed since,
    in place or through .data (which leaves its version alone), is sent anew."""
    x = torch.randn(4, 5, dtype=torch.float64)
    sent = []
    send = parts.LINE[1]
    parts.LINE[1] = lambda channel, data: sent.append(data) or send(channel, data)
    parts.forget()
    first = parts.call_part("gelu", {"x": x})
    again = parts.call_part("gelu", {"x": x})
    x.data.add_(1.0)
    moved = parts.call_part("gelu", {"x": x})
    reference = torch.nn.functional.gelu
    torch.testing.assert_close(first, again, rtol=0, atol=0)
    torch.testing.assert_close(moved, reference(x), rtol=1e-12, atol=1e-12)
    kept = ["kept" in data["arguments"]["__dict__"][0][1] for data in sent]
    assert kept == [False, True, False]


def _forward_across(model, idx):
    return parts.call_part("lm_forward", {"self": model, "idx": idx, "targets": None, "past_key_values": None,
                                          "use_cache": False})


def _counted(sent: list, tag: str) -> int:
    import json

    return json.dumps(sent[-1]["arguments"], default=lambda value: None).count(tag)


def test_an_object_sent_once_is_named_by_key_until_anything_in_it_changes(line_to_the_reference, reference):
    """Within a probe the parts' process keeps the objects it rebuilt too: one that packs
    exactly as when it was kept is named by its key, its state neither sent nor rebuilt.
    A change anywhere in it (a parameter through .data, a setting, a submodule swapped, a
    mode) is sent, and the part computes on what the worker holds now."""
    torch.manual_seed(3)
    model_module = reference.modules.model
    model = model_module.TransformerLM(model_module.Config(vocab_size=7, block_size=6, d_model=8, n_heads=2,
                                                           n_layers=2, d_ff=16, dropout=0.0)).double().eval()
    idx = torch.tensor([[1, 2, 3], [4, 5, 6]])
    sent = []
    send = parts.LINE[1]
    parts.LINE[1] = lambda channel, data: sent.append(data) or send(channel, data)
    parts.forget()

    def same_as_here():
        across = _forward_across(model, idx)
        with torch.no_grad():
            here = model_module.TransformerLM.forward(model, idx)
        torch.testing.assert_close(across[0], here[0], rtol=0, atol=0)

    for _ in range(3):
        same_as_here()
    whole, named = _counted(sent, parts.OBJECT) + _counted(sent, parts.MODULE), _counted(sent, parts.KEPT_OBJECT)
    assert named >= 20 and whole <= 8, (whole, named)  # only what a forward sets (last_attention) anew
    changes = [lambda: model.head.weight.data.mul_(2.0),
               lambda: setattr(model.ln_final, "eps", 0.5),
               lambda: setattr(model.blocks[1], "ln_feedforward", model_module.LayerNorm(8).double()),
               lambda: model.blocks[0].feedforward.train()]
    for change in changes:
        change()
        same_as_here()
        same_as_here()
    assert _counted(sent, parts.KEPT_OBJECT) >= 20


def test_a_value_met_earlier_in_the_call_is_never_hidden_in_a_kept_object(line_to_the_reference, reference):
    """An object that names a value the call sent earlier (the same tensor given twice) is
    sent whole, so the part sees that value as it is now, however it changed."""
    norm = reference.modules.model.LayerNorm(5).double()
    shared = torch.nn.Parameter(torch.randn(5, dtype=torch.float64))
    norm.weight = shared
    parts.forget()
    for _ in range(3):
        shared.data.mul_(-1.5)
        across = parts.call_part("layer_norm", {"x": shared, "self": norm})
        with torch.no_grad():
            torch.testing.assert_close(across, norm.forward(shared), rtol=0, atol=0)


def test_a_part_draws_from_the_worker_s_random_state_however_it_moved(line_to_the_reference, reference):
    """torch's random state goes across only where it is not already there: the part draws
    exactly what it would draw in the worker, call after call, after a reseed, and after
    a gradient's run, which starts from an earlier state there."""
    model_module = reference.modules.model
    model = model_module.TransformerLM(model_module.Config(vocab_size=7, block_size=6, d_model=8, n_heads=2,
                                                           n_layers=1, d_ff=16, dropout=0.5)).double().train()
    idx = torch.tensor([[1, 2, 3]])
    parts.forget()

    def draws(run):
        torch.manual_seed(5)
        first, second = run(), run()
        first.sum().backward()  # across, the part runs again from the first call's state
        third = run()
        torch.manual_seed(5)
        return [value.detach() for value in (first, second, third, run(), torch.rand(1))]

    across = draws(lambda: _forward_across(model, idx)[0])
    here = draws(lambda: model_module.TransformerLM.forward(model, idx)[0])
    for a, b in zip(across, here):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert not torch.equal(across[0], across[1])  # the dropout drew anew


def _two_adamws(reference):
    torch.manual_seed(0)
    weight = torch.nn.Parameter(torch.randn(3, 4, dtype=torch.float64))
    twin = torch.nn.Parameter(weight.detach().clone())
    AdamW = reference.modules.train.AdamW
    return weight, twin, AdamW([weight], lr=0.1), AdamW([twin], lr=0.1)


def test_an_object_the_part_changed_is_never_named_by_a_key_of_before(line_to_the_reference, reference):
    """The parts' process keeps an object as the part left it. Set back in the worker to
    what it was when kept (a step count rewound, the same gradient tensor given again
    after zero_grad), it must still be sent: the part computes on what the worker holds."""
    weight, twin, mine, theirs = _two_adamws(reference)
    gradient = torch.full_like(weight, 0.5)
    parts.forget()
    for rewind in (False, True):
        weight.grad, twin.grad = gradient, gradient.clone()
        for _ in range(2):
            with torch.no_grad():
                parts.call_part("adamw_step", {"self": mine})
            theirs.step()
        if rewind:
            mine.steps, theirs.steps = [1], [1]
        parts.call_part("adamw_zero_grad", {"self": mine})
        theirs.zero_grad()
    weight.grad, twin.grad = gradient, gradient.clone()
    with torch.no_grad():
        parts.call_part("adamw_step", {"self": mine})
    theirs.step()
    assert mine.steps == theirs.steps, (mine.steps, theirs.steps)
    torch.testing.assert_close(weight, twin, rtol=0, atol=0)
    torch.testing.assert_close(mine.exp_avg_sq[0], theirs.exp_avg_sq[0], rtol=0, atol=0)


def test_a_view_the_part_returns_is_a_view_here_too(line_to_the_reference, reference):
    """split_heads returns a transposed view of its input: across, the answer is that view
    of the worker's own tensor (same storage, same strides), so code that reads strides
    (.view() on it raises) meets what it would meet in the worker, and autograd sees
    through it."""
    attention = reference.modules.model.CausalSelfAttention(reference.modules.model.Config(
        vocab_size=5, block_size=8, d_model=8, n_heads=2, n_layers=1, d_ff=16)).double()
    x = torch.randn(2, 3, 8, dtype=torch.float64, requires_grad=True)
    heads = parts.call_part("split_heads", {"self": attention, "x": x})
    expected = attention.split_heads(x)
    assert heads.stride() == expected.stride() and not heads.is_contiguous()
    assert heads.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    torch.testing.assert_close(heads, expected, rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        heads.view(2, 3, 8)
    heads.sum().backward()
    torch.testing.assert_close(x.grad, torch.ones_like(x))


def test_what_a_part_changes_is_changed_here(line_to_the_reference, reference):
    """AdamW's step changes the parameters, its moments and its step counts in place, and
    zero_grad clears the gradients: across, the worker's own objects change so."""
    model = reference.modules
    weight = torch.nn.Parameter(torch.randn(3, 4, dtype=torch.float64))
    twin = torch.nn.Parameter(weight.detach().clone())
    mine, theirs = model.train.AdamW([weight], lr=0.1), model.train.AdamW([twin], lr=0.1)
    for _ in range(2):
        for p in (weight, twin):
            p.grad = torch.full_like(p, 0.5)
        with torch.no_grad():  # as the step's stub is: @torch.no_grad() stays on the method in the worker
            parts.call_part("adamw_step", {"self": mine})
        theirs.step()
    torch.testing.assert_close(weight, twin, rtol=0, atol=0)
    torch.testing.assert_close(mine.exp_avg[0], theirs.exp_avg[0], rtol=0, atol=0)
    assert mine.steps == theirs.steps == [2] and mine.params[0] is weight
    parts.call_part("adamw_zero_grad", {"self": mine})
    assert weight.grad is None


def test_a_part_s_failure_is_raised_as_its_standard_class(line_to_the_reference, reference):
    embedding = reference.modules.model.TokenEmbedding(4, 3)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        parts.call_part("embedding", {"self": embedding, "idx": torch.tensor([[7]])})


def test_an_argument_that_cannot_cross_is_named(line_to_the_reference):
    with pytest.raises(TypeError, match="cannot be given a function"):
        parts.call_part("gelu", {"x": lambda: 3})


def test_packing_keeps_tuples_dicts_dtypes_and_what_is_shared():
    from grader.run.inside import wire

    shared = torch.arange(3)
    value = {"a": (1, 2.5, None), 3: [torch.float32, "s"], "t": shared, "again": [shared]}
    packer = parts.Packer()
    data = wire.decode(wire.json.dumps(wire.encode(parts.Packer.pack(packer, value))).encode())
    back = parts.Unpacker({}).unpack(data)
    assert back["a"] == (1, 2.5, None) and back[3] == [torch.float32, "s"] and torch.equal(back["t"], shared)
    assert back["again"][0] is back["t"] and len(packer.tensors) == 1


def test_a_call_of_a_part_the_task_does_not_hold_is_refused():
    from grader.run.worker import PartsApart

    apart = PartsApart({"gelu": frozenset({"feedforward"})}, start=lambda: None)
    assert apart.may_call("gelu", None) and apart.may_call("gelu", "feedforward")
    assert not apart.may_call("gelu", "block_init") and not apart.may_call("layer_norm", None)


def test_the_worker_receives_no_code_of_a_part_that_runs_apart():
    """What the grader sends the feed-forward's worker: the GELU's guard and its call
    across, compiled; nothing of the reference's GELU."""
    import marshal

    from grader.run.inside import wire

    reference = Reference.available()
    held, guards = holdings_of([catalogue.tasks()["feedforward"]])
    sent = reference.compiled_for(held, guards, runs_apart(held))
    code = marshal.loads(wire.base64.b64decode(sent["model.py"][len(wire.COMPILED):]))
    gelu = next(c for c in code.co_consts if getattr(c, "co_name", "") == "gelu")
    assert "erf" not in gelu.co_names and parts.CALL_ACROSS in gelu.co_names
    whole = reference.compiled_for(held, guards)
    gelu_whole = next(c for c in marshal.loads(wire.base64.b64decode(whole["model.py"][len(wire.COMPILED):])).co_consts
                      if getattr(c, "co_name", "") == "gelu")
    assert "erf" in gelu_whole.co_names  # the same read finds the reference where the part runs in the worker


@pytest.mark.parametrize("forged", [
    {"__torch_module__": [0, "torch.nn.modules.linear", "F", {}]},  # a module, not a class
    {"__torch_module__": [0, "torch.nn.modules.linear", "torch.Tensor", {}]},  # reached through an import
    {"__torch_module__": [0, "torch.nn.modules.linear", "Identity", {"attributes": {"__class__": 1}}]},
    {"__torch_module__": [0, "torch.nn.modules.linear", "Identity", {"modules": {"inner": 3}}]},
    {"__torch_module__": [0, "torch.nn.modules.linear", "Identity", {"parameters": {"a.b": None}}]},
    {"__torch_module__": [0, "os", "system", {}]},
    {"__object__": [0, [], {}]},
    {"__object__": [0, [["model", "LayerNorm"]], {"attributes": {"__class__": 1}}]},
])
def test_a_forged_object_is_refused_where_it_is_rebuilt(forged, reference):
    """What the parts' process rebuilds from a message is a class of the package's own
    module or an nn.Module of torch.nn's, with plain attributes: nothing a forged message
    names reaches further."""
    from grader.run.inside import wire

    with pytest.raises(wire.WireError):
        parts.Unpacker({"model": reference.modules.model}).unpack(forged)


@pytest.mark.parametrize("lineage", [[["model", "Config.__init__"]], [["model", "_init_weights"]],
                                     [["model", "nn"]], [["os", "system"]]])
def test_a_class_the_parts_process_lacks_is_a_stand_in_that_holds_the_state(lineage, reference):
    """A class of the code's own (a helper object a module keeps), or a name a forged
    message makes up: an object that holds the state, of no class the message named."""
    made = parts.Unpacker({"model": reference.modules.model}).unpack(
        {"__object__": [0, lineage, {"attributes": {"size": 3}}]})
    assert type(made).__name__ == "_Kept" and made.size == 3


def test_a_class_of_the_code_s_own_is_rebuilt_as_the_course_s_it_derives_from(line_to_the_reference, reference):
    """A LayerNorm subclass of the student's own is a LayerNorm across: the part runs."""
    class MyLayerNorm(reference.modules.model.LayerNorm):
        pass

    MyLayerNorm.__module__ = "_reference_hero_transformer.model"
    norm = MyLayerNorm(4).double()
    norm.helper = type("Helper", (), {"__module__": "_reference_hero_transformer.model"})()
    x = torch.randn(2, 4, dtype=torch.float64)
    torch.testing.assert_close(parts.call_part("layer_norm", {"self": norm, "x": x}), norm.forward(x),
                               rtol=0, atol=0)


@sandboxed
def test_a_loop_of_calls_across_is_a_timeout(reference):
    """What a part computes for the code counts as the code's own processor time: a loop of
    calls across runs out of it as a loop of its own would, and is a timeout, never the
    grader's failure."""
    from tests.timing import limit

    body = """
        y = None
        while True:
            y = gelu(self.fc1(x))
        return self.fc2(y)
    """
    task = catalogue.tasks()["feedforward"]
    sources = apply(reference.sources, task.module, task.name, textwrap.dedent(body))
    checks = [c for c in catalogue.chapter_of_task()["feedforward"].checks if c.task == "feedforward"][:1]
    with Sandbox(Limits(check_seconds=limit(2.0))) as box:
        results = grade_task(task, checks, Grading(Submission("loop", sources), reference, box, seed=3),
                             scan_for_tampering=False)
    assert [r.status for r in results] == ["timeout"], [(r.status, r.staff_diagnosis) for r in results]


SPINS = "while True:\n    pass\n"
# split_heads' code that builds attentions for ever, each __init__ a call across.
BUILDS_ATTENTIONS_FOR_EVER = """
import sys
model = sys.modules[type(self).__module__]
config = model.Config(vocab_size=5, block_size=8, d_model=8, n_heads=2, n_layers=1, d_ff=16)
while True:
    model.CausalSelfAttention(config)
"""


@pytest.mark.parametrize("graded, checked, body", [("split_heads", "attention", SPINS),
                                                   ("split_heads", "attention", BUILDS_ATTENTIONS_FOR_EVER),
                                                   ("micro_block", "micro_block", SPINS)],
                         ids=["spins", "calls_across_for_ever", "chapter_00_spins"])
def test_code_that_never_ends_while_answering_a_call_back_is_a_timeout_of_its_own(reference, graded, checked, body):
    """A call back runs the worker's code under the probe's rules and limit, and the call
    back with every call across its code makes is one conversation within the probe's
    processor time: a split_heads that never returns, reached from attention's forward in
    the parts' process (or chapter 00's block, from MicroGPT.forward there), is the check's
    timeout, said as the code's own, never the course's part's or the grader's."""
    from tests.timing import limit

    task = catalogue.tasks()[graded]
    sources = apply(reference.sources, task.module, task.name, body)
    checks = [c for c in catalogue.chapter_of_task()[checked].checks if c.task == checked][:1]
    with Sandbox(Limits(check_seconds=limit(2.0))) as box:
        results = grade_task(task, checks, Grading(Submission("never ends", sources), reference, box, seed=3),
                             scan_for_tampering=False)
    assert [r.status for r in results] == [TIMEOUT], [(r.status, r.staff_diagnosis) for r in results]
    said = results[0].staff_diagnosis or results[0].diagnosis or ""
    assert "the course's" not in said and "regrade" not in said, said


def test_only_a_part_the_kit_routed_wrong_is_the_kit_s_failure(reference):
    """In the parts' process, a task the worker runs as the code's own is a call back (chapter
    00's Value operations too, reached from a part given the code's Values); only a task
    called back that could not be is the kit's routing (HeroPartNotHeld, "regrade")."""
    from grader.run.reference import _regions_as_functions
    from grader.run.worker_session import called_back

    held = frozenset({"gelu", "layer_norm"})
    micro = _regions_as_functions(reference.sources["micro.py"], "micro.py", held, called_back(held))
    assert '__hero_part__("micro_value_mul", {\'self\': self, \'other\': other})' in micro
    text = _regions_as_functions(reference.sources["model.py"], "model.py", frozenset(), frozenset({"gelu"}))
    assert '__hero_part__("gelu"' in text and parts.NOT_HELD not in text.split(f"class {parts.NOT_HELD}")[0]


# ---------------------------------------------------------- chapter 00's Values


def _value_ops(micro, monkeypatch, sent: "list | None" = None):
    """The reference's Value with its operations and backward called across, as a worker's
    stubs call them (grader/run/reference.py, _called_across); `sent` collects each call."""
    Value = micro.Value
    if sent is not None:
        send = parts.LINE[1]
        parts.LINE[1] = lambda channel, data: sent.append(data) or send(channel, data)
    for name, task in (("__add__", "micro_value_add"), ("__mul__", "micro_value_mul")):
        monkeypatch.setattr(Value, name, lambda self, other, task=task: parts.call_part(
            task, {"self": self, "other": Value.lift(other)}, "numbers"))
    monkeypatch.setattr(Value, "__pow__", lambda self, k: parts.call_part(
        "micro_value_pow", {"self": self, "exponent": k}, "numbers"))
    for name in ("exp", "log", "relu"):
        monkeypatch.setattr(Value, name, lambda self, name=name: parts.call_part(
            f"micro_value_{name}", {"self": self}, "numbers"))
    monkeypatch.setattr(Value, "backward", lambda self: parts.call_part("micro_backward", {"self": self}, "graph"))
    return Value


def _graph(Value, leaves, depth: int):
    """A graph that reuses nodes and runs `depth` deep (deeper than Python's recursion limit)."""
    a, b, c = leaves
    x = (a * b + a.exp()) * c.relu() - (b ** 2).log() / a
    for step in range(depth):
        x = x * 0.999 + a * (0.001 if step % 2 else -0.001)
    return x


def test_backward_across_fills_every_grad_of_a_deep_graph_as_the_reference_does(line_to_the_reference, reference,
                                                                                monkeypatch):
    """Values cross node by node: a graph 1,500 deep built by operations called across, then
    its backward called across (every node goes with it), gives the data and grads the
    reference gives in one process, leaves used twice included."""
    micro = reference.modules.micro
    here = [micro.Value(x) for x in (0.7, -1.3, 2.1)]
    expected = _graph(micro.Value, here, 1500)
    expected.backward()
    parts.forget()
    Value = _value_ops(micro, monkeypatch)
    there = [Value(x) for x in (0.7, -1.3, 2.1)]
    crossed = _graph(Value, there, 1500)
    crossed.backward()
    assert type(crossed) is Value and crossed.data == pytest.approx(expected.data, rel=1e-12)
    assert [v.grad for v in there] == pytest.approx([v.grad for v in here], rel=1e-9)
    assert crossed._children[0]._children[0]._children[0] is not None  # the graph is the worker's own


def test_a_value_changed_here_is_changed_there_and_a_step_s_grads_come_back(line_to_the_reference, reference,
                                                                             monkeypatch):
    """What code changes of a Value kept by the parts' process (Adam's data, a zero grad) is
    sent with it; what backward changes there is changed here."""
    micro = reference.modules.micro
    parts.forget()
    Value = _value_ops(micro, monkeypatch)
    w = Value(0.5)
    loss = (w * 3.0) ** 2
    loss.backward()
    assert w.grad == pytest.approx(2 * 1.5 * 3.0)
    w.data, w.grad = -2.0, 0.0  # a step, and zero_grad, here only
    loss = (w * 3.0) ** 2
    loss.backward()
    assert loss.data == pytest.approx(36.0) and w.grad == pytest.approx(2 * -6.0 * 3.0)


def test_the_same_numbers_asked_again_are_answered_here_with_the_new_values(line_to_the_reference, reference,
                                                                             monkeypatch):
    """A part whose answer depends on numbers only (Task.numbers_only) is called once per
    probe for the same numbers: asked again, its answer is made here, on the Values given
    now; other numbers, or -0.0 for 0.0, are asked anew."""
    micro = reference.modules.micro
    parts.forget()
    sent = []
    Value = _value_ops(micro, monkeypatch, sent)
    a, b = Value(1.5), Value(-2.0)
    first = a * b
    c, d = Value(1.5), Value(-2.0)
    again = c * d
    assert len(sent) == 1
    assert again is not first and again._children == (c, d) and again.data == -3.0
    assert again._local_grads == first._local_grads == (-2.0, 1.5)
    other = Value(1.5) * Value(-2.5)
    zero = Value(0.0) * Value(1.0), Value(-0.0) * Value(1.0)
    assert len(sent) == 4 and other.data == -3.75
    assert [math.copysign(1.0, z.data) for z in zero] == [1.0, -1.0]
    again.backward()
    assert (c.grad, d.grad) == (-2.0, 1.5) and a.grad == 0.0


def test_a_model_s_tables_are_sent_once_and_its_forward_across_matches_the_reference(line_to_the_reference,
                                                                                    reference, monkeypatch):
    """MicroGPT's forward across, position after position: its tables are sent once and named
    by key after (a parameter changed here is sent again), the cache it appends to comes back,
    and the logits are the reference's."""
    micro = reference.modules.micro
    expected_model = micro.MicroGPT(7, n_embd=8, n_head=2, block_size=4, seed=3)
    expected_model.start_sequence()
    expected = [[v.data for v in expected_model.forward(t, pos)] for pos, t in enumerate((6, 2, 4))]
    parts.forget()
    sent = []
    _value_ops(micro, monkeypatch, sent)
    model = micro.MicroGPT(7, n_embd=8, n_head=2, block_size=4, seed=3)
    model.start_sequence()
    crossed = []
    for pos, t in enumerate((6, 2, 4)):
        sent.clear()
        crossed.append([v.data for v in parts.call_part("micro_forward", {"self": model, "token_id": t, "pos": pos})])
        # (912 parameters: every one sent at first, none after; the cache's few Values are.)
        assert (_counted(sent, parts.VALUE) >= 912) == (pos == 0), (pos, _counted(sent, parts.VALUE))
    assert crossed == [pytest.approx(row, rel=1e-12) for row in expected]
    assert model.cache_length() == 3 and len(model.cache[0]["keys"]) == 3
    model.state["wte"][0][0].data += 1.0  # a table changed here: sent again, what changed of it
    model.start_sequence()
    sent.clear()
    parts.call_part("micro_forward", {"self": model, "token_id": 0, "pos": 0})
    assert 0 < _counted(sent, parts.VALUE) < 100


def _names_loss(micro, model, ids, forward, softmax):
    model.start_sequence()
    losses = [-softmax(forward(model, ids[pos], pos))[ids[pos + 1]].log() for pos in range(len(ids) - 1)]
    return micro.vsum(losses) / len(losses)


def test_a_loss_over_forward_across_has_the_reference_s_gradients_however_grads_were_reset_here(
        line_to_the_reference, reference, monkeypatch):
    """Forward's answer is its logits with their graph left in the parts' process (ghosts:
    data and grad here, the graph there by key); backward across walks that graph and sets
    every parameter's grad here. A grad reset here between two passes (a step's zero_grad)
    is sent before backward runs: the second pass's grads are the first's, not twice them."""
    micro = reference.modules.micro
    ids = [6, 0, 3, 2, 6]
    expected_model = micro.MicroGPT(7, n_embd=8, n_head=2, block_size=8, seed=5)
    _names_loss(micro, expected_model, ids, micro.MicroGPT.forward, micro.softmax).backward()
    expected = [p.grad for p in expected_model.params]
    parts.forget()
    _value_ops(micro, monkeypatch)

    def forward(model, token_id, pos):
        return parts.call_part("micro_forward", {"self": model, "token_id": token_id, "pos": pos})

    def softmax(logits):
        return parts.call_part("micro_softmax", {"logits": logits}, "numbers")

    model = micro.MicroGPT(7, n_embd=8, n_head=2, block_size=8, seed=5)
    model.start_sequence()
    assert all(logit._children == () for logit in forward(model, 6, 0))  # their graph stayed there
    for _ in range(2):
        loss = _names_loss(micro, model, ids, forward, softmax)
        loss.backward()
        assert [p.grad for p in model.params] == pytest.approx(expected, rel=1e-9, abs=1e-15)
        for p in model.params:
            p.grad = 0.0


@sandboxed
def test_a_graph_too_large_to_cross_is_the_uploads_failure_in_words_of_the_kits(reference, box):
    """A right RMSNorm whose every output sits on 40,000 nodes that pass it on unchanged:
    the certified backward its checks call across would be sent more than the wire carries.
    That weight is the upload's: the check fails as its code's, in the kit's words (the
    limit, what to do), never as a malformed message (the grader's error)."""
    task = catalogue.tasks()["micro_rmsnorm"]
    body = textwrap.dedent("""
        mean_square = vsum([x * x for x in xs]) / len(xs)
        scale = (mean_square + RMS_NORM_EPS) ** -0.5
        out = [x * scale for x in xs]
        for _ in range(40_000):
            out = [Value(v.data, (v,), (1.0,)) for v in out]
        return out
    """)
    sources = apply(reference.sources, task.module, task.name, body)
    checks = [c for c in catalogue.chapter_of_task()[task.name].checks if c.task == task.name]
    results = grade_task(task, checks, Grading(Submission("heavy", sources), reference, box, seed=11),
                         scan_for_tampering=False)
    heavy = [r for r in results if r.status != PASSED]
    assert heavy, "no check sent the graph across"
    for result in heavy:
        said = result.staff_diagnosis or result.diagnosis
        assert "more than the grader carries between processes" in result.diagnosis, said
        assert not result.cause and "malformed" not in said, said
