"""What a check found, as data, and how the task's results count: the engine's third layer.

grader/run/schedule.py plans a grading, grader/run/worker_session.py runs each check and
judges its answer; this module, pure over the CheckResults that come back, makes them
count: a property check gated by the value checks of its task (`gated`), public points
withheld from code that answers its published inputs only (`published_inputs_only`), a
check that waits on a failing part it builds on (`apply_waits`), and every result's
verdict (`with_verdicts`).

A diagnosis is a sentence for one reader; a verdict is what the sentence was made from,
so that the class report can count mistakes instead of sentences, and a feedback page
can put the first one on top. Each is a small JSON-ready dict with a `kind`:

    mistake          {"task", "mistake"}: a key of the task's MISTAKES (or a combination
                     of them, "d_minus_1+no_eps"), found by a judge
    deviation        {"task"}: the answer is wrong in a way no named mistake explains
    not_implemented  {"task"}
    waiting          {"on": [tasks]}: judged only with right parts, and a part fails
    gated            {"on": [checks]}: its property holds, but earns nothing until these pass
    public_only      {"task", "on": [checks]}: it passes on its published inputs, but the
                     code answers none of the task's checks on inputs drawn for this
                     grading (these): published_inputs_only
    load_failed      {"file", "line", "error"}: the package did not import (one finding for
                     every check it stopped); `line` and `error` only where the student may
                     see them (their own file and line; a standard exception's name)
    crash            {"task", "error", "file", "line"}: the code raised while the check ran
    timeout          {"task", "during": "probe" | "import"}
    forbidden        {"task", "call"}: the qualified name it called, where known
    runner_failed    {}: the grader could not start a process for it (regraded on a rerun)
    unanswered       {"task"}: the process answered with garbage, or ended without answering

Any verdict may also hold "slots": the values its diagnosis quotes, each typed by where it
comes from (a kit constant, the student's own line, a public figure, a value from a hidden
input) with its place in the sentence (grader/checks/_slots.py). A published hidden check
keeps the first three and says the last in words (grader/run/visible.py).

Everything in a verdict is fit for the student who wrote the code: their own file and
line, the kit's own names. Nothing of a hidden input, an expected value or certified
code is ever put here, and nothing the code chose (an exception's message, its class).

A judge names a mistake through `grader.checks._api`: `named()` pairs each mistake's
sentence with its key, `first_diagnosis()` notes the key it matched, and a judge's own
sentence names one with `naming("no_affine", text)`. The engine listens around each judge
(`_api.listening`) and reads the key back.
"""

from __future__ import annotations

import dataclasses

import torch

from grader.checks import catalogue
from grader.checks._api import NOTHING_COMPUTED, Check
from grader.run.dependencies import build_order
from grader.run.inside.wire import Opaque
from grader.run.results import (COMPUTED, ERROR, FAILED, FORBIDDEN, LOAD_FAILED, NOT_IMPLEMENTED, PASSED, RAISED,
                                TIMEOUT, TRIVIAL, WAITING, CheckResult, with_slots)

KINDS = ("mistake", "deviation", "not_implemented", "waiting", "gated", "public_only", "load_failed", "crash", "timeout",
         "forbidden", "runner_failed", "unanswered")


def of_judgement(task: str, diagnosis, heard: str) -> dict:
    """The verdict of a judge's failing diagnosis."""
    key = getattr(diagnosis, "mistake", "") or heard
    return {"kind": "mistake", "task": task, "mistake": key} if key else {"kind": "deviation", "task": task}


