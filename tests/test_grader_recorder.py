"""Red-team attacks on the operator recorder (grader/run/inside/op_rules.py): a
forbidden kernel, or torch's own Python code that does the task, run while the
recorder's Python modes are switched off.

Torch has many ways to take a mode off its stack or to dispatch below it, and the
private helpers its modules imported by name never pass through a guard. Each family
below is one such way; each is combined with a forbidden kernel (or torch's
implementation of the task) reached by a computed name, in three chapters, and must
score 'forbidden' on every check of the task. The static scan and the tamper scan
would see none of these names; the tamper scan is off besides, so each test proves
the run-time layers alone. A test marked `hole(...)` is an attack that still works,
by the nature of what can be observed from inside the process (see its reason).
"""

from __future__ import annotations

import textwrap

import pytest

from grader.checks import catalogue
from grader.run.inside.messages import CaughtCall
from grader.run.results import FORBIDDEN, PASSED

from tests.hostile import assert_no_points, checks_of, grade_one, hole, hostile_sources

# Appended to the module of the task under attack: every torch name is computed.
HELPERS = '''
import contextlib as _rt_contextlib
import importlib as _rt_importlib
import torch as _rt_torch


def _rt_get(owner, *parts):
    return getattr(owner, "".join(parts))


def _rt_C():
    return _rt_get(_rt_torch, "_", "C")


def _rt_aten():
    return _rt_get(_rt_torch, "o", "ps").aten


def _rt_module(*parts):
    return _rt_importlib.import_module("".join(parts))


def _rt_kernel(*parts):
    return _rt_get(_rt_aten(), *parts)


def _rt_function_modes_off():
    return _rt_get(_rt_module("torch.over", "rides"), "_pop_mode", "_temporarily")()


def _rt_keys(*names):
    C = _rt_C()
    keys = C.DispatchKeySet(getattr(C.DispatchKey, names[0]))
    for name in names[1:]:
        keys = keys | C.DispatchKeySet(getattr(C.DispatchKey, name))
    return keys
'''

