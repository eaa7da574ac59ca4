"""Red-team attacks on the certified parts (issue 30), and the honest code beside them.

1. A task's worker holds only what the task builds on. Grading a task once put every
   other task's reference in its worker, and the task's code could call any of them:
   chapter 00's scalar autograd computed chapter 06's backward passes, chapter 00's
   attention head chapter 04's attention, chapter 00's Adam chapter 08's AdamW step,
   and chapter 06's LayerNorm backward chapter 05's normalised rows. Each attack below
   is graded twice: with the borrowed chapter left as the stubs (the student's own code
   stands there now, and it raises NotImplementedError: no point), and with the
   student's own borrowed chapter done (the same code earns its points: reusing one's
   own parts stays fair). A worker shared by a group holds what its tasks build on
   together; a part only some of them build on refuses the others' probes, however it
   was reached, and those probes are answered again in their own workers.
2. Certified code is called, never read, and the report is not a wire. The upload read
   a certified function's names and bytecode and raised one of 256 classes of its own
   on a line picked by what it read. Here the code tries every door to the certified
   code (attributes by computed names, inspect, dis, linecache, gc, tracers, frames,
   tracebacks, generators, an audit hook of its own); none opens. And what a student
   sees of an error names a type Python or torch defines and a course file, the same
   whichever class or line the upload picked.

The static tamper scan would stop most of these uploads before they ran; it is off
(scan_for_tampering=False), so that each attack meets the layer behind it.
"""

from __future__ import annotations

import textwrap

import pytest

from grader.checks import catalogue
from grader.mutants import apply, region_of, replace_region
from grader.run.dependencies import task_graph, task_groups, worker_holdings
from grader.run.engine import grade_group, grade_task
from grader.run.worker_session import Grading, worker_request
from grader.run.processes import Limits
from grader.regions import strip
from grader.run.report import results_json
from grader.run.results import ERROR, FORBIDDEN, NOT_IMPLEMENTED, PASSED, GradeReport
from grader.run.sandbox import Sandbox, bwrap_works
from grader.run.submission import Submission
from tests.hostile import gc_garbage_attack, signal_handler_attack

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap is not usable on this machine")

CHAPTER_00 = [name for name, task in catalogue.tasks().items() if task.module == "micro"]


@pytest.fixture(scope="module")
def box():
    from tests.timing import limit

    with Sandbox(Limits(check_seconds=limit(20.0), memory_bytes=3 * 1024**3)) as sandbox:
        yield sandbox


def checks_of(task_name):
    return [c for c in catalogue.chapter_of_task()[task_name].checks if c.task == task_name]


def upload(reference, bodies: dict[str, str], stubs=(), append: dict[str, str] | None = None) -> dict[str, str]:
    """The reference with some tasks' bodies replaced, some tasks left as the student copy
    leaves them (raising NotImplementedError), and code appended to some modules."""
    sources = dict(reference.sources)
    for name in stubs:
        rel, _ = region_of(sources, name)
        sources[rel] = replace_region(sources[rel], name, f'raise NotImplementedError("{name}")\n')
    for name, body in bodies.items():
        sources = apply(sources, catalogue.tasks()[name].module, name, textwrap.dedent(body))
    for module, code in (append or {}).items():
        sources[f"{module}.py"] += "\n\n" + textwrap.dedent(code) + "\n"
    return sources


def grade(reference, box, task_name, sources, only=None):
    checks = [c for c in checks_of(task_name) if only is None or c.name.rsplit(".", 1)[-1] in only]
    return grade_task(catalogue.tasks()[task_name], checks,
                      Grading(Submission("attack", sources), reference, box, seed=11), scan_for_tampering=False)


def statuses(results) -> dict[str, str]:
    return {r.check.name: r.status for r in results}


def no_points(results):
    assert results and not [r.check.name for r in results if r.status == PASSED], \
        [(r.check.name, r.status, r.staff_diagnosis[:300]) for r in results]


def all_points(results):
    assert results and all(r.status == PASSED for r in results), \
        [(r.check.name, r.status, r.staff_diagnosis[:300]) for r in results if r.status != PASSED]


# ====================================================== 1. only what the task builds on

# Chapter 06's LayerNorm backward by chapter 00's scalar autograd: every row a graph of
# Values, root = sum(y * grad_out), and `getattr(root, "back" + "ward")` past the name rule.
BACKWARD_BY_MICRO = '''
from .micro import Value

d = x.shape[-1]
rows, upstream, weights = x.reshape(-1, d).tolist(), grad_out.reshape(-1, d).tolist(), gamma.tolist()
dx, dgamma = [], [0.0] * d
for row, up in zip(rows, upstream):
    xs, gs = [Value(v) for v in row], [Value(v) for v in weights]
    mean = sum(xs, Value(0.0)) * (1.0 / d)
    centred = [v - mean for v in xs]
    inv_std = (sum([c * c for c in centred], Value(0.0)) * (1.0 / d) + eps) ** -0.5
    root = sum([g * c * inv_std * u for g, c, u in zip(gs, centred, up)], Value(0.0))
    getattr(root, "back" + "ward")()
    dx.append([v.grad for v in xs])
    dgamma = [a + g.grad for a, g in zip(dgamma, gs)]
dbeta = grad_out.reshape(-1, d).sum(dim=0)
return (torch.tensor(dx, dtype=x.dtype).reshape(x.shape), torch.tensor(dgamma, dtype=gamma.dtype), dbeta)
'''

