"""The vocabulary of a check: what it is (data) and three small functions.

    probe(ns, **inputs)        runs in the sandbox on the student's code; returns plain data
    judge(out, inputs, expected) runs in the grader (inputs whose key starts with "_"
                               stay here and never reach the probe); returns None when right, else the
                               diagnosis a student can act on
    expect(ref, inputs)        optional, runs in the grader on the reference (hidden checks)

`ns` exposes the graded package's modules (ns.model, ns.tokenizer, ...), the task
under test being the student's and every other task certified.
"""

from __future__ import annotations

import contextvars
import importlib
import math
import re
import sys

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from grader.checks.facts import OWN_PARTS
from grader.checks._slots import constant, hidden, own, public  # noqa: F401 - the judges' typed values

# A rule (Task.forbidden_ops, in grader/run/inside/op_rules.py's patterns) naming torch's
# whole library: judged by where operators are issued, since no code of torch's could be
# refused in place without breaking the rest.
LIBRARY = "torch.*"

# The seed of the public checks with fixed inputs. It is the seed the grader's own records
# (the catch table, the outcome dumps) grade with, so those inputs are the ones every
# verdict recorded before they were fixed was given.
PUBLIC_SEED = 20261129


@dataclass(frozen=True)
class Check:
    name: str  # ch05.block.zero_branch_identity
    task: str
    points: float
    summary: str  # one line: what a pass means
    probe: Callable[..., Any]
    judge: Callable[[Any, dict, Any], "str | None"]
    inputs: "dict | Callable[[torch.Generator], dict]" = field(default_factory=dict)
    expect: "Callable[[Any, dict], Any] | None" = None
    hidden: bool = False
    timeout: float = 10.0  # seconds; Limits.check_seconds caps it
    # Inputs to probe one at a time, each in a fresh worker, passed under the first
    # name; the judge gets {name: result}. For relational checks (is output A the same
    # as output B?) so that no state kept in the student's process can link the runs.
    separately: tuple[str, ...] = ()
    # Halves of one comparison (a full pass and the same pass through the KV cache), each
    # probed in a fresh worker with part=<name> and earlier=<the results so far, by
    # part>; the judge gets the parts' dict results merged into one. So a submission
    # cannot pass by remembering one half's answer and giving it back as the other.
    parts: tuple[str, ...] = ()
    # A property the identity or another body that computes nothing also has (the output
    # keeps its shape, the future does not leak in): worth its points only once these
    # value checks of the same task (short names, e.g. ("formula",)) pass too. The engine
    # withholds them as it judges the gated check (grader.run.verdicts.gated).
    gated_by: tuple[str, ...] = ()
    # The same inputs on every run, instead of the run's random ones: a public check whose
    # judge reads what the kit computed on its inputs (grader/checks/facts.py) needs them.
    # The kit draws them once, from a generator seeded with PUBLIC_SEED and the check's
    # name, and stores them with the facts, so that every platform's torch gets the very
    # same numbers (a random draw is not bit for bit the same everywhere).
    fixed_inputs: bool = False
    # Tasks taught after this check's own whose code its probe runs (lm_init's check that
    # the parts it builds fit the forward pass runs lm_forward): where the student's own
    # parts stand in, the check waits on them while they fail their own checks, and its
    # failure never makes those tasks wait in turn (grader.run.verdicts.apply_waits). A test
    # traces every public probe on the reference and asks for each such task here.
    runs_later: tuple[str, ...] = ()

    @property
    def chapter(self) -> str:
        return self.name.split(".")[0].removeprefix("ch")

    def make_inputs(self, generator: torch.Generator) -> dict:
        if self.fixed_inputs:
            from grader.checks.facts import stored_inputs

            stored = stored_inputs(self.name)
            return stored if stored is not None else self.fresh_inputs()
        return self.inputs(generator) if callable(self.inputs) else dict(self.inputs)

    def fresh_inputs(self) -> dict:
        """A fixed check's inputs drawn anew, as the kit draws them to store them."""
        generator = torch.Generator().manual_seed(PUBLIC_SEED + sum(map(ord, self.name)))
        return self.inputs(generator) if callable(self.inputs) else dict(self.inputs)