def published_inputs_only(ran: list[CheckResult]) -> dict[str, tuple[str, ...]]:
    """{each public check that passed: the task's hidden checks} where the code answers
    the published inputs only. The hidden checks' inputs are drawn for each grading, and
    the code answers none of them (answered: no pass, no wrong answer it computed), while
    either it passed every public check it did not call unfinished (a table of the
    published answers, computed elsewhere, that raises anywhere else, NotImplementedError
    on the public checks it skips) or gave a trivial answer on a drawn input (an
    input handed back, zeros, a constant: such a table's cheap fallback, whichever public
    check it fails on purpose). Its public points need a computation on an input it could
    not know in advance. A slip computes a wrong answer on the drawn inputs, or crashes
    there and on a published input too, and keeps what passed. {} where the grader could
    not judge a check (a failure of its own, CheckResult.cause, withholds nothing), or
    where no hidden check ran (the student's own check, a check picked alone)."""
    hidden = [r for r in ran if r.check.hidden]
    public = [r for r in ran if not r.check.hidden]
    if not hidden or any(r.cause for r in ran) or any(answered(r) for r in hidden):
        return {}
    if not (all(r.status == PASSED or _unfinished(r) for r in public) or any(_trivial(r) for r in hidden)):
        return {}
    failed = tuple(r.check.name for r in hidden)
    return {r.check.name: failed for r in public if r.status == PASSED}


def answered(result: CheckResult) -> bool:
    """The check passed, or failed on a wrong answer the code computed (named or not):
    not a crash, a time-out, a refusal, an error the probe caught, a trivial answer, or a
    mistake of _api.NOTHING_COMPUTED."""
    if result.status == PASSED:
        return True
    return (result.status == FAILED and (result.verdict or {}).get("kind") in ("mistake", "deviation")
            and result.answer == COMPUTED and not _names_nothing_computed(result))


def _unfinished(result: CheckResult) -> bool:
    return result.status == NOT_IMPLEMENTED or (result.verdict or {}).get("kind") == "not_implemented"


def _trivial(result: CheckResult) -> bool:
    return result.status == FAILED and (result.answer == TRIVIAL or _names_nothing_computed(result))


def _names_nothing_computed(result: CheckResult) -> bool:
    verdict = result.verdict or {}
    return verdict.get("kind") == "mistake" and bool(set(str(verdict.get("mistake", "")).split("+")) & NOTHING_COMPUTED)


# A value check's status as a gate (Check.gated_by): a check that failed on a named slip
# with an answer the code computed (LayerNorm's d - 1, say) shows that the task computes,
# which no body that computes nothing does, and the properties it gates count. (An
# unnamed wrong answer does not: a probe computes around the task's function, and what
# comes back can look computed whatever the function did.)
COMPUTES = "computes"


def computing_status(result: CheckResult) -> str:
    named = (result.verdict or {}).get("kind") == "mistake"
    return COMPUTES if result.status == FAILED and named and answered(result) else result.status


def kind_of_answer(answer, inputs: dict, expected=None, reference_answer=None) -> str:
    """RAISED where the probe caught an exception of the code's and put it in its answer
    (as "raised", _api.try_call, or its name under "error"); TRIVIAL where the answer is
    what a body that computes nothing gives: nothing at all, or every tensor in it a
    constant (zeros among them) or a multiple of an input (handed back, or halved), or, in
    a plain-Python answer (chapter 00's floats), every list of numbers a constant or an
    input as it came, while the right answer (`expected`) is none of these; COMPUTED
    otherwise, and wherever the check has no right answer to tell by (a right answer may be
    all of these: an optimizer keeps the very tensors it was given, a clip scales them,
    zero_grad zeroes). A check with no expected answer (one judged from facts) may ask the
    reference's (`reference_answer()`; the grader offers it to hidden checks, whose verdict
    is what *published inputs only* reads), and only of an answer of constants (or, in
    plain Python, an input as it came). A slip that gives a trivial answer on some input (a LayerNorm's
    statistics over a time axis of length 1 are zeros) is not told apart from a body that
    computes nothing there."""
    if _raised(answer):
        return RAISED
    if _looks_computed(answer, inputs):
        return COMPUTED
    if expected is not None:
        return TRIVIAL if _looks_computed(expected, inputs) else COMPUTED
    # A check judged from facts: the reference's answer tells, of an answer that is nothing
    # but constants (a multiple of an input, which a right clip or optimizer gives, is not
    # told apart without the check's own expected answer).
    if reference_answer is None or _looks_computed(answer, inputs, multiples=False):
        return COMPUTED
    right = reference_answer()
    return TRIVIAL if right is not None and _looks_computed(right, inputs) else COMPUTED