# Chapter 04's attention by chapter 00's attention head, one query at a time.
ATTENTION_BY_MICRO = '''
from . import micro

q = self.split_heads(self.q_proj(x))
k = self.split_heads(self.k_proj(x))
v = self.split_heads(self.v_proj(x))
if past_key_value is not None:
    k = torch.cat([past_key_value[0], k], dim=2)
    v = torch.cat([past_key_value[1], v], dim=2)
B, H, T, _ = q.shape
total = k.shape[2]
rows, kept = [], []
for b in range(B):
    for h in range(H):
        keys = [[micro.Value(a) for a in row] for row in k[b, h].tolist()]
        values = [[micro.Value(a) for a in row] for row in v[b, h].tolist()]
        for t in range(T):
            seen = total - T + t + 1
            out, weights = micro.attention_head([micro.Value(a) for a in q[b, h, t].tolist()], keys[:seen],
                                                values[:seen])
            rows.append([o.data for o in out])
            kept.append([w.data for w in weights] + [0.0] * (total - seen))
out = torch.tensor(rows, dtype=x.dtype).reshape(B, H, T, -1)
self.last_attention = torch.tensor(kept, dtype=x.dtype).reshape(B, H, T, total)
return self.o_proj(self.merge_heads(out)), ((k, v) if use_cache else None)
'''

# Chapter 08's AdamW step by chapter 00's Adam, one scalar Adam per parameter (its
# schedule made flat), the decay decoupled by hand.
ADAMW_BY_MICRO = '''
from . import micro

beta1, beta2 = self.betas
for i, p in enumerate(self.params):
    if p.grad is None:
        continue
    self.steps[i] += 1
    p.mul_(1.0 - self.lr * self.weight_decay)
    cells = [micro.Value(a) for a in p.reshape(-1).tolist()]
    for cell, g in zip(cells, p.grad.reshape(-1).tolist()):
        cell.grad = g
    adam = micro.Adam(cells, lr=self.lr, beta1=beta1, beta2=beta2, eps=self.eps, total_steps=10**18)
    adam.m = self.exp_avg[i].reshape(-1).tolist()
    adam.v = self.exp_avg_sq[i].reshape(-1).tolist()
    adam.t = self.steps[i] - 1
    adam.step()
    p.copy_(torch.tensor([c.data for c in cells], dtype=p.dtype).reshape(p.shape))
    self.exp_avg[i].copy_(torch.tensor(adam.m, dtype=p.dtype).reshape(p.shape))
    self.exp_avg_sq[i].copy_(torch.tensor(adam.v, dtype=p.dtype).reshape(p.shape))
'''

# Chapter 05's LayerNorm by chapter 06's backward: with an upstream gradient of ones, the
# gamma gradient of one row is that row normalised.
LAYER_NORM_BY_BACKWARD = '''
from . import backward

d = x.shape[-1]
rows = x.reshape(-1, d)
ones, unit = torch.ones(1, d, dtype=x.dtype), torch.ones(d, dtype=x.dtype)
normalised = torch.stack([backward.layer_norm_backward(ones, rows[i:i + 1], unit, eps=self.eps)[1]
                          for i in range(rows.shape[0])])
return normalised.reshape(x.shape) * self.weight + self.bias
'''

BORROWED = [
    pytest.param("layer_norm_backward", BACKWARD_BY_MICRO, CHAPTER_00, id="ch06-backward-by-ch00-autograd"),
    pytest.param("attention", ATTENTION_BY_MICRO, CHAPTER_00, id="ch04-attention-by-ch00-attention-head"),
    pytest.param("adamw_step", ADAMW_BY_MICRO, CHAPTER_00, id="ch08-adamw-by-ch00-adam"),
    pytest.param("layer_norm", LAYER_NORM_BY_BACKWARD, ["layer_norm_backward"], id="ch05-layer-norm-by-ch06-backward"),
]


@pytest.mark.parametrize("task_name, body, borrowed", BORROWED)
def test_a_task_that_borrows_another_chapter_meets_the_student_s_own_code(reference, box, task_name, body, borrowed):
    assert not set(borrowed) & set(worker_holdings()[task_name]), "the task's checks do run the borrowed part"
    # The borrowed chapter left unfinished: what runs there is the student's stub.
    results = grade(reference, box, task_name, upload(reference, {task_name: body}, stubs=borrowed))
    no_points(results)
    assert {r.status for r in results} <= {ERROR, NOT_IMPLEMENTED}, statuses(results)
    assert any("not implemented yet" in r.diagnosis for r in results), [r.diagnosis for r in results]
    # The same code on the student's own finished chapter keeps its points: the attack
    # computes the right thing, and using one's own parts stays fair.
    all_points(grade(reference, box, task_name, upload(reference, {task_name: body})))


def test_what_each_worker_holds_is_what_its_checks_run(reference):
    holdings, public = worker_holdings(), task_graph()
    for name, task in catalogue.tasks().items():
        assert name not in holdings[name]
        assert set(public[name]) <= set(holdings[name]), name  # the release's graph, hidden checks added
        request = worker_request(task, Submission("x", reference.sources), reference, Limits())
        assert request.certify == sorted(holdings[name])
    # The four borrowings of the issue, by name.
    assert "micro_backward" not in holdings["layer_norm_backward"]
    assert "micro_attention" not in holdings["attention"]
    assert "micro_adam" not in holdings["adamw_step"]
    assert "layer_norm_backward" not in holdings["layer_norm"]


def test_every_task_alone_on_the_stubs_keeps_every_point(reference, box):
    """The holdings are read from the text of the checks; this is what shows them whole:
    each task's reference body in the student copy (every other task a stub) earns
    every point of its checks, hidden ones included."""
    every = set(catalogue.tasks())
    short = {}
    for name, task in catalogue.tasks().items():
        sources = {rel: strip(text, every - {name}) for rel, text in reference.sources.items()}
        results = grade_task(task, checks_of(name),
                             Grading(Submission(f"{name} alone", sources), reference, box, seed=3))
        short.update({r.check.name: r.staff_diagnosis[:200] for r in results if r.status != PASSED})
        held = {t for r in results for t in r.certified}
        assert held <= set(worker_holdings()[name]), (name, held)
    assert not short, short