@dataclass(frozen=True)
class Task:
    """A graded unit: one solution region, owned by module:qualname."""

    name: str
    module: str
    qualname: str
    title: str
    forbidden: tuple[str, ...] = ()  # dotted names whose use scores 'forbidden'
    forbidden_methods: tuple[str, ...] = ()  # attribute names forbidden on any object
    # Judged by what runs, however it was spelled: torch operators (fnmatch patterns on
    # the base name, e.g. "native_layer_norm", "_foreach_*") the probe may not run, torch's
    # own Python code that does the task (patterns with a dot, on module and qualified
    # name, e.g. "torch.optim.adam.*"; torch's Python implementations of a forbidden
    # operator, in torch._refs and torch._decomp, need none), torch's library as a whole
    # (torch_library_except: any operator issued from inside torch's Python code is the
    # library doing the task, unless that code is fair everywhere, as the tensor,
    # nn.Module, Linear, Embedding, Dropout and autograd are, or a building block the
    # lesson lets the task use), and whether autograd may run at all (reverse or forward
    # mode, torch.func).
    forbidden_ops: tuple[str, ...] = ()
    no_autograd: bool = False
    # What the task's lesson promises its function receives, as (argument, number of axes):
    # ("x", 3) for a lesson that says x is [B, T, d]. Every call any chapter's probes make
    # into the function keeps it (python -m grader.generate.promises, run by make student).
    takes: tuple[tuple[str, int], ...] = ()
    # What the lesson promises of an argument whose shape varies, in its words: ("x", "of
    # any leading shape ([..., d])"). A crash is explained by it (grader/run/feedback.py,
    # broken_promise): the promise beside the shape the call passed.
    promises: tuple[tuple[str, str], ...] = ()
    # Where no operator rule is in force, whether a crash is still named by the operator
    # that raised (a Python call per operator): off for tasks whose probes train or
    # generate (thousands of operators), whose crashes are named without it.
    names_failing_operator: bool = True
    # Whether the reference runs in the certified parts' own process (grader/run/inside/
    # parts.py), its values carried as data (tensors, numbers, strings, containers, torch's
    # generators, the package's and torch.nn's objects, and chapter 00's Values node by
    # node): then a worker that builds on it holds none of its code.
    crosses: bool = True
    # Whether the part reads and sets the whole graph below the Values it is given (chapter
    # 00's backward): every node goes with the call, not only those the parts' process has
    # not met yet.
    walks_graph: bool = False
    # Whether the part's answer is a function of the numbers it is given (chapter 00's
    # operations, softmax, RMSNorm, one attention head: the Values' data, never their
    # graph or grads) and changes none of them: a probe asks it once for the same numbers.
    numbers_only: bool = False


# Operator families, for the tasks' forbidden_ops.
NORM_KERNELS = ("layer_norm", "native_layer_norm", "group_norm", "native_group_norm", "batch_norm",
                "native_batch_norm", "_native_batch_norm_legit*", "_batch_norm*", "instance_norm", "rms_norm",
                "_fused_rms_norm*", "*_layer_norm", "*_group_norm")
GELU_KERNELS = ("gelu", "gelu_", "_addmm_activation")
# Building blocks, for the tasks that judge torch's library by where it runs: the standard
# normal's CDF Φ as Normal(0, 1).cdf (torch.special.ndtr is an operator, fair anyway), with
# what a Normal runs to be built and to check its arguments; its density φ, as log_prob,
# for GELU's derivative.
NORMAL_CDF = ("torch.distributions.normal.Normal.__init__", "torch.distributions.normal.Normal.cdf",
              "torch.distributions.distribution.Distribution.__init__",
              "torch.distributions.distribution.Distribution._validate_sample", "torch.distributions.constraints.*",
              "torch.distributions.utils.broadcast_all*")
NORMAL_DENSITY = ("torch.distributions.normal.Normal.log_prob",)


def torch_library_except(building_blocks: tuple[str, ...] = ()) -> tuple[str, ...]:
    """forbidden_ops patterns: torch's library, judged by where each operator is issued
    (grader/run/inside/op_rules.py), but for what is fair in every task and the task's
    `building_blocks` (patterns of torch's code, on module and qualified name)."""
    if not all(isinstance(pattern, str) for pattern in building_blocks):
        raise TypeError("building blocks are patterns of torch's code, as strings")
    return (LIBRARY,) + tuple(f"!{pattern}" for pattern in building_blocks)




def own_parts(inputs: dict) -> tuple[str, ...]:
    """The tasks this check builds on that ran as the student wrote them: () wherever the
    course's certified parts stood in."""
    return tuple(inputs.get(OWN_PARTS, ()))


class OwnPartsVerdict(str):
    """A diagnosis a judge reached on the student's own parts, from how the task wired
    what they received and returned: the task's own mistake, whatever its parts compute.
    Any other failure of a check, where no certified part stood in, waits on a part the
    task builds on that fails its own checks (grader.run.verdicts.apply_waits)."""


DECLARED = "__declared_checks__"  # where @check lists a module's checks, in declaration order
CHAPTER_PACKAGE = re.compile(r"ch(?P<number>\d\d)_\w+")  # a chapter's package: ch05_block


@dataclass(frozen=True, eq=False)
class CheckHandle:
    """A check as its module declares it: what @check returns, so that the module holds it
    under a name (the check's own, by the kit's convention) and the rest of the kit (a
    mutant's expected failure, the facts a public check reads, a test) names the check
    by importing it. A check renamed or removed is then an ImportError where it was
    named, never a name gone stale.

    Its full name, chNN.<task>.<short name>, comes from where it is declared: the chapter
    from the package (grader/checks/chNN_*/), the task from the task folder's TASKS (or
    `task=`, where TASKS has several). Calling it calls its judge; `.check` is the Check
    the catalogue holds."""

    short_name: str
    declared_task: "str | None"  # task=; None: the task folder's one task
    points: float
    summary: str
    probe: Callable[..., Any]
    judge: Callable[[Any, dict, Any], "str | None"]
    more: dict
    module: str  # where it is declared: grader.checks.chNN_<topic>.<task folder>[.hidden]

    def __call__(self, *args, **kwargs):
        return self.judge(*args, **kwargs)

    @property
    def chapter(self) -> str:
        """The chapter's number: "05"."""
        return CHAPTER_PACKAGE.fullmatch(self.module.split(".")[2])["number"]

    @property
    def task(self) -> str:
        # The task folder's package; a hidden module is its submodule.
        folder = importlib.import_module(".".join(self.module.split(".")[:4]))
        return self.task_among([t.name for t in folder.TASKS])

    @property
    def name(self) -> str:
        """The full name, as reports and gradebooks give it: ch05.gelu.exact_values, say."""
        return self.full_name(self.chapter, self.task)

    @property
    def check(self) -> Check:
        """The Check the catalogue builds of this declaration (an equal one: a Check is a value)."""
        return self.build(self.chapter, self.task)

    def task_among(self, names: list[str]) -> str:
        """Which of its task folder's TASKS (their names) the check grades: the one there
        is, or the one `task=` names; ValueError where that is not one of them."""
        if self.declared_task is None:
            if len(names) != 1:
                raise ValueError(f"{self.module}: check '{self.short_name}' must say which of {names} it grades "
                                 f"(task=...)")
            return names[0]
        if self.declared_task not in names:
            raise ValueError(f"{self.module}: check '{self.short_name}' grades '{self.declared_task}', not a task "
                             f"of {names}")
        return self.declared_task

    def full_name(self, number: str, task: str) -> str:
        return f"ch{number}.{task}.{self.short_name}"

    def build(self, number: str, task: str) -> Check:
        more = dict(self.more)
        if "gated_by" in more:
            gates = more["gated_by"]
            more["gated_by"] = (gates,) if isinstance(gates, str) else tuple(gates)
        return Check(name=self.full_name(number, task), task=task, points=self.points, summary=self.summary,
                     probe=self.probe, judge=self.judge, **more)