# Each family defines _rt_off() (a context manager that switches the recorder off) and
# may redefine _rt_kernel(*parts) (how the kernel is called).
FAMILIES = {
    "torch.overrides._pop_mode_temporarily + _python_dispatch._disable_current_modes": '''
        @_rt_contextlib.contextmanager
        def _rt_off():
            dispatch = _rt_module("torch.utils._python", "_dispatch")
            with _rt_function_modes_off(), _rt_get(dispatch, "_disable_current", "_modes")():
                yield
    ''',
    "_pop_mode_temporarily of torch.overrides and of _python_dispatch": '''
        @_rt_contextlib.contextmanager
        def _rt_off():
            dispatch = _rt_module("torch.utils._python", "_dispatch")
            with _rt_function_modes_off(), _rt_get(dispatch, "_pop_mode", "_temporarily")():
                yield
    ''',
    "_set_torch_function_state(ALL_DISABLED) + no_dispatch()": '''
        @_rt_contextlib.contextmanager
        def _rt_off():
            C = _rt_C()
            before = _rt_get(C, "_get_torch", "_function_state")()
            _rt_get(C, "_set_torch", "_function_state")(C._TorchFunctionState.ALL_DISABLED)
            try:
                with _rt_get(_rt_module("torch.utils._mode", "_utils"), "no_", "dispatch")():
                    yield
            finally:
                _rt_get(C, "_set_torch", "_function_state")(before)
    ''',
    "the stack helpers torch.overrides and _python_dispatch imported by name": '''
        @_rt_contextlib.contextmanager
        def _rt_off():
            over = _rt_module("torch.over", "rides")
            dispatch = _rt_module("torch.utils._python", "_dispatch")
            function_mode = _rt_get(over, "_pop_torch", "_function_stack")()
            dispatch_mode = _rt_get(dispatch, "_pop_torch", "_dispatch_stack")()
            try:
                yield
            finally:
                _rt_get(dispatch, "_push_on_torch", "_dispatch_stack")(dispatch_mode)
                _rt_get(over, "_push_on_torch", "_function_stack")(function_mode)
    ''',
    "_ExcludeDispatchKeyGuard(Python, PythonTLSSnapshot) with the function mode popped": '''
        @_rt_contextlib.contextmanager
        def _rt_off():
            over = _rt_module("torch.over", "rides")
            mode = _rt_get(over, "_pop", "_mode")()
            try:
                with _rt_get(_rt_C(), "_Exclude", "DispatchKeyGuard")(_rt_keys("Python", "PythonTLSSnapshot")):
                    yield
            finally:
                _rt_get(over, "_push", "_mode")(mode)
    ''',
    "_AutoDispatchBelowAutograd + _ExcludeDispatchKeyGuard(Python)": '''
        @_rt_contextlib.contextmanager
        def _rt_off():
            C = _rt_C()
            with _rt_function_modes_off(), _rt_get(C, "_AutoDispatch", "BelowAutograd")(), \\
                    _rt_get(C, "_Exclude", "DispatchKeyGuard")(_rt_keys("Python")):
                yield
    ''',
    "a functorch level entered by hand, the modes popped inside it": '''
        @_rt_contextlib.contextmanager
        def _rt_off():
            functorch = _rt_get(_rt_C(), "_func", "torch")
            dispatch = _rt_module("torch.utils._python", "_dispatch")
            _rt_get(functorch, "_grad_increment", "_nesting")()
            try:
                with _rt_function_modes_off(), _rt_get(dispatch, "_disable_current", "_modes")():
                    yield
            finally:
                _rt_get(functorch, "_grad_decrement", "_nesting")()
    ''',
    "redispatch below the Python key": '''
        _rt_off = _rt_function_modes_off

        def _rt_kernel(*parts):
            overload = _rt_get(_rt_aten(), *parts).default
            return lambda *args, **kwargs: overload.redispatch(_rt_keys("CPU"), *args, **kwargs)
    ''',
    "a kernel handle from torch.library.get_kernel, taken when the module was imported": '''
        _RT_HANDLES = {name: _rt_get(_rt_module("torch.lib", "rary"), "get", "_kernel")("aten::" + name, "CPU")
                       for name in ("native_layer_norm", "_log_softmax", "nll_loss_forward", "_fused_adamw_")}
        _rt_off = _rt_contextlib.nullcontext

        def _rt_kernel(*parts):
            handle = _RT_HANDLES["".join(parts)]
            return lambda *args, **kwargs: handle.call_boxed(_rt_keys("CPU"), *args, **kwargs)
    ''',
    "a thread started when the module was imported runs the kernel": '''
        import queue as _rt_queue
        import threading as _rt_threading

        _RT_JOBS = _rt_queue.Queue()


        def _rt_serve():
            while True:
                function, args, kwargs, reply = _RT_JOBS.get()
                try:
                    reply.put((True, function(*args, **kwargs)))
                except BaseException as error:
                    reply.put((False, error))


        _rt_threading.Thread(target=_rt_serve, daemon=True).start()
        _rt_off = _rt_contextlib.nullcontext


        def _rt_kernel(*parts):
            op = _rt_get(_rt_aten(), *parts)

            def call(*args, **kwargs):
                reply = _rt_queue.Queue()
                _RT_JOBS.put((op, args, kwargs, reply))
                ok, value = reply.get()
                if not ok:
                    raise value
                return value
            return call
    ''',
}

# The task bodies: the answer computed by the kernel the task forbids, inside _rt_off().
BODIES = {
    "layer_norm": """
        with _rt_off():
            return _rt_kernel("native_layer", "_norm")(x, [x.shape[-1]], self.weight, self.bias, self.eps)[0]
    """,
    "cross_entropy": """
        flat = logits.reshape(-1, logits.shape[-1])
        with _rt_off():
            log_probs = _rt_kernel("_log", "_softmax")(flat, -1, False)
            return _rt_kernel("nll_loss", "_forward")(log_probs, targets.reshape(-1), None, 1, -100)[0]
    """,
    "adamw_step": """
        beta1, beta2 = self.betas
        fused = _rt_kernel("_fused", "_adamw_")
        with _rt_off():
            for i, p in enumerate(self.params):
                if p.grad is None:
                    continue
                self.steps[i] += 1
                step = _rt_torch.tensor(float(self.steps[i]), dtype=p.dtype)
                fused([p], [p.grad], [self.exp_avg[i]], [self.exp_avg_sq[i]], [], [step], lr=self.lr, beta1=beta1,
                      beta2=beta2, weight_decay=self.weight_decay, eps=self.eps, amsgrad=False, maximize=False)
    """,
}