# ============================================ 1b. only what the lessons taught before it

# The attack: Value.__add__ leaning on the certified product its probes hold (the kit's
# own reading of a graph multiplies), with the upload's own product and power left as
# stubs. (Its exp and log are no longer held there: chapter 00's probes read gradients with
# the kit's chain rule, so a worker of __add__ holds nothing to climb to through them.)
ADD_BY_LATER_PARTS = "return Value((self * 1.0).data + _rt_lift(other).data, (self, _rt_lift(other)), (1.0, 1.0))\n"
LIFT = """
def _rt_lift(other):
    return other if isinstance(other, Value) else Value(other)
"""
# The same through a helper of the upload's own (a frame that is neither the task's code
# nor the course's), and with the refusal caught and the task then done right.
ADD_THROUGH_A_HELPER = "return _rt_through(self, other)\n"
THROUGH = LIFT + """
def _rt_through(a, b):
    return Value((a * 1.0).data + _rt_lift(b).data, (a, _rt_lift(b)), (1.0, 1.0))
"""
ADD_CAUGHT = """
try:
    return Value((self * 1.0).data + _rt_lift(other).data, (self, _rt_lift(other)), (1.0, 1.0))
except Exception:
    other = _rt_lift(other)
    return Value(self.data + other.data, (self, other), (1.0, 1.0))
"""


@pytest.mark.parametrize("body, helpers", [(ADD_BY_LATER_PARTS, LIFT), (ADD_THROUGH_A_HELPER, THROUGH),
                                           (ADD_CAUGHT, LIFT)], ids=["direct", "through a helper", "caught"])
def test_a_task_s_own_code_runs_no_part_taught_after_it(reference, box, body, helpers):
    from grader.run.results import FORBIDDEN

    sources = upload(reference, {"micro_value_add": body}, stubs=("micro_value_mul", "micro_value_pow"),
                     append={"micro": helpers})
    results = grade(reference, box, "micro_value_add", sources)
    no_points(results)
    assert all(r.status == FORBIDDEN and "Value.__mul__ (task 'micro_value_mul', chapter 00), which the lessons teach "
               "after this task" in r.diagnosis for r in results), [(r.check.name, r.diagnosis) for r in results]


def test_a_task_s_probes_still_use_what_they_hold_and_its_code_what_came_before(reference, box):
    """The probes of Value.__add__ hold the product (taught after it), and micro_softmax's
    own code runs exp (taught before it): both keep every point."""
    all_points(grade(reference, box, "micro_value_add", upload(reference, {})))
    all_points(grade(reference, box, "micro_softmax", upload(reference, {})))


def test_every_part_a_worker_holds_is_guarded_by_the_lessons_order():
    """For every task: each part its worker holds carries a guard; the task may run it
    from its own code exactly when the lessons teach the part before the task."""
    from grader.run.worker_session import holdings_of
    from grader.run.inside.sealed import PROBES_ONLY

    taught = list(catalogue.tasks())
    for name, task in catalogue.tasks().items():
        held, guards = holdings_of([task])
        assert set(guards) == set(held), name
        for part in held:
            later = taught.index(part) > taught.index(name)
            assert guards[part] == ((name + PROBES_ONLY,) if later else (name,)), (name, part, guards[part])


GROUP = ["micro_value_add", "build_vocab", "embedding", "positions", "attention_init", "layer_norm_backward"]

# The same, adding by hand: of chapter 00 it runs Value's product, power and backward
# only, which the group's worker holds for micro_value_add (and never micro_value_add
# itself, whose student code a probe of another task would be answered again for anyway).
BACKWARD_BY_HELD_PARTS = BACKWARD_BY_MICRO.replace("from .micro import Value\n", """from .micro import Value


def add(*terms):
    return Value(sum(t.data for t in terms), terms, (1.0,) * len(terms))

""").replace("sum(xs, Value(0.0))", "add(*xs)").replace("v - mean", "add(v, mean * -1.0)").replace(
    "sum([c * c for c in centred], Value(0.0)) * (1.0 / d) + eps", "add(add(*[c * c for c in centred]) * (1.0 / d), Value(eps))"
).replace("sum([g * c * inv_std * u for g, c, u in zip(gs, centred, up)], Value(0.0))",
          "add(*[g * c * inv_std * u for g, c, u in zip(gs, centred, up)])")


def _group_items(names):
    return [(catalogue.tasks()[n], checks_of(n)) for n in names]


def test_a_part_held_for_another_task_of_the_group_refuses_the_rest(reference, box):
    """The group's worker holds Value's other operations and backward for micro_value_add;
    layer_norm_backward, graded in the same worker, does not build on them. Its probe
    runs into the guard inside their code and is answered again in its own worker, where
    they are the student's stubs; micro_value_add keeps its points."""
    assert GROUP in task_groups(list(catalogue.tasks()))
    borrowed = [t for t in CHAPTER_00 if t != "micro_value_add"]
    sources = upload(reference, {"layer_norm_backward": BACKWARD_BY_HELD_PARTS}, stubs=borrowed)
    graded = dict(zip(GROUP, grade_group(_group_items(GROUP),
                                         Grading(Submission("group", sources), reference, box, seed=5))))
    no_points(graded["layer_norm_backward"])
    for name in GROUP[:-1]:
        all_points(graded[name])
    alone = grade_task(catalogue.tasks()["layer_norm_backward"], checks_of("layer_norm_backward"),
                       Grading(Submission("alone", sources), reference, box, seed=5))
    assert [(r.status, r.diagnosis) for r in graded["layer_norm_backward"]] == [(r.status, r.diagnosis) for r in alone]
    # On the student's own chapter 00 the same code keeps its points, in the group too.
    own = upload(reference, {"layer_norm_backward": BACKWARD_BY_HELD_PARTS})
    all_points(grade_group(_group_items(GROUP), Grading(Submission("own", own), reference, box, seed=5))[-1])