def check(name: str, points: float, summary: str, *, probe, task: "str | None" = None, **more):
    """Declare a check on its judge, and return its CheckHandle:

        @check("lookup", 3, "ids [2, 3] give vectors [2, 3, 5]", probe=probe_lookup, inputs=...)
        def lookup(out, inputs, expected): ...

    The module then holds the handle under the check's name, which is how the rest of the
    kit imports it. The chapter and the task come from the module the judge lives in (its
    package and its TASKS; `task=` picks one where a module holds several). A second
    check judged by the same function is declared on its handle, after it:

        shared = check("shared", 1, "...", probe=probe_lookup, inputs=...)(lookup)

    (a handle given where a judge is expected stands for its judge)."""
    def declare(judge):
        judge = judge.judge if isinstance(judge, CheckHandle) else judge
        handle = CheckHandle(name, task, points, summary, probe, judge, more, judge.__module__)
        sys.modules[judge.__module__].__dict__.setdefault(DECLARED, []).append(handle)
        return handle

    return declare


# ----------------------------------------------------------------- judging helpers


def as_tensor(value, what: str = "the output") -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    raise TypeError(f"{what} should be a tensor, got {type_name(value)}")


def shape_problem(actual, expected_shape, what: str = "the output") -> "str | None":
    if not isinstance(actual, torch.Tensor):
        return f"{what} should be a tensor, got {type_name(actual)}"
    if tuple(actual.shape) != tuple(expected_shape):
        return f"{what} has shape {list(actual.shape)}, expected {list(expected_shape)}"
    return None


def matches(actual, expected: torch.Tensor, atol: float = 1e-8, rtol: float = 1e-6) -> bool:
    if not isinstance(actual, torch.Tensor) or tuple(actual.shape) != tuple(expected.shape):
        return False
    if not torch.isfinite(actual.double()).all() and torch.isfinite(expected.double()).all():
        return False
    return torch.allclose(actual.double(), expected.double(), atol=atol, rtol=rtol)


def compare(actual, expected: torch.Tensor, what: str = "the output", atol: float = 1e-8,
            rtol: float = 1e-6) -> "str | None":
    """None when actual matches expected; otherwise a description without values."""
    problem = shape_problem(actual, expected.shape, what)
    if problem:
        return problem
    if not torch.isfinite(actual.double()).all():
        return f"{what} contains NaN or inf"
    if matches(actual, expected, atol, rtol):
        return None
    error = (actual.double() - expected.double()).abs()
    where = tuple(int(i) for i in torch.nonzero(error == error.max())[0])
    said = f"{what} is off by up to {error.max().item():.3g} (first at index {list(where)})"
    steady = steady_offset(actual, expected)
    if _PRECISION_RAN.get() is False and within_float32(actual, expected):
        # Every operation ran in float64, yet the answer is off by float32's order: the formula.
        said += (f", though every operation of your code ran in float64: the formula itself differs, "
                 f"{steady or 'by that much (a rounded constant, an eps where there is none)'}; this check allows "
                 f"{constant(f'{atol:g}')} + {constant(f'{rtol:g}')} × |value|")
    elif steady:
        said += f", {steady}"
    return said


def steady_offset(actual, expected) -> str:
    """"everywhere by about +2e-07: one constant added where none belongs …" where actual
    differs from expected by a near-constant amount, or by a near-constant factor, over all
    its values (two or more, differing): a slip no named mistake covers, told with its size.
    "" elsewhere. For one number, small_offset."""
    if not isinstance(actual, torch.Tensor) or actual.shape != expected.shape or actual.numel() < 2:
        return ""
    a, e = actual.double().flatten(), expected.double().flatten()
    if not (torch.isfinite(a).all() and torch.isfinite(e).all()):
        return ""
    difference = a - e
    size = float(difference.abs().max())
    if size == 0 or float(e.abs().max()) == 0:
        return ""
    if float(difference.max() - difference.min()) <= 0.01 * size:
        amount = float(difference.mean())
        small = abs(amount) <= 1e-3 * float(e.abs().max())
        return (f"everywhere by about {amount:+.2g}: one constant added where none belongs "
                f"({'an eps, a rounded constant' if small else 'a constant term, a bias'})")
    nonzero = e.abs() > 1e-12 * float(e.abs().max())
    if int(nonzero.sum()) >= 2 and bool((a[~nonzero].abs() <= 1e-12 * float(e.abs().max())).all()):
        ratio = a[nonzero] / e[nonzero]
        spread, away = float(ratio.max() - ratio.min()), float((ratio - 1).abs().max())
        if away > 0 and spread <= 0.01 * away:
            factor = float(ratio.mean())
            step = factor - 1
            if abs(step) <= 1e-3:
                return (f"everywhere by a factor of about 1 {'+' if step > 0 else '-'} {abs(step):.2g}: a small "
                        f"scale slip (a rounded constant, a divisor off by a little)")
            return (f"everywhere {factor:.4g} times the right value: a factor missing or added (a divisor, a count, "
                    f"a scale)")
    return ""