def grade(reference, sandbox, task_name, body, append, imported=None):
    task = catalogue.tasks()[task_name]
    sources = hostile_sources(reference, {task_name: body}, HELPERS + textwrap.dedent(append), module=task.module)
    from grader.run.engine import grade_task
    from grader.run.worker_session import Grading
    from grader.run.submission import Submission

    if imported is None:
        return grade_one(reference, sandbox, task_name, sources), sources
    return grade_task(task, checks_of(task_name),
                      Grading(Submission("hostile", sources), reference, sandbox, seed=7, imported=imported),
                      scan_for_tampering=False), sources


def assert_forbidden(results):
    assert_no_points(results)
    assert {r.status for r in results} == {FORBIDDEN}, [(r.check.name, r.status, r.staff_diagnosis)
                                                        for r in results]


@pytest.mark.parametrize("task_name", list(BODIES))
@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_forbidden_kernel_is_refused_however_the_recorder_was_switched_off(reference, sandbox, family, task_name):
    results, _ = grade(reference, sandbox, task_name, BODIES[task_name], FAMILIES[family])
    assert_forbidden(results)


def test_the_package_imported_once_meets_the_same_table(reference, sandbox):
    """Grading imports a package once, in a process the task's workers are forked from:
    module-level code there ran before any rule was known."""
    family = "a kernel handle from torch.library.get_kernel, taken when the module was imported"
    task = catalogue.tasks()["layer_norm"]
    sources = hostile_sources(reference, {"layer_norm": BODIES["layer_norm"]},
                              HELPERS + textwrap.dedent(FAMILIES[family]), module=task.module)
    imported = sandbox.package(sources)
    if imported is None:
        pytest.skip("this machine cannot import a package once (no namespaces or seccomp)")
    try:
        for name in (family, "torch.overrides._pop_mode_temporarily + _python_dispatch._disable_current_modes"):
            results, _ = grade(reference, sandbox, "layer_norm", BODIES["layer_norm"], FAMILIES[name], imported)
            assert_forbidden(results)
    finally:
        imported.close()


# TorchScript's own engines run ATen's code past the dispatcher: its static runtime, its
# fusers, and its own operators (registered with the JIT, not the dispatcher). Each case:
# (module-level code, the body of LayerNorm.forward).
ENGINES = {
    "the static runtime, on a graph scripted from computed source at import": (r'''
        _RT_SCRIPTED = _rt_torch.jit.CompilationUnit(
            "def f(x: Tensor, w: Tensor, b: Tensor, eps: float):\n"
            "    return torch.ops.aten.native_layer" + "_norm(x, [x.size(-1)], w, b, eps)[0]\n").f
    ''', """
        with _rt_off():
            static = _rt_get(_rt_C(), "_jit_to_static", "_module")(_RT_SCRIPTED.graph)
            return static(x, self.weight.detach(), self.bias.detach(), self.eps)
    """),
    "oneDNN Graph fusion switched on at import": ('''
        _rt_get(_rt_C(), "_jit_set_llga", "_enabled")(True)
    ''', """
        with _rt_off():
            return _rt_kernel("native_layer", "_norm")(x, [x.shape[-1]], self.weight, self.bias, self.eps)[0]
    """),
    "TorchScript's own prim::MKLDNNLayerNorm": ("", """
        with _rt_off():
            norm = _rt_get(_rt_get(_rt_torch, "o", "ps").prim, "MKLDNNLayer", "Norm")
            out = norm(x.float().to_mkldnn(), [x.shape[-1]], self.weight.detach().float().to_mkldnn(),
                       self.bias.detach().float().to_mkldnn(), self.eps)
            return out.to_dense().to(x.dtype)
    """),
}


@pytest.mark.parametrize("case", list(ENGINES))
def test_torchscripts_engines_are_refused(reference, sandbox, case):
    append, body = ENGINES[case]
    results, _ = grade(reference, sandbox, "layer_norm", body, OFF + append)
    assert_forbidden(results)


# ---------------------------------------------------- torch's own code doing the task

OFF = FAMILIES["torch.overrides._pop_mode_temporarily + _python_dispatch._disable_current_modes"]