# micro_value_add's code, first in the group, keeps Value's certified product where a
# later task finds it, from the student's class and from the certified class it came
# from (found among object's subclasses); layer_norm_backward then calls the kept
# function itself. (grade_group runs the tamper scan: the names are spelled past it.)
KEEP_FOR_LATER = '''
import builtins
builtins.__dict__.setdefault("_kept_parts", []).append(type(self).__dict__["__mul__"])
builtins.__dict__["_kept_parts"].extend(c.__dict__.get("__mul__") for c in getattr(type, "__sub" + "classes__")(object)
                                        if c.__name__ == "Value" and "__mul__" in c.__dict__)
return Value(self.data + other.data, (self, other), (1.0, 1.0))
'''

# Every other node made by hand, and the reverse pass too: of chapter 00, only the product
# kept from the earlier probe runs (the student's own product is a stub, so it is skipped).
USE_KEPT = '''
import builtins
from .micro import Value

kept = [f for f in builtins.__dict__.get("_kept_parts", []) if f is not None]
assert kept, "nothing was kept"


def mul(a, b):
    for product in kept:
        try:
            return product(a, b)
        except NotImplementedError:
            pass
    raise AssertionError("nothing was kept")


def add(*terms):
    return Value(sum(t.data for t in terms), terms, (1.0,) * len(terms))


def power(a, k):
    return Value(a.data ** k, (a,), (k * a.data ** (k - 1),))


def backward(root):
    order, seen = [], set()

    def visit(node):
        if id(node) not in seen:
            seen.add(id(node))
            for child in node._children:
                visit(child)
            order.append(node)

    visit(root)
    root.grad = 1.0
    for node in reversed(order):
        for child, local in zip(node._children, node._local_grads):
            child.grad += local * node.grad


d = x.shape[-1]
rows, upstream, weights = x.reshape(-1, d).tolist(), grad_out.reshape(-1, d).tolist(), gamma.tolist()
dx, dgamma = [], [0.0] * d
for row, up in zip(rows, upstream):
    xs, gs = [Value(v) for v in row], [Value(v) for v in weights]
    mean = mul(add(*xs), Value(1.0 / d))
    centred = [add(v, mul(mean, Value(-1.0))) for v in xs]
    inv_std = power(add(mul(add(*[mul(c, c) for c in centred]), Value(1.0 / d)), Value(eps)), -0.5)
    root = add(*[mul(mul(mul(g, c), inv_std), Value(u)) for g, c, u in zip(gs, centred, up)])
    backward(root)
    dx.append([v.grad for v in xs])
    dgamma = [a + g.grad for a, g in zip(dgamma, gs)]
dbeta = grad_out.reshape(-1, d).sum(dim=0)
return (torch.tensor(dx, dtype=x.dtype).reshape(x.shape), torch.tensor(dgamma, dtype=gamma.dtype), dbeta)
'''


def test_a_part_kept_from_another_task_s_probe_still_refuses(reference, box):
    borrowed = [t for t in CHAPTER_00 if t != "micro_value_add"]
    sources = upload(reference, {"micro_value_add": KEEP_FOR_LATER, "layer_norm_backward": USE_KEPT}, stubs=borrowed)
    graded = dict(zip(GROUP, grade_group(_group_items(GROUP),
                                         Grading(Submission("kept", sources), reference, box, seed=5))))
    no_points(graded["layer_norm_backward"])
    # Answered again in its own worker, where nothing was kept: the group said nothing else.
    assert all("nothing was kept" in r.staff_diagnosis for r in graded["layer_norm_backward"]), \
        [r.staff_diagnosis[:300] for r in graded["layer_norm_backward"]]


# ============================================= 2. certified code is called, never read