def small_offset(got: float, want: float) -> str:
    """" (off by +4e-07, a relative +4.4e-07: …)" for one number a little off (at most a
    thousandth of it): the size of the slip, said where no named mistake covers it."""
    try:
        got, want = float(got), float(want)
    except (TypeError, ValueError):
        return ""
    difference = got - want
    if not (math.isfinite(got) and math.isfinite(want)) or difference == 0 \
            or abs(difference) > 1e-3 * max(1.0, abs(want)):
        return ""
    relative = f", a relative {difference / want:+.2g}" if want else ""
    return (f" (off by {difference:+.2g}{relative}: a small slip such as an eps in a log or a square root, or a "
            f"rounded constant)")


def compare_to_float32(actual, expected: torch.Tensor, what: str = "the output", atol: float = 1e-9,
                       rtol: float = 1e-7) -> "str | None":
    """compare(), passing what agrees to float32's precision too: how every check but the
    task's precision check compares, so that float32 arithmetic is named once."""
    problem = compare(actual, expected, what, atol, rtol)
    return None if problem and float32_close(actual, expected) else problem


def numbered(label: str, number) -> str:
    """"call 3", "random document 2": which of a check's cases a sentence is about, said
    as "a call", "a random document" once a hidden check is published (which case fails
    first depends on the hidden inputs)."""
    return hidden(f"{label} {number}", f"a {label}")


class SetAside(str):
    """A diagnosis of one property of the answer that the kit can set aside (ids of an integer
    dtype other than int64, say): the grader judges the answer again as `corrected(out)`
    gives it, and the sentence names both ("…; with that fixed, top-k keeps …"), so one
    slip does not hide the others. The check fails all the same."""

    corrected: Callable

    def __new__(cls, text: str, corrected: Callable) -> "SetAside":
        made = super().__new__(cls, text)
        made.corrected = corrected
        return made