# AdamW's update by torch's private single-tensor Adam (decoupled weight decay), which
# runs only ordinary kernels; `{adam}` is how the function is reached.
ADAM_STEP = """
    beta1, beta2 = self.betas
    adam = {adam}
    with _rt_off():
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            self.steps[i] += 1
            step = _rt_torch.tensor(float(self.steps[i] - 1), dtype=p.dtype)
            adam([p], [p.grad], [self.exp_avg[i]], [self.exp_avg_sq[i]], [], [step], None, None, amsgrad=False,
                 has_complex=False, beta1=beta1, beta2=beta2, lr=self.lr, weight_decay=self.weight_decay,
                 eps=self.eps, maximize=False, capturable=False, differentiable=False, decoupled_weight_decay=True)
"""
BY_NAME = '_rt_get(_rt_module("torch.optim.ad", "am"), "_single_tensor", "_adam")'

LIBRARY = {
    "adamw_step via torch.optim.adam._single_tensor_adam by a computed name": (
        "adamw_step", ADAM_STEP.format(adam=BY_NAME), "_rt_off = _rt_contextlib.nullcontext"),
    "adamw_step via _single_tensor_adam with the modes switched off": (
        "adamw_step", ADAM_STEP.format(adam=BY_NAME), OFF),
    "adamw_step via a copy of _single_tensor_adam made from its code at import": (
        "adamw_step", ADAM_STEP.format(adam="_RT_COPY"), OFF + '''
        import types as _rt_types
        _rt_original = _rt_get(_rt_module("torch.optim.ad", "am"), "_single_tensor", "_adam")
        _RT_COPY = _rt_types.FunctionType(_rt_get(_rt_original, "__co", "de__"), _rt_original.__globals__)
        _RT_COPY.__kwdefaults__ = _rt_original.__kwdefaults__
    '''),
    "adamw_step via _single_tensor_adam of torch.optim.adam reloaded in the probe": (
        "adamw_step", ADAM_STEP.format(adam="_rt_reloaded()"), OFF + '''
        def _rt_reloaded():
            module = _rt_importlib.reload(_rt_module("torch.optim.ad", "am"))
            return _rt_get(module, "_single_tensor", "_adam")
    '''),
    "adamw_step via the AdamW class of torch.optim with the modes switched off": (
        "adamw_step", """
        with _rt_off():
            beta1, beta2 = self.betas
            for i, p in enumerate(self.params):
                if p.grad is None:
                    continue
                self.steps[i] += 1
                optimizer = _rt_get(_rt_torch.optim, "Adam", "W")([p], lr=self.lr, betas=(beta1, beta2), eps=self.eps,
                                                                   weight_decay=self.weight_decay)
                optimizer.state[p] = {"step": _rt_torch.tensor(float(self.steps[i] - 1)),
                                      "exp_avg": self.exp_avg[i], "exp_avg_sq": self.exp_avg_sq[i]}
                optimizer.step()
    """, OFF),
    "clip_grad_norm via torch's clip helpers with the modes switched off": ("clip_grad_norm", """
        helpers = _rt_module("torch.nn.utils.clip", "_grad")
        if isinstance(parameters, torch.Tensor):
            parameters = [parameters]
        unique = list({id(p): p for p in parameters if p.grad is not None}.values())
        if not unique:
            return torch.tensor(0.0)
        with _rt_off():
            total = _rt_get(helpers, "_get_total", "_norm")([p.grad for p in unique], 2.0, foreach=False)
            _rt_get(helpers, "_clip_grads", "_with_norm_")(unique, max_norm, total, foreach=False)
        return total
    """, OFF),
    "gelu via torch._refs' gelu with the modes switched off": ("gelu", """
        with _rt_off():
            return _rt_get(_rt_module("torch._refs.nn.func", "tional"), "ge", "lu")(x)
    """, OFF),
    "gelu_backward via torch._decomp's gelu_backward with the modes switched off": ("gelu_backward", """
        with _rt_off():
            return _rt_get(_rt_module("torch._decomp.decompo", "sitions"), "gelu_", "backward")(grad_out, x)
    """, OFF),
    "layer_norm via torch._refs' native_layer_norm with the modes switched off": ("layer_norm", """
        with _rt_off():
            reference = _rt_get(_rt_module("torch._r", "efs"), "native_layer", "_norm")
            return reference(x, [x.shape[-1]], self.weight, self.bias, self.eps)[0]
    """, OFF),
    "cross_entropy via torch._refs' log_softmax and nll_loss with the modes switched off": ("cross_entropy", """
        functional = _rt_module("torch._refs.nn.func", "tional")
        flat = logits.reshape(-1, logits.shape[-1])
        with _rt_off():
            return _rt_get(functional, "nll", "_loss")(_rt_get(functional, "log", "_softmax")(flat, -1),
                                                       targets.reshape(-1))
    """, OFF),
}