# Every door to a certified function's code, tried from the block's forward (whose
# worker holds attention, LayerNorm, GELU and the feed-forward). A door that opens
# raises KeyError naming it (course staff read which); when none does, the block is
# computed as it should be and every check passes.
DOORS = '''
def _rt_certified(code) -> bool:
    import types
    return isinstance(code, types.CodeType) and code.co_filename.startswith("certified/")


def _rt_doors(block, x):
    import builtins, dis, gc, inspect, linecache, sys, types
    part = type(block.attention).__dict__["forward"]
    opened = []

    def attempt(name, how):
        try:
            found = how()
        except Exception:
            return
        if found:
            opened.append(name)

    attempt("getattr __code__", lambda: _rt_certified(getattr(part, "__co" + "de__")))
    attempt("object.__getattribute__", lambda: _rt_certified(object.__getattribute__(part, "__code__")))
    attempt("the descriptor", lambda: _rt_certified(types.FunctionType.__dict__["__code__"].__get__(part)))
    attempt("co_code", lambda: getattr(getattr(part, "__code__"), "co_code"))
    attempt("inspect.getsource", lambda: inspect.getsource(part))
    attempt("inspect.getclosurevars", lambda: inspect.getclosurevars(part).globals)
    attempt("dis", lambda: list(dis.get_instructions(part)))
    attempt("linecache", lambda: linecache.getlines("certified/model.py"))
    attempt("gc.get_referents", lambda: any(_rt_certified(c) for c in gc.get_referents(part)))
    attempt("gc.get_objects", lambda: any(_rt_certified(getattr(o, "__code__", None)) for o in gc.get_objects()))
    attempt("__globals__", lambda: any(_rt_certified(getattr(v, "__code__", None))
                                       for v in vars(part).get("__globals__", part.__globals__).values()))
    attempt("__closure__", lambda: any(_rt_certified(getattr(f, "__code__", None))
                                       for c in part.__closure__ or () for f in vars(c.cell_contents).values()))
    attempt("the loader's text", lambda: [m.__loader__.sources for n, m in list(sys.modules.items())
                                          if n.startswith("_certified") and getattr(m.__loader__, "sources", None)])
    attempt("the request", lambda: _rt_request())
    seen = []

    def tracer(frame, event, arg):
        seen.append(frame.f_code)
        return tracer

    attempt("sys.settrace", lambda: sys.settrace(tracer) or block.attention(x) and any(map(_rt_certified, seen)))
    sys.settrace(None) if "sys.settrace" in opened else None
    attempt("sys.setprofile", lambda: sys.setprofile(tracer) or block.attention(x) and any(map(_rt_certified, seen)))
    attempt("sys._current_frames", lambda: sys._current_frames())
    heard = []
    # (CPython drops the exception that refuses a hook: whether it hears is the test.)
    attempt("an audit hook", lambda: sys.addaudithook(lambda event, args: heard.append(event)) or
            sys.audit("rt.hello") or "rt.hello" in heard)
    attempt("frames below a tensor", lambda: _rt_frames_below(block, x))
    attempt("a traceback", lambda: _rt_traceback(block))
    attempt("a generator's frame", lambda: _rt_generator(block, x))
    attempt("the seal's own frame", lambda: _rt_seal_frame(part))
    if opened:
        raise KeyError("opened: " + ", ".join(opened))


def _rt_request():
    import sys
    frame, found = sys._getframe(), []
    while frame is not None:
        found += [v for v in frame.f_locals.values() if isinstance(v, dict) and v.get("certified")]
        frame = frame.f_back
    return found


class _RtSpy(torch.Tensor):
    """Handed to certified attention: torch calls back into the upload while it runs."""
    found = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        import inspect, sys
        for how in (lambda: sys._getframe(1), lambda: inspect.currentframe().f_back):
            try:
                frame = how()
                while frame is not None:
                    cls.found.append(frame.f_code)
                    frame = frame.f_back
            except Exception:
                pass
        return super().__torch_function__(func, types, args, kwargs or {})


def _rt_frames_below(block, x):
    _RtSpy.found.clear()
    block.attention(x.as_subclass(_RtSpy))
    return any(_rt_certified(c) for c in _RtSpy.found)


def _rt_traceback(block):
    try:
        block.attention(torch.zeros(1, 2, 3, 5))  # the wrong width: certified code raises
    except Exception as error:
        tb, found = error.__traceback__, []
        while tb is not None:
            try:
                frame = tb.tb_frame
                while frame is not None:
                    found.append(frame.f_code)
                    frame = frame.f_back
            except Exception:
                pass
            tb = tb.tb_next
        return any(_rt_certified(c) for c in found)
    return False


def _rt_seal_frame(part):
    # A refused read raises from the seal's audit hook, whose frame the traceback holds:
    # its locals would hand over what the seal guards with, to be emptied.
    try:
        getattr(part, "__co" + "de__")
    except Exception as error:
        tb = error.__traceback__.tb_next
        while tb is not None:
            for value in list(tb.tb_frame.f_locals.values()):
                if isinstance(value, dict):
                    value.clear()
            tb = tb.tb_next
    return _rt_certified(getattr(part, "__co" + "de__"))


def _rt_generator(block, x):
    import sys
    found = []

    def walker():
        while True:
            frame = sys._getframe()
            while frame is not None:
                found.append(frame.f_code)
                frame = frame.f_back
            yield

    steps = walker()
    frame = steps.gi_frame  # kept, to be climbed later from under certified code
    next(steps)
    return frame is not None
'''


def test_certified_code_cannot_be_read_by_any_door(reference, box):
    _, body = region_of(reference.sources, "block")
    sources = upload(reference, {"block": "_rt_doors(self, hidden)\n" + body}, append={"model": DOORS})
    all_points(grade(reference, box, "block", sources))


def test_a_read_the_code_does_not_catch_is_reported_as_such(reference, box):
    _, body = region_of(reference.sources, "block")
    read = 'getattr(type(self.attention).__dict__["forward"], "__co" + "de__").co_code\n'
    results = grade(reference, box, "block", upload(reference, {"block": read + body}))
    assert {r.status for r in results} == {FORBIDDEN}
    assert all("never read" in r.diagnosis for r in results), [r.diagnosis for r in results]


# Module-level code, run once per upload where the package is imported once for every
# task: a tracer, a profiler and an audit hook of the upload's own, waiting for the
# certified modules to be executed in each worker.
AT_IMPORT = '''
import sys as _rt_sys

_RT_SEEN = []


def _rt_watch(*args):
    _RT_SEEN.extend(a for a in args if getattr(a, "co_filename", "").startswith("certified/"))
    return _rt_watch


for _rt_name, _rt_what in (("add" + "audithook", lambda event, args: _rt_watch(*args)),
                           ("set" + "trace", _rt_watch), ("set" + "profile", _rt_watch)):
    try:
        getattr(_rt_sys, _rt_name)(_rt_what)
    except Exception:
        pass
'''


def test_nothing_set_up_at_import_sees_the_certified_modules_arrive(reference):
    from grader.run.engine import grade as grade_upload

    _, body = region_of(reference.sources, "block")
    sources = upload(reference, {"block": 'assert not _RT_SEEN, "saw certified code"\n' + body},
                     append={"model": AT_IMPORT})
    with Sandbox(Limits()) as sandbox:
        # engine.grade imports the package once where the runner can, as course grading
        # does (the tamper scan on: the names above are spelled past it).
        report = grade_upload(Submission("at import", sources), chapters=["05"], runner=sandbox, seed=3,
                              tasks={"block"})
    assert report.results and all(r.status == PASSED for r in report.results), \
        [(r.check.name, r.status, r.staff_diagnosis[:300]) for r in report.results]