def as_int64(value):
    """`value` with every integer tensor in it (not bool) made int64: the correction of ids of
    another integer dtype (SetAside)."""
    if isinstance(value, torch.Tensor):
        integer = not value.is_floating_point() and not value.is_complex() and value.dtype != torch.bool
        return value.long() if integer and value.dtype != torch.long else value
    if isinstance(value, dict):
        return {key: as_int64(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(as_int64(item) for item in value)
    return value


def int64_ids_problem(ids, what: str = "the ids") -> "SetAside | str | None":
    """None for int64 ids; for ids of another integer dtype a SetAside (the rest is judged as
    if they were int64); else the plain problem."""
    if not isinstance(ids, torch.Tensor) or ids.dtype == torch.long:
        return None
    said = f"{what} should be int64 ids (torch.long), got {ids.dtype}"
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        return said
    return SetAside(said, as_int64)


class Named(str):
    """A diagnosis, or a mistake's sentence, that says which mistake it names: a key of
    the task's MISTAKES (grader/run/verdicts.py). A judge's own sentence names one with
    Named("a constant vector gives 0 ...", "no_affine")."""

    mistake: str

    def __new__(cls, text: str, mistake: str):
        made = super().__new__(cls, text)
        made.mistake = mistake
        return made


_heard: "contextvars.ContextVar[list | None]" = contextvars.ContextVar("named_mistakes", default=None)


class listening:
    """`with listening() as heard:` around a judge: heard.mistake is the last mistake a
    helper matched while it ran (first_diagnosis notes each), or ""."""

    def __enter__(self):
        self.keys: list[str] = []
        self._token = _heard.set(self.keys)
        return self

    def __exit__(self, *exc):
        _heard.reset(self._token)

    @property
    def mistake(self) -> str:
        return self.keys[-1] if self.keys else ""


def _note(text) -> None:
    heard = _heard.get()
    if heard is not None and getattr(text, "mistake", ""):
        heard.append(text.mistake)


# Mistakes whose output is what a body that computes nothing gives (gelu's "the output
# equals the input"): a value check that names one of these does not show that the task
# computes, so the property checks it gates wait (grader.run.verdicts.gated).
NOTHING_COMPUTED = frozenset({"identity"})


def naming(mistake: str, text: str) -> str:
    """`text`, a diagnosis that names `mistake` (a key of the task's MISTAKES), as the
    judge returns it: the key is heard by the engine however the text is wrapped after."""
    _note(Named(text, mistake))
    return text


def named(texts: "dict[str, str]", outputs: dict) -> "list[tuple[str, Any]]":
    """Each mistake's sentence beside what it outputs, paired by the mistake's name: the
    sentences live in the public check module, the outputs are computed by the kit (facts
    or hidden/), and nothing pairs them by position. Each sentence carries its name."""
    return [(Named(texts[name], name), output) for name, output in outputs.items()]


def diagnose(actual, right, mistakes: "list[tuple[str, Any]]", what: str = "the output", atol: float = 1e-9,
             rtol: float = 1e-9, named_atol: float = 1e-7, named_rtol: float = 1e-6) -> "str | None":
    """The diagnosis most value checks give: None where actual matches right; else the first
    named mistake actual reproduces (to the looser named tolerance); else how far off it is."""
    if compare(actual, right, atol=atol, rtol=rtol) is None:
        return None
    return (first_diagnosis(actual, mistakes, atol=named_atol, rtol=named_rtol)
            or compare(actual, right, what, atol=atol, rtol=rtol))


def first_diagnosis(actual, candidates: "list[tuple[str, torch.Tensor]]", atol=1e-8, rtol=1e-6,
                    right: "torch.Tensor | None" = None) -> "str | None":
    """The explanation of the first known mistake whose output actual reproduces. Given the
    right output, a mistake that lands within float32's precision of it (eps forgotten
    where it barely matters, a term that vanishes on these inputs) is named only when
    actual reproduces it to float64's precision: the right formula computed in float32
    lands as close to it, and is no such mistake."""
    for explanation, wrong in candidates:
        if right is not None and within_float32(wrong, right):
            if matches(actual, wrong, *FLOAT64_MATCH):
                _note(explanation)
                return explanation
        elif matches(actual, wrong, atol, rtol):
            _note(explanation)
            return explanation
    return None


# --------------------------------------------------------------------- precision
# The probes pass float64 tensors and the judges hold float64's figures. Code that computes
# in float32 somewhere (a .float(), a torch.zeros(...) or torch.tensor(...) made without a
# dtype, a float32 constant tensor) lands within float32's rounding of the right answer and
# far outside float64's. That is one finding, not a wrong formula: the task's precision
# check (the one whose summary says float64) names it with float32_verdict, and each other
# check of the task judges such a result to float32's precision (float32_close) and passes
# it, so the student reads it once, in one sentence.
#
# Whether the code computed in float32 is read from what ran, never guessed from the size
# of the error: a judge that leans on float32's precision is noted (precision_known), and
# the grader runs the probe again with the worker noting the first operator of the code's
# own that computed in a lower precision (grader/run/inside/op_rules.py, LowPrecision). Where
# one ran, the leniency stands and the precision check names that operator; where none did
# (a float64 formula with a rounded constant, say), every check judges to its own tolerance.

FLOAT32_STEP = torch.finfo(torch.float32).eps  # 2**-23, float32's relative rounding step
# How many such steps of the largest magnitude involved a float32 computation may drift by
# (a few dozen operations, each rounding, some cancelling): the kit's float32 twins of every
# task stay within a quarter of it, and every classic mistake it names lies beyond it or is
# named to float64's precision (first_diagnosis).
FLOAT32_STEPS = 64
FLOAT64_MATCH = (1e-11, 1e-9)  # atol, rtol: the same numbers up to float64's rounding (and the facts' ten digits)
# Closer than this, relative to the largest magnitude, two answers differ by float64's
# rounding alone: leaning on float32's precision there needs no word from the worker.
FLOAT64_LEVEL = 1e-10

# What the code computed in, for the judge running in this thread: None while not known,
# the worker's note of the first lower-precision operator ({"op", "dtype", "shape",
# "made"}), or False where every operator of the code's ran in float64.
_PRECISION_RAN: contextvars.ContextVar = contextvars.ContextVar("precision_ran", default=None)
# Where a judge leaned on float32's precision while it was not known: the list a
# precision_known block collects into.
_LENIENCY_NOTES: contextvars.ContextVar = contextvars.ContextVar("leniency_notes", default=None)


class precision_known:
    """`with precision_known(ran) as leaned:` judges with `ran` (see _PRECISION_RAN) as what
    the code computed in; `leaned` is then non-empty where a judge leaned on float32's
    precision, or named float32, while that was not known."""

    def __init__(self, ran=None):
        self.ran, self.notes = ran, []

    def __enter__(self) -> list:
        self._tokens = (_PRECISION_RAN.set(self.ran), _LENIENCY_NOTES.set(self.notes))
        return self.notes

    def __exit__(self, *exc) -> None:
        _PRECISION_RAN.reset(self._tokens[0])
        _LENIENCY_NOTES.reset(self._tokens[1])


def _lean_on_float32() -> bool:
    """Whether float32's precision may pass an answer now: not where the worker saw every
    operator of the code's run in float64. Noted while that is not known."""
    ran = _PRECISION_RAN.get()
    if ran is None and (notes := _LENIENCY_NOTES.get()) is not None:
        notes.append(True)
    return ran is not False


def low_precision_words() -> str:
    """" (aten.mul on a float32 tensor of shape [4, 8])": the operator the worker saw compute
    in a lower precision, where it told one; else ""."""
    ran = _PRECISION_RAN.get()
    if not isinstance(ran, dict):
        return ""
    shape, dtype, op = ran.get("shape") or [], ran.get("dtype", "float32"), ran.get("op", "an operator")
    tensor = f"a {dtype} tensor of shape {list(shape)}" if shape else f"a {dtype} number"
    if op in _MADE_BY:
        return f" ({_MADE_BY[op]} made {tensor}: {op})"
    return f" ({op} {'made' if ran.get('made') else 'on'} {tensor})"


# Operators whose float32 result a student wrote under another name.
_MADE_BY = {"aten._to_copy": ".float() or .to()", "aten.lift_fresh": "torch.tensor(...) without a dtype",
            "aten.scalar_tensor": "a number made into a tensor without a dtype"}


def off_by(actual, expected) -> float:
    """The largest absolute difference of two tensors of one shape (inf if either is not finite)."""
    difference = (actual.double() - expected.double()).abs()
    return float(difference.max()) if difference.numel() else 0.0


def float32_tolerance(expected, scale: "float | None" = None) -> float:
    """How far float32 arithmetic may land from `expected`: FLOAT32_STEPS rounding steps of its
    largest magnitude, or of `scale`, the magnitude of what it was computed from where that is
    larger (a sum that cancels, a loss of logits around 1e4)."""
    magnitude = float(expected.double().abs().max()) if expected.numel() else 0.0
    return FLOAT32_STEPS * FLOAT32_STEP * max(magnitude, scale or 0.0)


def float32_close(actual, expected, scale: "float | None" = None, twin=None) -> bool:
    """actual (the code's answer) has expected's shape and agrees with it to float32's precision
    (float32_tolerance), finite wherever expected is, and the code computed in float32
    (precision_known: where the worker saw it compute in float64 throughout, False). twin: the
    right answer computed in float32 from the inputs rounded to float32, where rounding the
    inputs alone moves the answer further than float32's steps of the answer do (a loss of
    logits around 1e4): four times its distance is allowed."""
    if not within_float32(actual, expected, scale, twin):
        return False
    if off_by(actual, expected) <= FLOAT64_LEVEL * max(1.0, float(expected.double().abs().max())):
        return True
    return _lean_on_float32()


def within_float32(actual, expected, scale: "float | None" = None, twin=None) -> bool:
    """float32_close's measure alone, for two answers neither of which the code computed."""
    if not isinstance(actual, torch.Tensor) or not isinstance(expected, torch.Tensor):
        return False
    if tuple(actual.shape) != tuple(expected.shape) or actual.is_complex() or not (
            actual.is_floating_point() or expected.is_floating_point()):
        return False
    a, e = actual.double(), expected.double()
    if not torch.isfinite(a).all() or not torch.isfinite(e).all():
        return False
    allowed = float32_tolerance(e, scale)
    if isinstance(twin, torch.Tensor) and tuple(twin.shape) == tuple(e.shape) and torch.isfinite(twin).all():
        allowed = max(allowed, 4 * off_by(twin, e))
    return off_by(a, e) <= allowed


def matches_to_float32(actual, expected, atol: float = 1e-8, rtol: float = 1e-6,
                       scale: "float | None" = None) -> bool:
    """matches() to float64's tolerance, or float32_close: how a check that is not the task's
    precision check compares, so that float32 arithmetic is named once, not everywhere."""
    return matches(actual, expected, atol, rtol) or float32_close(actual, expected, scale)


class Float32Verdict(str):
    """The precision check's diagnosis of a result right to float32's precision only."""


def float32_verdict(what: str, computes: str, keep: str, actual=None, expected=None, plural: bool = False,
                    against: str = "", where: str = "") -> Float32Verdict:
    """The one sentence for a result that matches to float32 precision but not float64's:
    what matched (and against what), by how much it is off, what computes in float32 and
    what dtype to keep. E.g. float32_verdict("the parameters", "your step", "the
    parameters' dtype (float64 here)", plural=True, against="torch.optim.AdamW's ")."""
    _lean_on_float32()  # the words are checked against what ran (precision_known)
    tensors = isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor)
    lead = what
    if tensors and actual.dtype != expected.dtype:
        lead = f"{what} {'are' if plural else 'is'} {str(actual.dtype).removeprefix('torch.')} and"
    off = f" (off by up to {off_by(actual, expected):.2g}{where})" if tensors else (f" ({where})" if where else "")
    return Float32Verdict(
        f"{lead} {'match' if plural else 'matches'} {against}to float32 precision, not to float64's{off}: "
        f"{computes} computes in float32{low_precision_words()}; keep {keep} through every operation: no .float(), and each tensor you "
        f"create takes that dtype (torch.zeros_like(x), or dtype=x.dtype)")


# ------------------------------------------------------------ showing numbers


def figures(*values: float, least: int = 3) -> list[str]:
    """The numbers as a diagnosis prints them: `least` significant digits, or as many more as
    it takes for numbers that differ to print differently (never "between 0.1 and 0.1")."""
    numbers = [float(v) for v in values]
    distinct = len(set(numbers))
    for digits in range(least, 18):
        shown = [f"{v:.{digits}g}" for v in numbers]
        if len(set(shown)) == distinct:
            return shown
    return [repr(v) for v in numbers]


# --------------------------------------------------------------------- oracles
# The two GELU formulas the chapter 05 lesson publishes, written once, in plain torch.



def exact_gelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def tanh_gelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


# ------------------------------------------------------------------ probing helpers


def try_call(function, *args, **kwargs) -> dict:
    """Run student code whose error is itself the answer (a bad id must raise a clear
    ValueError, say): {'value': result} or {'raised': {type, value_error, message}}.
    NotImplementedError and forbidden calls still propagate, so an unfinished task
    scores 'not implemented' and a shortcut 'forbidden', not a wrong answer."""
    try:
        return {"value": function(*args, **kwargs)}
    except NotImplementedError:
        raise
    except Exception as error:  # noqa: BLE001 - the student's error is the data here
        if type(error).__name__ == "ForbiddenCall":
            raise
        return {"raised": {"type": type(error).__name__, "value_error": isinstance(error, ValueError),
                           "message": str(error)[:500]}}


class PartCalls:
    """What the named parts of a module (its submodules: norms, attention, blocks, ...)
    received and returned while a probe ran, in the order they ran: the data a judge
    needs to judge a task on the student's own parts, by how it wires them, whatever
    they compute. Used as `with PartCalls({"ln_attention": block.ln_attention, ...}) as
    parts:`; `parts.calls` is then a list of {"part", "input", "output"} (the first
    tensor the part was given, and the tensor it returned, or the first of a tuple). A
    part called through its .forward, or written out inline, is not seen: the judge says
    so rather than judging blind."""

    def __init__(self, parts: "dict[str, torch.nn.Module]"):
        self.parts, self.calls, self._hooks = parts, [], []

    def __enter__(self) -> "PartCalls":
        for name, module in self.parts.items():
            self._hooks.append(module.register_forward_hook(self._recorder(name), with_kwargs=True))
        return self

    def __exit__(self, *exc) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks.clear()

    def shared(self) -> list[list[str]]:
        """[earlier name, name] for each part given again under another name (one object
        in two places: one LayerNorm for both branches, one block N times): their calls
        cannot be told apart, so the wiring cannot be judged."""
        first, found = {}, []
        for name, module in self.parts.items():
            if id(module) in first:
                found.append([first[id(module)], name])
            else:
                first[id(module)] = name
        return found

    def _recorder(self, name: str):
        def record(module, args, kwargs, output):
            given = next((a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)), None)
            returned = output[0] if isinstance(output, (tuple, list)) and output else output
            self.calls.append({"part": name, "input": _kept(given), "output": _kept(returned)})
        return record