def _looks_computed(answer, inputs: dict, multiples: bool = True) -> bool:
    """Whether an answer shows computing: anything but constants and (`multiples`) its
    tensors' multiples of an input; in plain Python, anything but constants and an input
    as it came."""
    if _nothing_plain(answer):
        return False  # an object sent back by its type alone is no sign of computing
    given = [t for t in _tensors(inputs) if t.numel() and t.is_floating_point()] if multiples else []
    found = [t for t in _tensors(answer) if t.numel()]
    if found:
        return any(not _constant(t) and not any(_multiple_of(t, g) for g in given) for t in found)
    numbers = list(_numbers(answer))
    if numbers:
        # Plain Python's (chapter 00's): constant, or an input handed back as it came. Not a
        # multiple: a right RMSNorm is one, and a slip in its gradient gives another.
        known = list(_numbers(inputs, ints_too=True))
        return any(not _constant(t) and not any(t.shape == g.shape and torch.equal(t, g) for g in known)
                   for t in numbers)
    return answer is not None and not (isinstance(answer, dict) and all(v is None for v in answer.values()))


def _raised(value, depth: int = 0) -> bool:
    if isinstance(value, dict):
        if value.get("raised") or (isinstance(value.get("error"), str) and value["error"]):
            return True
        return depth < 4 and any(_raised(v, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)) and depth < 4:
        return any(_raised(v, depth + 1) for v in value[:64])
    return False


def _constant(tensor) -> bool:
    flat = tensor.detach().reshape(-1)
    return not flat.dtype.is_complex and bool((flat == flat[0]).all())


def _multiple_of(tensor, given) -> bool:
    """tensor == c * given for one number c (the input itself, or a scaled copy)."""
    if tensor.shape != given.shape or not tensor.is_floating_point():
        return False
    a, b = given.detach().double().reshape(-1), tensor.detach().double().reshape(-1)
    scale = float(a @ b) / max(float(a @ a), 1e-300)
    return bool(torch.allclose(scale * a, b, rtol=1e-12, atol=1e-12))


def _nothing_plain(value, depth: int = 0) -> bool:
    """Every leaf of an answer an object the wire could only name (Opaque, TooLarge)."""
    if isinstance(value, Opaque):
        return True
    if depth < 4 and isinstance(value, dict) and value:
        return all(_nothing_plain(item, depth + 1) for item in value.values())
    if depth < 4 and isinstance(value, (list, tuple)) and value:
        return all(_nothing_plain(item, depth + 1) for item in value[:64])
    return False


def _tensors(value, depth: int = 0):
    """Every tensor in plain data (dicts, lists, tuples), a few levels deep."""
    if isinstance(value, torch.Tensor):
        yield value
    elif depth < 4 and isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item, depth + 1)
    elif depth < 4 and isinstance(value, (list, tuple)):
        for item in value[:64]:
            yield from _tensors(item, depth + 1)


def _numbers(value, depth: int = 0, ints_too: bool = False):
    """The numbers of a plain-Python answer, as float64 tensors: each list of numbers, and
    across a list of cases (dicts) each key's numbers and each place of its lists of
    numbers, as a column. Only lists with a float among them: token ids (ints) are no
    measure of computing; in the inputs (`ints_too`), numbers all the same."""
    if depth < 8 and isinstance(value, dict):
        for item in value.values():
            yield from _numbers(item, depth + 1, ints_too)
    elif depth < 8 and isinstance(value, (list, tuple)):
        head = value[:64]
        numbers = _as_floats(head, ints_too)
        if numbers is not None:
            yield numbers
            return
        if len(head) > 1 and all(isinstance(item, dict) for item in head):
            yield from _columns(head, ints_too)
        for item in head:
            yield from _numbers(item, depth + 1, ints_too)


