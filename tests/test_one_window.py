"""The student's code runs under the task's rules from its first line to its last.

Each attack below lets a probe return, and does its work afterwards: when the worker
reads the answer to send it back, or from code the upload defined that is not the
task's own function (a property the probe reads). The answer is now made plain data
inside the probe's window (grader/run/inside/wire.py, `plain`), and every piece of code
the upload defined counts as the task's own wherever it runs (grader/run/inside/tasks.py,
`_name_own_code`). Beside each attack stands an honest form of the same shape, which
keeps every point.
"""

from __future__ import annotations

import pytest

from grader.run.processes import Limits
from grader.run.results import FORBIDDEN, PASSED
from grader.run.sandbox import Sandbox, bwrap_works
from tests.test_certified_parts import checks_of, grade, upload

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap is not usable on this machine")


@pytest.fixture(scope="module")
def box():
    from tests.timing import limit

    with Sandbox(Limits(check_seconds=limit(20.0), memory_bytes=3 * 1024**3)) as sandbox:
        yield sandbox


def earned(results) -> float:
    return sum(r.score for r in results)


# A tensor that holds nothing until it is read: whatever touches it (detach, to_dense,
# tolist) runs the work, here autograd's backward pass of LayerNorm, which chapter 06 asks
# the student to write by hand.
LAZY_TENSOR = """
def _named(*path):  # computed names: the static scan does not see them (the layer behind it is tested)
    found = torch
    for part in path:
        found = getattr(found, part.replace("~", ""))
    return found


class LazyGradient(torch.Tensor):
    work = None

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        computed = LazyGradient.work()
        swapped = [computed[a._slot] if isinstance(a, LazyGradient) else a for a in args]
        return func(*swapped, **(kwargs or {}))


def lazy_layer_norm_backward(grad_out, x, gamma, eps):
    def work():
        with torch.enable_grad():
            xs, gs = x.detach().requires_grad_(), gamma.detach().requires_grad_()
            beta = torch.zeros_like(gs, requires_grad=True)
            out = _named("nn", "func~tional", "layer~_norm")(xs, xs.shape[-1:], gs, beta, eps)
            return _named("auto~grad", "grad")(out, (xs, gs, beta), grad_out)
    LazyGradient.work = staticmethod(work)
    answer = []
    for slot, like in enumerate((x, gamma, gamma)):
        lazy = torch.zeros_like(like).as_subclass(LazyGradient)
        lazy._slot = slot
        answer.append(lazy)
    return tuple(answer)
"""


def test_a_plain_tensor_of_the_same_values_keeps_every_point(reference, box):
    """The honest twin: the same work done before returning, by hand, as the lesson asks,
    returned as plain tensors (the reference's own body), keeps every point."""
    results = grade(reference, box, "layer_norm_backward", dict(reference.sources))
    assert earned(results) == sum(c.points for c in checks_of("layer_norm_backward")), \
        [(r.check.name, r.status, r.staff_diagnosis[:160]) for r in results if r.status != PASSED]


# Chapter 07: the loss is a zero-dimensional tensor of the upload's own class whose value
# torch.distributions computes (the library doing the task) when the answer is read.
LAZY_LOSS = """
class LazyLoss(torch.Tensor):
    work = None

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        loss = LazyLoss.work()
        swapped = [loss if isinstance(a, LazyLoss) else a for a in args]
        return func(*swapped, **(kwargs or {}))


def lazy_cross_entropy(logits, targets):
    flat, ids = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)

    def work():
        categorical = getattr(torch, "distri" + "butions").Categorical(logits=flat)
        return -categorical.log_prob(ids).mean()
    LazyLoss.work = staticmethod(work)
    return torch.zeros((), dtype=logits.dtype).as_subclass(LazyLoss)
"""


@pytest.mark.parametrize("task, body, module, code", [
    ("layer_norm_backward", "return lazy_layer_norm_backward(grad_out, x, gamma, eps)\n", "backward", LAZY_TENSOR),
    ("cross_entropy", "return lazy_cross_entropy(logits, targets)\n", "model", LAZY_LOSS),
], ids=["chapter_06_autograd", "chapter_07_distribution"])
def test_a_tensor_computed_when_it_is_read_earns_nothing(reference, box, task, body, module, code):
    """The work runs only when the worker reads the answer: autograd's LayerNorm backward
    (chapter 06), torch.distributions' cross-entropy (chapter 07). The answer is read
    inside the window now, and a tensor of the upload's own class is never read."""
    results = grade(reference, box, task, upload(reference, {task: body}, append={module: code}))
    assert earned(results) == 0, [(r.check.name, r.status, r.staff_diagnosis[:160]) for r in results]
    said = " ".join(r.diagnosis for r in results)
    assert "not plain data (a tensor of a class of its own" in said, said[:600]


# Chapter 00: __add__ returns a Value whose .data is computed when the probe reads it,
# through the certified __mul__, which the lessons teach after __add__.
LAZY_VALUE = """
class LazySum(Value):
    __slots__ = ("_pair",)

    def __init__(self, a, b):
        self._pair = (a, b)
        Value.__init__(self, 0.0, (a, b), (1.0, 1.0))

    @property
    def data(self):
        a, b = self._pair
        return (a * 1.0).data + (b * 1.0).data

    @data.setter
    def data(self, value):
        pass
"""

HONEST_SUBCLASS = """
class Sum(Value):
    __slots__ = ()
"""


def test_a_property_of_the_uploads_own_class_may_not_call_a_part_taught_later(reference, box):
    """The property runs outside __add__'s frame, so the taught-later rule, which looked
    for the task's function on the stack, let it call the certified __mul__. Code the
    upload defined counts as the task's own wherever it runs."""
    sources = upload(reference, {"micro_value_add": "return LazySum(self, other)\n"}, append={"micro": LAZY_VALUE})
    results = grade(reference, box, "micro_value_add", sources)
    assert earned(results) == 0, [(r.check.name, r.status, r.staff_diagnosis[:160]) for r in results]
    assert any(r.status == FORBIDDEN for r in results), [(r.check.name, r.status) for r in results]


def test_a_value_subclass_returned_by_add_keeps_every_point(reference, box):
    """The legitimate form of the same shape: a subclass of the student's own Value,
    computing a + b in __add__ itself."""
    sources = upload(reference, {"micro_value_add": "return Sum(self.data + other.data, (self, other), (1.0, 1.0))\n"},
                     append={"micro": HONEST_SUBCLASS})
    results = grade(reference, box, "micro_value_add", sources)
    assert earned(results) == sum(c.points for c in checks_of("micro_value_add")), \
        [(r.check.name, r.status, r.staff_diagnosis[:160]) for r in results if r.status != PASSED]