def _kept(value):
    return value.detach().clone() if isinstance(value, torch.Tensor) else None


def calls_of(calls, part: str) -> list[dict]:
    """The recorded calls of one part (PartCalls), in order; [] for data of another shape."""
    if not isinstance(calls, list):
        return []
    return [c for c in calls if isinstance(c, dict) and c.get("part") == part]


def unjudgeable_parts(out, what: str) -> "str | None":
    """Why what a probe recorded of the parts (PartCalls: out["calls"], out["shared"]) cannot
    judge the wiring, or None: two parts that are one object, or a part that returned
    NaN or inf. Such a check is not judged on the student's own parts, and so waits on a
    part that fails its own checks."""
    shared = out.get("shared") if isinstance(out, dict) else None
    if isinstance(shared, list) and shared and isinstance(shared[0], list) and len(shared[0]) == 2:
        earlier, name = (str(n)[:40] for n in shared[0])
        return (f"{what}'s {name} is the same object as its {earlier}, so its parts cannot be told apart and "
                f"{what} cannot be judged on your own parts: build each part as an object of its own")
    for call in out.get("calls") or () if isinstance(out, dict) else ():
        if not isinstance(call, dict):
            return f"{what}'s parts were recorded in a form the check does not know"
        for value in (call.get("input"), call.get("output")):
            if isinstance(value, torch.Tensor) and value.is_floating_point() and not torch.isfinite(value).all():
                return (f"{str(call.get('part'))[:40]} gave NaN or inf while {what} ran, so {what} cannot be "
                        f"judged on your own parts")
    return None