def _as_floats(items, ints_too: bool = False) -> "torch.Tensor | None":
    """Numbers, a float among them (or not, `ints_too`), as a float64 tensor; None for
    anything else."""
    if not items or not all(type(item) in (int, float) for item in items) \
            or not (ints_too or any(type(item) is float for item in items)):
        return None
    try:
        return torch.tensor(items, dtype=torch.float64)
    except (OverflowError, RuntimeError):  # an int past the floats' range
        return None


def _columns(cases: list, ints_too: bool):
    """Across cases (dicts), each key's numbers, and each place of its lists of numbers."""
    for key in cases[0]:
        items = [case.get(key) for case in cases]
        column = _as_floats(items, ints_too)
        if column is not None:
            yield column
        elif all(isinstance(item, (list, tuple)) and len(item) == len(items[0]) for item in items):
            for place in range(min(len(items[0]), 8)):
                column = _as_floats([item[place] for item in items], ints_too)
                if column is not None:
                    yield column


def gated(result: CheckResult, statuses: dict[str, str], drawn_failing: tuple[str, ...] = ()) -> CheckResult:
    """The result as it counts (Check.gated_by): a check that passed while a value check
    gating it neither passed nor named a slip (computing_status) earns nothing yet, and
    says so. `statuses`: the task's checks judged so far, by short name; a gate not in this
    run (a check picked alone) withholds nothing. `drawn_failing` (published_inputs_only): the
    task's hidden checks, none answered; public points need a computation on an input the
    code could not know in advance."""
    if result.status == PASSED and drawn_failing and not result.check.hidden:
        said = ("this check passes on its published inputs only: on the inputs drawn for this grading the task "
                "gives no answer it computed (it raises, or gives back an input, zeros or a constant), and public "
                "points need code that computes on inputs it cannot know in advance")
        return dataclasses.replace(result, status=FAILED, gated=drawn_failing, diagnosis=said,
                                   staff_diagnosis=said,
                                   verdict={"kind": "public_only", "task": result.check.task, "on": list(drawn_failing)})
    failing = tuple(g for g in result.check.gated_by if statuses.get(g, PASSED) not in (PASSED, COMPUTES))
    if result.status != PASSED or not failing:
        return result
    named = " and ".join(f"'{g}'" for g in failing)
    said = (f"this property holds, but it earns nothing yet: it counts once the task's {named} "
            f"check{'s' * (len(failing) > 1)} pass{'' if len(failing) > 1 else 'es'} or name{'' if len(failing) > 1 else 's'} "
            f"a slip of the formula, since a body that computes nothing (returning its input unchanged, say) has it too")
    return dataclasses.replace(result, status=FAILED, gated=failing, diagnosis=said, staff_diagnosis=said,
                               verdict={"kind": "gated",
                                        "on": [f"{result.check.name.rsplit('.', 1)[0]}.{g}" for g in failing]})


def apply_waits(results: list[CheckResult], graph: dict[str, tuple[str, ...]],
                quiet: "set[str] | frozenset[str]" = frozenset()) -> list[CheckResult]:
    """Where no certified part stood in: a check that failed, and could only be judged
    with right parts, waits while a task it builds on (graph) fails its own checks in this
    run, and says which, instead of a sentence about its own task (a forbidden call or a
    time-out too: the part may be what made it). A verdict reached on the task's own parts
    (CheckResult.on_own_parts) stands, and so does a task not started. Tasks
    are taken parts first (dependencies.build_order): a task fails its own checks when a
    failure is left once its waits are taken out, and only such a task makes later
    checks wait. `quiet`: tasks graded only to learn whether they are right, whose
    checks the student does not see in this run (another chapter's)."""
    order = {task: i for i, task in enumerate(build_order(graph))}
    last = len(order)
    by_task: dict[str, list[CheckResult]] = {}
    for result in results:
        by_task.setdefault(result.check.task, []).append(result)
    failing: list[str] = []
    deferred: list[tuple[CheckResult, tuple[str, ...]]] = []  # checks that run a later task
    for task in sorted(by_task, key=lambda t: order.get(t, last)):
        upstream = tuple(t for t in graph.get(task, ()) if t in failing and order[t] < order.get(task, last))
        for result in by_task[task]:
            if result.check.runs_later:  # judged once the later tasks are known right or wrong
                deferred.append((result, upstream))
                continue
            _wait_if_upstream(result, upstream, quiet)
        # A task whose code never ran (the package did not import) is not known to be wrong.
        if any(r.status not in (PASSED, WAITING) and not r.gated and r.cause != LOAD_FAILED
               and not r.check.runs_later for r in by_task[task]):
            failing.append(task)
    for result, upstream in deferred:
        _wait_if_upstream(result, upstream + tuple(t for t in result.check.runs_later if t in failing), quiet)
    return results


