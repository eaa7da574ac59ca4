"""Forbidden calls: a task's shortcut (F.gelu, F.layer_norm, autograd in chapter 06...)
scores 'forbidden', however it is spelt.

The static scan of the task's function (grader/run/scan_calls.py) resolves imports and
aliases, follows the student's own helpers, and knows torch's back doors (torch.ops.aten,
torch._C, torch._refs...); what it cannot see by name meets the tripwires and the
run-time operator rules (tests/test_grader_op_rules.py and the files beside it). The
reference itself calls none of what it forbids.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.checks import catalogue
from grader.run.scan_calls import scan
from tests.hostile import assert_no_points, run, run_body

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "hero_transformer"


# ------------------------------------------------------------------- the static scan


def test_the_reference_teaches_what_it_grades():
    """No task of the reference uses the library call that task forbids."""
    from grader.run.scan_calls import scan

    for task in catalogue.tasks().values():
        source = (SOLUTIONS / f"{task.module}.py").read_text()
        assert scan(source, task.qualname, task.forbidden, task.forbidden_methods) == [], task.name


def test_forbidden_scan_resolves_imports():
    from grader.run.scan_calls import scan

    source = (
        "import torch.nn.functional as F\n"
        "from torch.nn.functional import gelu as g\n"
        "def gelu(x):\n    return x\n"
        "def a(x):\n    return F.gelu(x)\n"
        "def b(x):\n    return g(x)\n"
        "def c(x):\n    return gelu(x)\n"
        "class K:\n    def d(self, x):\n        return x.log_softmax(-1)\n"
    )
    forbidden = ("torch.nn.functional.gelu",)
    assert scan(source, "a", forbidden) and scan(source, "b", forbidden)
    assert scan(source, "c", forbidden) == []  # a student's own helper of the same name is fine
    assert scan(source, "K.d", (), ("log_softmax",))


def test_the_scan_follows_the_students_own_helpers_transitively():
    source = (
        "import torch\n"
        "import torch.nn.functional as F\n"
        "_g = torch.ops.aten.gelu\n"
        "def deeper(x):\n    return F.gelu(x)\n"
        "def helper(x):\n    return deeper(x)\n"
        "def a(x):\n    return helper(x)\n"
        "def b(x):\n    return _g(x)\n"
        "class K:\n"
        "    def _inner(self, x):\n        return torch.native_layer_norm(x, (3,), None, None, 1e-5)[0]\n"
        "    def c(self, x):\n        return self._inner(x)\n"
        "def clean(x):\n    return x * 2\n"
    )
    forbidden = ("torch.nn.functional.gelu",)
    assert scan(source, "a", forbidden) == ["line 5: F.gelu (in deeper, which a uses)"]
    assert scan(source, "b", ()) == ["line 3: torch.ops.aten.gelu (in _g, which b uses)"]
    assert scan(source, "K.c", ())[0].startswith("line 14: torch.native_layer_norm (in K._inner")
    assert scan(source, "clean", forbidden) == []


@pytest.mark.parametrize("call", ["torch.ops.aten.gelu(x)", "torch._C._nn.gelu(x)", "torch._VF.gelu(x)",
                                  "torch.native_dropout(x, 0.0, True)[0]", "torch._softmax(x, -1, False)",
                                  "torch.autograd.Variable._execution_engine", "torch._refs.nn.functional.gelu(x)",
                                  "torch._decomp.decomposition_table", "torch._prims.mul(x, x)"])
def test_torch_back_doors_are_forbidden_in_every_task(call):
    source = f"import torch\ndef f(x):\n    return {call}\n"
    assert scan(source, "f", ()), call
    assert scan(f"from torch import ops, _C\ndef f(x):\n    return ops.aten.gelu(x) + _C._nn.gelu(x)\n", "f", ())


def test_other_graded_functions_are_not_scanned_for_this_task():
    # The grader swaps the reference in for them; their shortcuts cost their own task only.
    source = (SOLUTIONS / "model.py").read_text().replace(
        "return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))", "return torch.ops.aten.gelu(x)")
    assert scan(source, "gelu", ())
    assert scan(source, "FeedForward.forward", ("torch.nn.functional.gelu",)) == []


# ------------------------------------------------------------------- in a graded run


def test_forbidden_library_call_scores_zero(reference, sandbox):
    results = run_body(reference, sandbox, "gelu", "return torch.nn.functional.gelu(x)")
    assert {r.status for r in results} == {"forbidden"}
    hidden = run_body(reference, sandbox, "gelu", "return getattr(torch.nn.functional, 'ge' + 'lu')(x)")
    assert {r.status for r in hidden} == {"forbidden"}
    low_level = run_body(reference, sandbox, "gelu", "return torch._C._nn.gelu(x)")
    assert {r.status for r in low_level} == {"forbidden"}


FORBIDDEN_BYPASSES = {
    "gelu via torch.ops.aten": ("gelu", "return torch.ops.aten.gelu(x)"),
    "layer_norm via torch.native_layer_norm": (
        "layer_norm", "return torch.native_layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)[0]"),
    "cross_entropy via torch.ops.aten": (
        "cross_entropy", "return torch.ops.aten.cross_entropy_loss(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))"),
    "gelu_backward via torch.ops.aten": ("gelu_backward", "return torch.ops.aten.gelu_backward(grad_out, x)"),
    "layer_norm_backward via autograd's engine": ("layer_norm_backward", """
        leaves = [x.detach().requires_grad_(), gamma.detach().requires_grad_(),
                  torch.zeros_like(gamma).requires_grad_()]
        with torch.enable_grad():
            y = _layer_norm_forward(*leaves, eps)
        engine = torch.autograd.Variable._execution_engine
        return engine.run_backward((y,), (grad_out,), False, False, tuple(leaves), True, False)
    """),
}


@pytest.mark.parametrize("case", list(FORBIDDEN_BYPASSES))
def test_aliases_of_forbidden_functions_score_forbidden(reference, sandbox, case):
    task_name, body = FORBIDDEN_BYPASSES[case]
    results = run(reference, sandbox, task_name, body)
    assert_no_points(results)