def same_values(actual, expected, atol: float = 1e-9, rtol: float = 1e-7) -> bool:
    """Two recorded tensors hold the same numbers (any float dtype, the same shape)."""
    return (isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor)
            and actual.is_floating_point() == expected.is_floating_point()
            and matches(actual, expected, atol=atol, rtol=rtol))


def distinct_outputs(candidates, right: torch.Tensor, atol: float = 1e-9, rtol: float = 1e-7) -> list:
    """The (label, output) pairs, in order, whose output is close (torch.allclose(output,
    other)) neither to `right` nor to an output kept before it; an output of None is left
    out. Outputs shaped as `right` are held against all such kept before them at once: one
    comparison at a time, this was most of a grading's time in the grader."""
    kept, alike, odd = [], [right], []  # alike: kept outputs with right's shape and dtype; odd: the others
    for label, output in candidates:
        if output is None:
            continue
        shaped = output.shape == right.shape and output.dtype == right.dtype
        seen = False
        if shaped:
            others = torch.stack(alike)
            close = torch.isclose(output.expand_as(others), others, rtol=rtol, atol=atol)
            seen = bool(close.reshape(len(alike), -1).all(dim=1).any())
        seen = seen or any(torch.allclose(output, other, atol=atol, rtol=rtol)
                           for other in (odd if shaped else [right] + [o for _, o in kept]))
        if not seen:
            kept.append((label, output))
            (alike if shaped else odd).append(output)
    return kept