# ========================================================= 2. the report is not a wire

# 256 classes of the upload's own and 256 lines to raise one from: the student must see
# one sentence, whichever the code picks.
def _wire(pick: int) -> tuple[dict, str]:
    classes = "\n".join(f"class Leak{i}(Exception):\n    pass" for i in range(256))
    lines = "\n".join(f"    if pick == {i}:\n        raise Leak{i}()" for i in range(256))
    helper = f"{classes}\n\n\ndef _rt_raise(pick):\n{lines}\n"
    body = f"_rt_raise({pick})\n"
    return {"body": body, "helper": helper}, f"Leak{pick}"


def test_the_class_and_line_the_upload_picks_never_reach_the_student(reference, box):
    seen = {}
    for pick in (3, 200):
        parts, name = _wire(pick)
        sources = upload(reference, {"gelu": parts["body"]}, append={"model": parts["helper"]})
        results = grade(reference, box, "gelu", sources)
        assert {r.status for r in results} == {ERROR}
        for r in results:
            assert name not in r.diagnosis and " line " not in r.diagnosis, r.diagnosis
            assert name in r.staff_diagnosis  # course staff keep the class, the line and the frames
        seen[pick] = [r.diagnosis for r in results]
        shown = results_json(GradeReport("wire", results, box.describe(), "the reference"))
        assert name not in str([t["output"] for t in shown["tests"]]) and name not in shown["output"]
    assert seen[3] == seen[200]
    assert "gelu raised an exception of its own class (hero_transformer/model.py)" in seen[3][0]


# The value path: a number the code returns, picked by what it read, is shown with ten
# significant digits at most, at most twelve numbers to a diagnosis (the error path
# above shows no value at all). Course staff keep every digit.
WIRE_VALUE = "return Value(37530000189541.123456 + self.data + (other.data if isinstance(other, Value) else other))\n"


def test_a_value_the_code_returns_is_shown_with_the_digits_a_check_needs(reference, box):
    from grader.run.feedback import BITS_PER_NUMBER, SHOWN_NUMBERS, value_bits

    results = grade(reference, box, "micro_value_add", upload(reference, {"micro_value_add": WIRE_VALUE}))
    failed = [r for r in results if r.status == "failed"]
    assert failed, [(r.check.name, r.status) for r in results]
    for r in failed:
        assert "37530000189540" not in r.diagnosis and "3.75" in r.diagnosis, r.diagnosis
        assert "3753000018954" in r.staff_diagnosis or "3.75" in r.staff_diagnosis
        assert value_bits(r.diagnosis) <= SHOWN_NUMBERS * BITS_PER_NUMBER + 8 * 60


def test_the_bound_on_values_rounds_counts_and_cuts():
    from grader.run.feedback import SHOWN_NUMBERS, bound_values

    assert bound_values("gave 0.0900305731703805, expected 0.09") == "gave 0.09003057317, expected 0.09"
    assert bound_values("gave −12345678912.5 and 107,776 and [2, 3, 4]") == "gave −1.234567891e+10 and 107,776 and [2, 3, 4]"
    many = bound_values(" ".join(str(i) for i in range(SHOWN_NUMBERS + 5)))
    assert many.split()[:SHOWN_NUMBERS] == [str(i) for i in range(SHOWN_NUMBERS)] and many.split()[-1] == "…"
    assert bound_values("gave '" + "x" * 100 + "'") == "gave '" + "x" * 32 + "…'"


def test_a_builtin_type_is_named_and_a_look_alike_is_not(reference, box):
    right = grade(reference, box, "gelu", upload(reference, {"gelu": "return [][1]\n"}))
    assert all("raised IndexError (hero_transformer/model.py)" in r.diagnosis for r in right), \
        [r.diagnosis for r in right]
    alike = upload(reference, {"gelu": "raise IndexError()\n"}, append={"model": "class IndexError(Exception):\n"
                                                                                 "    pass\n"})
    results = grade(reference, box, "gelu", alike)
    assert all("an exception of its own class" in r.diagnosis for r in results), [r.diagnosis for r in results]


def test_an_attribute_name_the_code_picks_is_not_echoed(reference, box):
    results = grade(reference, box, "gelu", upload(reference, {"gelu": 'return getattr(x, "leak_" + "x41")\n'}))
    assert all("leak_x41" not in r.diagnosis and "AttributeError" in r.diagnosis for r in results), \
        [r.diagnosis for r in results]
    assert all("leak_x41" in r.staff_diagnosis for r in results)


# The operator recorder (grader/run/inside/op_rules.py) climbs the frames that issued each
# operator, certified ones included (the hook trusts it to read their code): its cache,
# which any student code can reach, keeps torch's code only.
READ_THE_RECORDER_S_CACHE = '''
import sys as _rt_sys
_rt_cache = getattr(_rt_sys.modules["grader.run.inside.op_rules"], "_FRAME_KINDS", {})
if any(getattr(v[0], "co_filename", "").startswith("certified/") for v in list(_rt_cache.values())):
    raise KeyError("certified code in the recorder's cache")
'''


def test_the_operator_recorder_keeps_no_certified_code(reference, box):
    _, body = region_of(reference.sources, "block")
    all_points(grade(reference, box, "block", upload(reference, {"block": READ_THE_RECORDER_S_CACHE + body})))