def _wait_if_upstream(result: CheckResult, upstream: tuple[str, ...], quiet) -> None:
    final = result.status == FAILED and result.on_own_parts and not result.gated or result.cause == LOAD_FAILED
    if upstream and result.status in (FAILED, ERROR, FORBIDDEN, TIMEOUT) and not final:
        _wait(result, upstream, quiet)


def _wait(result: CheckResult, upstream: tuple[str, ...], quiet) -> None:
    chapter = {task: c.number for task, c in catalogue.chapter_of_task().items()}
    own = result.check.chapter

    def named(task: str) -> str:
        return f"'{task}'" if chapter.get(task, own) == own else f"'{task}' (chapter {chapter[task]})"

    many = len(upstream) > 1
    quoted = [named(t) for t in upstream[:3]] + (["others"] if len(upstream) > 3 else [])
    listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]
    elsewhere = sorted({chapter[t] for t in upstream if t in quiet and t in chapter})
    fix = f"fix {'them' if many else 'it'} first"
    if elsewhere:
        fix = (f"this run checked {'them' if many else 'it'} quietly: run {see_chapters(elsewhere)} to see why, "
               f"and {fix}")
    result.status, result.waiting_on, result.gated = WAITING, upstream, ()
    result.verdict = {"kind": "waiting", "on": list(upstream)}
    result.diagnosis = result.staff_diagnosis = (
        f"waiting on {listed}: {'they fail their' if many else 'it fails its'} own checks, and this check can "
        f"only be judged with right parts; {fix}")


# A verdict for a result whose maker gave none (a scan's finding, the grader's own failure).
_VERDICT_OF_STATUS = {FAILED: "deviation", NOT_IMPLEMENTED: "not_implemented", TIMEOUT: "timeout",
                      FORBIDDEN: "forbidden", ERROR: "crash"}


def with_verdicts(results: list[CheckResult]) -> list[CheckResult]:
    """Every result that did not pass carries a verdict (grader/run/verdicts.py)."""
    for result in results:
        if result.status == PASSED:
            result.verdict = None
        elif result.verdict is None:
            result.verdict = with_slots({"kind": _VERDICT_OF_STATUS.get(result.status, "deviation"),
                                         "task": result.check.task}, result.slots)
    return results


def see_chapters(chapters: list[str]) -> str:
    """The command that shows these chapters' checks, as this edition of the kit spells it."""
    from grader.edition import EDITION, check_py

    if EDITION == "student":
        return f"`{check_py(' '.join(chapters))}`"
    return f"`make check CH={','.join(chapters)}`"


def task_verdicts(ran: list[CheckResult], checks: list[Check]) -> list[CheckResult]:
    """A task's results as they count, once all its checks are judged (a gated check
    counts only beside the value checks that gate it; public points only beside an answer
    to a drawn input), each with its verdict, in the order of `checks`."""
    drawn = published_inputs_only(ran)
    statuses = {r.check.name.rsplit(".", 1)[-1]: (FAILED if r.check.name in drawn else computing_status(r))
                for r in ran}
    by_check = {id(result.check): gated(result, statuses, drawn.get(result.check.name, ())) for result in ran}
    return with_verdicts([by_check[id(check)] for check in checks])