def causal_diagnosis(y, y_changed, first_changed: int, what: str, tol: float = 1e-10,
                     must_depend: bool = True) -> "str | None":
    """None when positions before first_changed are the same in both outputs [B, T, ...]
    and (unless must_depend is False) every position from first_changed on differs;
    otherwise names the first position the future leaked into, or says the output
    ignores its input. A forward that returns a constant, or remembers its last call,
    keeps the past unchanged too: requiring the changed positions to change catches it.
    NaN or inf anywhere is never causal (NaN compares false with everything)."""
    if not isinstance(y, torch.Tensor) or not isinstance(y_changed, torch.Tensor) or y.shape != y_changed.shape:
        return f"{what} did not return two outputs of the same shape"
    if y.dim() < 2 or not 0 <= first_changed <= y.shape[1]:
        return f"{what} returned outputs of shape {list(y.shape)}, expected [B, T, ...]"
    if y.is_complex() or y_changed.is_complex():
        return f"{what} returned complex numbers"
    y, y_changed = y.double(), y_changed.double()
    if not (torch.isfinite(y).all() and torch.isfinite(y_changed).all()):
        return f"NaN or inf in the output: {what} must return finite values"
    other = tuple(i for i in range(y.dim()) if i != 1)  # all but the position axis
    before = (y[:, :first_changed] - y_changed[:, :first_changed]).abs()
    if before.numel() and not (before <= tol).all():
        position = int(torch.nonzero(~(before <= tol).all(dim=other))[0])
        return (f"position {position} changed when only tokens from position {first_changed} on changed: "
                f"{what} lets the future leak in")
    after = (y[:, first_changed:] - y_changed[:, first_changed:]).abs()
    if must_depend and after.numel():
        moved = (after > tol).any(dim=other)
        if not moved.any():
            return (f"changing tokens from position {first_changed} on changed nothing at all: "
                    f"the output does not depend on its input")
        if not moved.all():
            position = first_changed + int(torch.nonzero(~moved)[0])
            return (f"position {position} did not change when its own token changed: "
                    f"the output there does not depend on its input")
    return None


# ------------------------------------------------------------- quoting the student
# What the student's code returned or raised reaches the grader as data the code chose.
# Where it ran beside certified parts it could have read them, so a diagnosis never
# quotes its free text (strings, exception messages, class names made up at run time):
# it says what kind of thing came back, and quotes numbers only.


def exception_classes() -> list[type]:
    """Every exception class this process has defined so far."""
    found, stack = [], [BaseException]
    while stack:
        cls = stack.pop()
        found.append(cls)
        stack.extend(cls.__subclasses__())
    return found


def _standard_exception_names() -> frozenset[str]:
    return frozenset(cls.__name__ for cls in exception_classes()
                     if cls.__module__ in ("builtins", "torch") or cls.__module__.startswith("torch."))


def exception_name(raised) -> str:
    """The type of an exception try_call caught, if Python or torch defines it."""
    kind = raised.get("type") if isinstance(raised, dict) else None
    return kind if isinstance(kind, str) and kind in _standard_exception_names() else "an exception of its own class"


def type_name(value) -> str:
    """A returned value's type by name ("list", "float"), or, for what the worker could not
    send as plain data, what it is in words (kind_of)."""
    name = type(value).__name__
    return kind_of(value) if name in ("RemoteError", "Opaque", "TooLarge") else name


def kind_of(value) -> str:
    """What a returned value is, by kind only: 'a str', 'a list', 'a dict', ..."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {list(value.shape)}"
    name = type(value).__name__
    return {"RemoteError": "an exception object", "Opaque": "an object that is not plain data (a tensor of a "
            "class of its own, say)", "TooLarge": "an answer too large to send back", "NoneType": "None"}.get(name, f"a{'n' if name[:1] in 'aeiou' else ''} {name}")


# Python's own words for the arithmetic failures some judges explain. Any other message
# is text the submission's code could have chosen, and a diagnosis never quotes it.
STANDARD_MESSAGES = frozenset({
    "math range error", "float division by zero", "division by zero", "integer division or modulo by zero",
    "0.0 cannot be raised to a negative power", "(34, 'Numerical result out of range')",
})


def standard_message(message) -> str:
    """' (message)' where Python itself words an error so, else ''."""
    return f" ({message})" if message in STANDARD_MESSAGES else ""


def plain_shape(shape) -> "list[int] | None":
    """A shape a probe read off an object the code built (list(t.shape)), when it is one:
    a short list of sizes. A tensor subclass, or any object with a .shape, may report
    anything there, text included; then None, and the diagnosis says no more than that
    the shape is wrong."""
    if isinstance(shape, list) and len(shape) <= 8 and all(
            isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**40 for n in shape):
        return shape
    return None


def shown_shape(shape) -> str:
    """A reported shape as a diagnosis may quote it: its sizes, or what it is not."""
    if shape is None:
        return "None"
    plain = plain_shape(shape)
    return str(plain) if plain is not None else "(not a list of sizes)"


def shown_count(n, grouped: bool = True) -> str:
    """A count the code produced (a parameter count, say), quoted when it is a number a
    model could have: an integer of a thousand digits could spell out any text."""
    if isinstance(n, float) or (isinstance(n, int) and not isinstance(n, bool) and abs(n) < 10**12):
        return f"{n:,}" if grouped else str(n)
    return "a number too large to be a count" if isinstance(n, int) else "something that is not a number"


def first_difference(text, right: str) -> str:
    """Where a returned text first differs from the right one, without quoting it."""
    if not isinstance(text, str):
        return f"it returned {kind_of(text)}, not a str"
    at = next((i for i, (a, b) in enumerate(zip(text, right)) if a != b), min(len(text), len(right)))
    return f"it has {len(text)} characters for {len(right)}, the first difference at index {at}"