# Three doors no audit hook closes: ctypes reads memory without an audit event in CPython
# 3.11 (a cast and an index are foreign calls and item reads; a function's code pointer
# sits at a fixed offset), a signal handler is handed the frame that runs when the signal
# lands, and gc.garbage under DEBUG_SAVEALL keeps the frames of a collected traceback. In
# the block's worker every part it holds runs apart (grader/run/inside/parts.py): each door
# opens, and finds only the calls across (a stub's code names the call and its guard; its
# frame holds its arguments), never the reference.
STUB_NAMES = {"__hero_part__", "__hero_guard__", "__kwdefaults__"}
STUB_LOCALS = {"self", "x", "past_key_value", "use_cache", "cfg", "__hero_guard__"}

READ_THROUGH_CTYPES = '''
import sys as _rt_sys
_rt_ct = getattr(_rt_sys, "mod" + "ules")["ct" + "ypes"]
_rt_found = []
for _rt_part in (type(self.attention).__dict__["forward"], type(self.attention).__dict__["__init__"],
                 type(self.attention).__dict__["split_heads"], type(self.feedforward).__dict__["forward"],
                 type(self.ln_attention).__dict__["forward"], type(self).__dict__["__init__"]):
    _rt_at = _rt_ct.cast(id(_rt_part) + 6 * 8, _rt_ct.POINTER(_rt_ct.c_void_p))[0]  # PyFunctionObject.func_code
    _rt_code = _rt_ct.cast(_rt_at, _rt_ct.py_object).value
    if getattr(_rt_code, "co_filename", "").startswith("certified/"):
        _rt_found.append(_rt_code)
if len(_rt_found) != 6:
    raise KeyError("the door did not open: %d certified functions read" % len(_rt_found))
_rt_more = sorted({_rt_n for _rt_c in _rt_found
                   for _rt_n in set(_rt_c.co_names) - STUB_NAMES - PUBLIC_NAMES.get(_rt_c.co_qualname, set())})
if _rt_more:
    raise KeyError("read the reference's code through ctypes: " + ",".join(_rt_more))
'''


def public_names(reference, rel: str) -> dict[str, set[str]]:
    """What the student's own copy of a module names in each function (every region
    stripped): a call across may name these besides the call and its guard."""
    found = {}

    def walk(code):
        found[code.co_qualname] = set(code.co_names)
        for constant in code.co_consts:
            if hasattr(constant, "co_qualname"):
                walk(constant)

    walk(compile(strip(reference.sources[rel]), rel, "exec"))
    return found


def test_ctypes_reads_no_reference_code(reference, box):
    _, body = region_of(reference.sources, "block")
    attack = f"STUB_NAMES = {STUB_NAMES!r}\nPUBLIC_NAMES = {public_names(reference, 'model.py')!r}\n"
    all_points(grade(reference, box, "block", upload(reference, {"block": attack + READ_THROUGH_CTYPES + body})))


# The timer runs in real time: it lands while the worker waits in a call across.
READ_THROUGH_A_SIGNAL = signal_handler_attack("""
for _ in range(20):
    self.attention(self.ln_attention(hidden), past_key_value, use_cache)
""", leaked="_rt_seen - STUB_LOCALS")

# A cache that fails to join the new keys: the part's frame holds q, k and v by then.
READ_THROUGH_GC_GARBAGE = gc_garbage_attack("self.attention(self.ln_attention(hidden), (None, None), use_cache)",
                                            leaked="_rt_seen - STUB_LOCALS")


def test_a_signal_handler_finds_no_reference_frame(reference, box):
    _, body = region_of(reference.sources, "block")
    attack = f"STUB_LOCALS = {STUB_LOCALS!r}\n" + READ_THROUGH_A_SIGNAL
    all_points(grade(reference, box, "block", upload(reference, {"block": attack + body})))


def test_gc_garbage_holds_no_reference_frame(reference, box):
    _, body = region_of(reference.sources, "block")
    attack = f"STUB_LOCALS = {STUB_LOCALS!r}\n" + READ_THROUGH_GC_GARBAGE
    all_points(grade(reference, box, "block", upload(reference, {"block": attack + body})))


# Chapter 00's Value operations run apart like every part: their Values cross node by node,
# and ctypes finds only the stub of Value.__mul__ in the worker.
READ_A_VALUE_OPERATION_THROUGH_CTYPES = '''
import sys as _rt_sys
_rt_ct = getattr(_rt_sys, "mod" + "ules")["ct" + "ypes"]
_rt_part = type(self).__dict__["__mul__"]
_rt_at = _rt_ct.cast(id(_rt_part) + 6 * 8, _rt_ct.POINTER(_rt_ct.c_void_p))[0]
_rt_code = _rt_ct.cast(_rt_at, _rt_ct.py_object).value
if set(getattr(_rt_code, "co_names", ())) - STUB_NAMES - PUBLIC_NAMES.get("Value.__mul__", set()):
    raise KeyError("read the reference's Value.__mul__ through ctypes")
'''


def test_ctypes_reads_no_value_operation_of_chapter_00(reference, box):
    _, body = region_of(reference.sources, "micro_value_add")
    attack = (f"STUB_NAMES = {STUB_NAMES!r}\nPUBLIC_NAMES = {public_names(reference, 'micro.py')!r}\n"
              + READ_A_VALUE_OPERATION_THROUGH_CTYPES)
    all_points(grade(reference, box, "micro_value_add", upload(reference, {"micro_value_add": attack + body})))


# ============================================= 4. no helper of the grader's does a task

# The worker holds the probes and what they call (grader/run/inside/probes_only.py), and a
# submission finds them through sys.modules. None may do a task's work: a probe's helper
# that built a + b, or ran the chain rule over a graph of Values, was a task done for the
# code. Here the code does nothing of its own: it calls every function of the checks' it
# can find, in the shapes a helper for the task would take, and keeps what works.
HELPERS_OF_THE_GRADER = '''
import sys as _rt_sys
_rt_helpers = [value for name, module in list(_rt_sys.modules.items()) if name.startswith("grader.checks")
               for value in list(vars(module).values())
               if callable(value) and not isinstance(value, type)
               and str(getattr(value, "__module__", "")).startswith("grader.checks")]
'''