@pytest.mark.parametrize("case", list(LIBRARY))
def test_torchs_own_code_doing_the_task_is_refused_however_it_was_reached(reference, sandbox, case):
    task_name, body, append = LIBRARY[case]
    results, _ = grade(reference, sandbox, task_name, body, append)
    if case == "gelu via torch._refs' gelu with the modes switched off" and sandbox.kind == "bwrap":
        # Under bubblewrap the task's checks share a worker forked from the package imported
        # once: the first check's refusal stops torch._refs halfway through its import, and
        # the second's import of it fails inside torch. It still earns nothing; it is named
        # forbidden only on the first check.
        assert_no_points(results)
        assert results[0].status == FORBIDDEN, [(r.check.name, r.status) for r in results]
        return
    assert_forbidden(results)
    assert any("torch." in r.staff_diagnosis for r in results), results[0].staff_diagnosis


HOLES = {
    "adamw_step via torch's source copied and compiled under another file name": (
        "adamw_step", ADAM_STEP.format(adam="_RT_SOURCE['_single_tensor_adam']"), OFF + '''
        import inspect as _rt_inspect
        _RT_SOURCE = {"__name__": "mine", "__package__": "torch.optim"}
        exec(compile(_rt_inspect.getsource(_rt_module("torch.optim.ad", "am")), "mine.py", "exec"), _RT_SOURCE)
    ''', "torch's source text, copied and compiled under another name, is the submission's own code to anything "
         "that runs: the same as pasting it into the upload (the similarity review's business)"),
    "gelu_backward via reverse-mode autograd of a hand-written gelu, with the modes switched off": (
        "gelu_backward", """
        with _rt_off():
            leaf = x.detach().clone()
            getattr(leaf, "requires_" + "grad_")()
            with torch.enable_grad():
                y = 0.5 * leaf * (1.0 + torch.erf(leaf / math.sqrt(2.0)))
            engine = _rt_get(_rt_module("torch.autograd.gra", "ph"), "_engine_run", "_backward")
            one = _rt_torch.ones((), dtype=x.dtype)
            return engine(((y * grad_out).sum(),), (one,), False, False, (leaf,), True, False)[0]
    """, OFF, "the backward of a hand-written formula runs only ordinary kernels; the autograd engine is seen by "
              "the modes alone, and these were switched off"),
}


@pytest.mark.parametrize("case", [pytest.param(case, marks=hole(HOLES[case][3])) for case in HOLES])
def test_what_the_recorder_cannot_see(reference, sandbox, case):
    task_name, body, append, _ = HOLES[case]
    results, _ = grade(reference, sandbox, task_name, body, append)
    assert_forbidden(results)


# ------------------------------------------------------------ correct code keeps its points

CORRECT = {
    "layer_norm via torch.var_mean, in a module that imports torch._refs": ("layer_norm", """
        variance, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
        return (x - mean) * torch.rsqrt(variance + self.eps) * self.weight + self.bias
    """, "import torch._refs  # noqa: F401"),
    "adamw_step by hand after printing a tensor": ("adamw_step", """
        beta1, beta2 = self.betas
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            grad = p.grad
            self.steps[i] += 1
            t = self.steps[i]
            if t == 1 and i == 0:
                print(repr(grad.flatten()[:1]))
            p.mul_(1.0 - self.lr * self.weight_decay)
            m, v = self.exp_avg[i], self.exp_avg_sq[i]
            m.mul_(beta1).add_(grad, alpha=1.0 - beta1)
            v.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
            denom = (v.sqrt() / math.sqrt(1.0 - beta2**t)).add_(self.eps)
            p.addcdiv_(m, denom, value=-self.lr / (1.0 - beta1**t))
    """, ""),
}