ADD_BY_A_HELPER = HELPERS_OF_THE_GRADER + '''
for _rt_helper in _rt_helpers:
    for _rt_arguments in ((type(self), self, other), (self, other)):
        try:
            _rt_out = _rt_helper(*_rt_arguments)
        except BaseException:
            continue
        if isinstance(_rt_out, Value) and _rt_out._children:
            return _rt_out
raise NotImplementedError("micro_value_add")
'''

BACKWARD_BY_A_HELPER = HELPERS_OF_THE_GRADER + '''
for _rt_helper in _rt_helpers:
    for _rt_arguments in ((self,), (type(self), self)):
        try:
            _rt_helper(*_rt_arguments)
        except BaseException:
            continue
'''


@pytest.mark.parametrize("task, body", [("micro_value_add", ADD_BY_A_HELPER), ("micro_backward", BACKWARD_BY_A_HELPER)],
                         ids=["add", "backward"])
def test_no_helper_of_the_grader_does_the_task(reference, box, task, body):
    no_points(grade(reference, box, task, upload(reference, {task: body})))


# Every helper a probe reaches stays in the worker, within the submission's reach. Each was
# read and does no task's work a submission could call instead of writing its own (what it
# is, beside its name). A helper new to this list is read the same way before it joins.
REVIEWED_HELPERS = {
    "_api.PartCalls": "records what the named parts of a module were called with",
    "_api._kept": "a detached copy of a tensor",
    "_api.try_call": "calls the code under test, keeping what it raised",
    "ch00_micro.common._apply_op": "applies the student's own operation by name",
    "ch00_micro.common.data_of": "reads .data of Values into floats",
    "ch00_micro.common.graph_of": "a graph's shape as numbers, in no order a backward could use",
    "ch00_micro.common.kind_of": "a type's name",
    "ch00_micro.common.micro_tables": "a model's weight tables as floats",
    "ch00_micro.common.model_of": "builds the student's MicroGPT from those tables",
    "ch00_micro.common.probe_vector_function": "calls the student's function, then its backward",
    "ch00_micro.common.values_of": "wraps floats in the student's Value",
    "ch00_micro.micro_backward._order_graph": "one fixed graph, written out with the constructor",
    "ch00_micro.micro_backward.hidden._random_graph": "a random graph of the student's own operations",
    "ch00_micro.micro_block.run_block": "calls the student's block",
    "ch00_micro.micro_forward.run_forward": "calls the student's forward",
    "ch00_micro.micro_loss._second_call": "calls the student's loss again",
    "ch00_micro.micro_loss.run_loss": "calls the student's loss",
    "ch00_micro.micro_sample._Letters": "a tokenizer of consecutive letters, wrong on any course vocabulary",
    "ch00_micro.micro_sample._Scripted": "a stand-in model that returns scripted logits",
    "ch00_micro.micro_sample._peaked": "logits peaked on one token",
    "ch01_tokens.common.plain_ints": "reads a list of ints",
    "ch02_embedding.embedding._embedding": "builds the student's Embedding",
    "ch03_positions.positions._positions": "builds the student's positional embedding",
    "ch04_attention.common.loaded_attention": "the student's attention, loaded with given weights",
    "ch04_attention.common.new_attention": "builds the student's attention",
    "ch04_attention.diagnosis.CatLog": "records which tensors torch.cat was given",
    "ch05_block.block.block_of": "builds the student's block",
    "ch06_backward.common.shipped": "an answer's gradients as a dict",
    "ch07_model.common.model_of": "builds the student's model",
    "ch08_training.adamw_init._held": "reads which tensors an optimizer holds",
    "ch08_training.adamw_init._state_report": "reads an optimizer's state",
    "ch08_training.common.leaves_of": "lists a model's parameters",
    "ch08_training.common.model_of": "builds the student's model",
    "ch08_training.evaluate.vocab_size": "the distinct characters of documents, and BOS",
    "ch08_training.hidden.oracles.quadratic_loss": "a toy loss to train on, no course task",
    "ch08_training.train_loop._masked_loss": "passes the call on to the student's loss",
    "ch09_sampling.common._passes_through": "whether a call reached the model",
    "ch09_sampling.common._raised": "what the code raised",
    "ch09_sampling.common.at_temperature": "calls the student's sampler",
    "ch09_sampling.common.attempt": "calls the student's code, keeping what it raised",
    "ch09_sampling.common.seeded_generator": "a torch generator with a seed",
    "ch09_sampling.generate._at_each_position": "the student's own model, one position at a time (no causal forward)",
    "ch09_sampling.generate._recording": "records the calls a model gets",
    "ch09_sampling.generate.model_of": "builds the student's model",
    "course.Unfit": "an exception class",
    "course.config": "the student's Config at a chapter's sizes",
    "course.fit": "the student's module, checked fit to be probed",
    "course.load_state": "the student's module holding given weights",
}


def test_the_helpers_a_worker_keeps_are_the_reviewed_ones():
    from grader.checks._api import DECLARED
    from grader.run.inside import probes_only

    probes_only.import_check_modules()
    modules = probes_only._check_modules()
    kept = probes_only.reachable_from_probes(modules)
    probes = {id(d.probe) for module in modules.values() for d in vars(module).get(DECLARED, [])}
    helpers = {f"{value.__module__}.{value.__qualname__}".removeprefix("grader.checks.")
               for module in modules.values() for value in vars(module).values()
               if id(value) in kept and id(value) not in probes}
    assert helpers == set(REVIEWED_HELPERS), (sorted(helpers - set(REVIEWED_HELPERS)),
                                              sorted(set(REVIEWED_HELPERS) - helpers))