@pytest.mark.parametrize("case", list(CORRECT))
def test_correct_code_keeps_every_point(reference, sandbox, case):
    task_name, body, append = CORRECT[case]
    task = catalogue.tasks()[task_name]
    results = grade_one(reference, sandbox, task_name,
                        hostile_sources(reference, {task_name: body}, append, module=task.module))
    lost = [(r.check.name, r.status, r.staff_diagnosis) for r in results if r.status != PASSED]
    assert results and not lost, lost


# ------------------------------------------------------------------ in one process

IN_ONE_PROCESS = """
import importlib
import threading
import torch
from grader.run.inside import op_rules
from grader.run.inside.messages import CaughtCall

def refused(call):
    try:
        call()
    except op_rules.ForbiddenCall:
        return True
    return False

rules = op_rules.Rules(("native_layer_norm", "torch.optim.adam.*"))
x = torch.randn(2, 4)
adam = importlib.import_module("torch.optim.adam")._single_tensor_adam
original = adam.__code__
go, done, seen = threading.Event(), threading.Event(), []

def later():  # a thread started before the guards (the grader's own), its mode stacks empty
    go.wait()
    seen.append(refused(lambda: torch.ops.aten.native_layer_norm(x, [4], None, None, 1e-5)))
    done.set()

threading.Thread(target=later, daemon=True).start()
op_rules.arm(rules, reversible=True)
# Once student code may run, no thread starts at all, in a probe or outside one.
assert refused(lambda: threading.Thread(target=print).start())
tripped = []
with op_rules.watching(rules, tripped):
    go.set()
    done.wait(30)
    with torch.overrides._pop_mode_temporarily(), torch.utils._python_dispatch._disable_current_modes():
        seen.append(refused(lambda: torch.layer_norm(x, [4])))
        seen.append(refused(lambda: adam([], [], [], [], [], [], None, None, amsgrad=False, has_complex=False,
                                         beta1=0.9, beta2=0.9, lr=0.1, weight_decay=0.0, eps=1e-8, maximize=False,
                                         capturable=False, differentiable=False, decoupled_weight_decay=True)))
assert seen == [True, True, True], seen
assert {"kind": "op", "layer": "kernel", "name": "native_layer_norm"} in tripped, tripped
assert {"kind": "library", "name": "torch.optim.adam._single_tensor_adam"} in tripped, tripped
op_rules.disarm()
assert adam.__code__ is original
assert torch.layer_norm(x, [4]).shape == (2, 4)
print("ok")
"""


def test_the_table_refuses_in_any_thread_and_disarm_puts_torch_back():
    """What a process serving many tasks (the portable runner) relies on, in a process of
    its own: the audit hook and the disabled kernel handles last as long as it does."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", IN_ONE_PROCESS], cwd=root, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_a_library_code_is_worded_by_the_grader_and_validated_strictly():
    from grader.run.feedback import _forbidden_call_text, forbidden_code, forbidden_words

    code = CaughtCall.of({"kind": "library", "name": "torch.optim.adam._single_tensor_adam"})
    assert forbidden_code(code) == code
    assert "torch.optim.adam._single_tensor_adam" in forbidden_words(code)
    adamw, gelu, encode = (catalogue.tasks()[n] for n in ("adamw_step", "gelu", "encode"))
    assert "torch.optim.adam._single_tensor_adam" in _forbidden_call_text(code, adamw)
    # Where torch's library is judged by where it runs (gelu), the call torch's code made is
    # named, module and qualified name; a task with no rule for it repeats no name (the code
    # could have chosen it), nor a name that is no module of torch's and a qualified name in it.
    assert "torch.optim.adam._single_tensor_adam" in _forbidden_call_text(code, gelu)
    assert "torch.optim" not in _forbidden_call_text(code, encode)
    assert "torch.nn.no_such_module" not in _forbidden_call_text(
        CaughtCall.of({"kind": "library", "name": "torch.nn.no_such_module.thing.a.b.c.d"}), gelu)
    assert "torch._refs.nn.functional.gelu" in _forbidden_call_text(
        CaughtCall.of({"kind": "library", "name": "torch._refs.nn.functional.gelu"}), gelu)
    for forged in ({"kind": "library", "name": "os.system"}, {"kind": "library", "name": "torch.x y"},
                   {"kind": "library"}, {"kind": "library", "name": "torch." + "a" * 300}):
        assert forbidden_code(CaughtCall.of(forged)) is None, forged
