"""What a check's outcome becomes: its status, and the words the student and the
course staff read. The student sees the grader's own diagnoses, an exception's type
and where it was raised; what the code printed, raised or returned as text goes to
the staff only, and any text holding a line of the reference is withheld."""

from __future__ import annotations

import ast
import math
import re
from functools import lru_cache
from typing import NamedTuple

import torch

from grader import KIT_ROOT
from grader.checks import catalogue
from grader.checks._api import Check, Named, OwnPartsVerdict, SetAside, Task, exception_classes, listening
from grader.checks.course import UNFIT
from grader.checks import facts
from grader.checks.facts import MissingFacts
from grader.run.inside import op_rules, syscall_filter
from grader.run.inside.messages import CaughtCall, Cause, Failure, ForbiddenKind, Operation, ProbeReply, WorkerStatus
from grader.run.forms import declared, difference, unlike
from grader.run.inside.wire import TOO_LARGE, Opaque, RemoteError, TooLarge
from grader.run.reference import Reference, facts_computed_here
from grader.run.results import ERROR, FAILED, FORBIDDEN, NOT_IMPLEMENTED, PASSED
from grader.checks._slots import constant, hidden, public, strip as strip_slots
from grader.run.submission import Submission
from grader.run.verdicts import of_judgement
from grader.run.worker import WorkerFailed

# The judges run here: the facts a public judge reads, where no data file holds them (an
# LMS package that copied only the kit's code), are computed on the reference.
facts.compute_missing = facts_computed_here


def as_text(value, limit: int = 600) -> str:
    return (value if isinstance(value, str) else repr(value))[:limit]


# Lines this short (`return x`, `)`, a docstring fragment) say nothing about the reference.
_SECRET_LINE_CHARS = 20
_WITHHELD = "(withheld: the text contained code from the reference)"
_LOCATION = re.compile(r"(?:submission/)?([\w./-]+\.py):(\d+)")
# The package as the student knows it: their folder, not the sandbox's copy of it.
STUDENT_PACKAGE = "hero_transformer"


def _place(rel: str, number) -> str:
    """A file and line as the student finds them: hero_transformer/model.py line 173."""
    return f"{STUDENT_PACKAGE}/{rel} line {number}"


def _student_where(where: str) -> str:
    """The worker's 'submission/model.py:173' as the student knows the file, unchanged otherwise."""
    match = _LOCATION.fullmatch(where or "")
    return _place(match[1], match[2]) if match else where
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,59}")
_SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


@lru_cache(maxsize=4)
def _reference_lines(reference: Reference) -> frozenset[str]:
    return frozenset(_squeezed(line) for source in reference.sources.values() for line in source.splitlines()
                     if len(line.strip()) >= _SECRET_LINE_CHARS)


@lru_cache(maxsize=1)
def _checks_text() -> str:
    """The checks' own source: a reference line they spell out (a diagnosis naming the
    fix, say) is public, as the checks ship with the course."""
    return "".join(_squeezed(path.read_text(encoding="utf-8"))
                   for path in sorted((KIT_ROOT / "grader" / "checks").rglob("*.py"))
                   if path.name != "mutants.py")  # right bodies of the tasks, never public


def _known_exception_names() -> set[str]:
    """Exception classes the grader's own process knows (builtins, torch, ...): a name
    among them was not made up at run time to carry text."""
    return {cls.__name__ for cls in exception_classes()}


@lru_cache(maxsize=1)
def standard_exception_names() -> frozenset[str]:
    """The names of grader/run/inside/tasks.py's standard_exceptions, by which the worker
    tells the raised class among them: a fixed list of about sixty, whatever the upload defines."""
    from grader.run.inside.tasks import standard_exceptions

    return frozenset(cls.__name__ for cls in standard_exceptions())


# Lines a library in the worker writes about the machine, not about the student's code:
# cpuinfo (inside torch) logs with these prefixes when it cannot read the CPU's
# description, which a restricted /proc withholds. The zygote asks torch before /proc is
# restricted (grader/run/inside/zygote.py); this is the net under that, for the student's
# copy only.
_LIBRARY_TALK = re.compile(r"^(?:Fatal error|Error|Warning) in cpuinfo: [^\n]*(?:\n|$)", re.MULTILINE)


def without_library_talk(printed: str) -> str:
    """What the worker printed, less the lines torch's own libraries wrote about the
    machine; '' when nothing else is left."""
    if not printed:
        return printed
    kept = _LIBRARY_TALK.sub("", printed)
    return kept if kept.strip() else ""


# ------------------------------------------------------ what a value can carry to a student
# A diagnosis quotes what the code returned. In a graded run the worker can read nothing
# secret, but what it returns is still a wire the code chooses: it is kept narrow, and
# counted (value_bits), in the same terms as the error path.
SHOWN_DIGITS, SHOWN_NUMBERS, SHOWN_QUOTE, SHOWN_QUOTED = 10, 12, 32, 60  # SHOWN_QUOTED: all quotes together
_NUMBER = re.compile(r"(?<![\w.])[-−]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.])")
# A quote opens where no letter stands before it and closes where none follows (an
# apostrophe, as in "the weight's gradient", is no quote).
_QUOTED = re.compile(r"(?<!\w)'([^'\n]*)'(?!\w)|(?<!\w)\"([^\"\n]*)\"(?!\w)")
# One number as shown: a sign, SHOWN_DIGITS digits and an exponent of a float64 (about
# 630 decimal exponents), or one of inf, nan: log2 of the count of distinct renderings.
BITS_PER_NUMBER = math.log2(2 * 9 * 10 ** (SHOWN_DIGITS - 1) * 630 + 3)
BITS_PER_CHARACTER = 8.0  # a quoted character of the code's choosing, counted as a byte


def _shown_number(match: re.Match) -> str:
    text = match[0]
    plain = text.replace("−", "-").replace(",", "")
    digits = len(re.sub(r"[^0-9]", "", plain.split("e")[0].split("E")[0]).lstrip("0"))
    if digits <= SHOWN_DIGITS:
        return text
    try:
        value = float(plain)
    except ValueError:
        return text
    shown = f"{value:.{SHOWN_DIGITS}g}"
    return shown.replace("-", "−") if text.startswith("−") else shown


def bound_values(text: str) -> str:
    """`text` with its numbers rounded, counted and its quotes cut (Audience.bounded)."""
    count, room = [0], [SHOWN_QUOTED]

    def number(match: re.Match) -> str:
        count[0] += 1
        return _shown_number(match) if count[0] <= SHOWN_NUMBERS else "…"

    def quote(match: re.Match) -> str:
        inner = match[1] if match[1] is not None else match[2]
        mark, keep = match[0][0], min(SHOWN_QUOTE, room[0])
        room[0] -= min(len(inner), keep)
        return match[0] if len(inner) <= keep else f"{mark}{inner[:keep]}…{mark}"

    return _NUMBER.sub(number, _QUOTED.sub(quote, text))


def value_bits(text: str) -> float:
    """At most how many bits of the code's choosing a bounded diagnosis can hold: each
    number shown and each quoted character, as if the code chose them all."""
    numbers = len(_NUMBER.findall(text))
    quoted = sum(len(a or b) for a, b in _QUOTED.findall(text))
    return numbers * BITS_PER_NUMBER + quoted * BITS_PER_CHARACTER


class Audience:
    """What of the student's code's words the student may be shown.

    Where certified parts were given to the worker, the code ran beside them, so nothing
    it says reaches the student: no printed output, no exception message, no repr. Nor
    anything it chose while it ran beyond what the student needs to act on: of an error,
    the student sees the grader's own words, the exception's type if Python or torch
    defines it (never a class the upload made, which it could make by the hundred and
    pick one of by what it read), and which of the course's files of the upload it was
    raised in, not the line (which the code picks as freely). Course staff see the
    message, the line and every frame. Without certified parts (`make check` on a
    student's machine) there is nothing to leak, and the student sees everything, which
    is how they debug."""

    def __init__(self, submission: Submission, reference: Reference | None, for_the_author: bool = False):
        self.sources = submission.sources
        self.reference = reference
        # A check run read by its author alone carries nothing to anyone else: no grade
        # is recorded from it, and the author already holds the code and its messages.
        self.private = reference is not None and not for_the_author
        self._secrets: frozenset[str] | None = None

    def secrets(self) -> frozenset[str]:
        # A line the upload itself holds is no secret to its author; skipping those also
        # keeps this net from telling a student which of their lines match the reference.
        if self._secrets is None:
            own = {_squeezed(line) for source in self.sources.values() for line in source.splitlines()}
            self._secrets = (_reference_lines(self.reference) - own if self.reference is not None
                             else frozenset())
        return self._secrets

    def redact(self, text: str) -> str:
        """The safety net under every student-visible string: one that holds a line of
        the reference is replaced whole."""
        if not text or not self.private:
            return text
        squeezed = _squeezed(strip_slots(text))  # a value's marks must not split a line it holds
        found = [line for line in self.secrets() if line in squeezed]
        return _WITHHELD if any(line not in _checks_text() for line in found) else text

    def bounded(self, text: str) -> str:
        """A judge's words about an answer, as a graded run shows them: each number with at
        most SHOWN_DIGITS significant digits (what the finest of the checks' figures needs:
        a float32 answer told from float64's, 1.039720774 for 1.039720771), at most SHOWN_NUMBERS numbers, and each quoted text cut to
        SHOWN_QUOTE characters, SHOWN_QUOTED in all. What the code returned can then carry at most
        `value_bits(text)` bits to the student (grader/qa/wire.py counts them)."""
        if not text or not self.private:
            return text
        return bound_values(text)

    def output(self, printed: str) -> tuple[str, str]:
        """(what the student sees, what staff see) of what the code printed."""
        return ("" if self.private else without_library_talk(printed)), printed

    def location(self, where: str) -> str:
        """Where the worker says the exception was raised. In a graded run: ' (file)' for
        one of the course's files the upload holds, ' (in a file of your own)' for any
        other file of the upload, '' otherwise. Without certified parts: ' (file:line:
        text)', the text read from the upload."""
        match = _LOCATION.fullmatch(where or "")
        if not match or match[1] not in self.sources:
            return ""
        rel, number = match[1], int(match[2])
        if self.private:
            return f" ({STUDENT_PACKAGE}/{rel})" if rel in self.course_files() else " (in a file of your own)"
        lines = self.sources[rel].splitlines()
        if not 1 <= number <= len(lines):
            return f" ({_place(rel, number)})"
        text = lines[number - 1].strip()[:160]
        return f" ({_place(rel, number)}: {text})" if text else f" ({_place(rel, number)})"

    def part_at(self, where: str, task: Task) -> str:
        """Where an exception was raised inside another task's function of the upload:
        ', in LayerNorm.forward: task 'layer_norm' of chapter 05', so a crash in a part is
        blamed on that part; '' anywhere else."""
        match = _LOCATION.fullmatch(where or "")
        if not match or match[1] not in self.sources:
            return ""
        rel, number = match[1], int(match[2])
        owner = _enclosing_task(self.sources[rel], rel[:-3], number)
        if owner is None or owner.name == task.name:
            return ""
        chapter = catalogue.chapter_of_task()[owner.name].number
        return f", in {owner.qualname}: task '{owner.name}' of chapter {chapter}, which this task builds on"

    def course_files(self) -> frozenset[str]:
        """The files of the course's package: a set the upload cannot add to."""
        return frozenset(self.reference.sources) if self.reference is not None else frozenset()

    def word(self, name: str) -> bool:
        """An identifier the upload itself spells: text fixed before anything ran."""
        return bool(_IDENTIFIER.fullmatch(name or "")) and any(
            re.search(rf"\b{name}\b", source) for source in self.sources.values())

    def exception_name(self, kind: str, standard: bool = True) -> str:
        """The exception's type as the student may read it, or 'an exception'. In a graded
        run only a class Python or torch defines (`standard`: the worker found the raised
        class among them, not a class of the upload's named alike); without certified
        parts, also a class the upload defines."""
        if not _IDENTIFIER.fullmatch(kind or ""):
            return "an exception"
        if self.private:
            return kind if standard and kind in standard_exception_names() else "an exception"
        return kind if kind in _known_exception_names() or self.word(kind) else "an exception"

    def syntax_error(self, where: str) -> str | None:
        """The grader's own compile of the file the worker named: its message, not the
        worker's, and its line, which the upload fixed before anything ran. In a graded
        run, for the course's files only."""
        match = _LOCATION.fullmatch(where or "")
        if not match or match[1] not in self.sources or (self.private and match[1] not in self.course_files()):
            return None
        try:
            compile(self.sources[match[1]], f"{STUDENT_PACKAGE}/{match[1]}", "exec", dont_inherit=True)
        except SyntaxError as error:
            lines = self.sources[match[1]].splitlines()
            text = lines[error.lineno - 1].strip()[:160] if error.lineno and 1 <= error.lineno <= len(lines) else ""
            place = _place(match[1], error.lineno)
            # The line last, after all else: inside brackets, its own unclosed bracket read as closed.
            return f"{type(error).__name__}: {error.msg} ({place}" + (f"), which reads: {text}" if text else ")")
        except Exception:  # noqa: BLE001 - a file too deep to compile says nothing more
            return None
        return None


def _doing(check: "Check | None") -> str:
    """What the probe was doing when the code raised, in the grader's own words."""
    return f", while this check ran ({check.summary})" if check is not None and check.summary else ""


def _enclosing_task(source: str, module: str, number: int) -> Task | None:
    """The task whose function holds line `number` of a module's source, innermost first."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    tasks = {(t.module, t.qualname): t for t in catalogue.tasks().values()}
    found = None

    def visit(node, prefix: str) -> None:
        nonlocal found
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if child.lineno <= number <= (child.end_lineno or child.lineno):
                    if (module, name) in tasks:
                        found = tasks[(module, name)]
                    visit(child, name + ".")

    visit(tree, "")
    return found


def broken_promise(task: Task, error: Failure, check: "Check | None", inputs: "dict | None") -> str:
    """What the call passed and what the lesson promises of it, in the kit's words and values,
    for a crash on a shape: "; your code unpacks a sequence into 2 names there, the lesson
    promises x of any leading shape ([..., d]), and this call passed x of shape [2, 3, 5]:
    read the axes you need by index (x.shape[-1]) rather than unpacking them all". Unpacking
    is read from the instruction that raised (the worker's "unpacked"); any other standard
    error of a task that words a promise (Task.promises) gets the promise and the shape.
    "" where there is nothing to say."""
    names = error.unpacked
    unpacked = names is not None
    if not isinstance(inputs, dict) or not (unpacked or (task.promises and error.standard
                                                          and error.type in _SHAPE_ERRORS)):
        return ""
    hide = check is not None and check.hidden
    given = {name: value for name, value in inputs.items()
             if not name.startswith("_") and isinstance(value, torch.Tensor)}

    def shape(value: torch.Tensor) -> str:
        text = f"of shape {list(value.shape)}"
        return hidden(text, "of a hidden shape") if hide else public(text)

    worded = dict(task.promises) | {name: f"with {constant(axes)} axes" for name, axes in task.takes}
    promised = next((name for name in worded if name in given), None)
    if not unpacked:
        return (f"; the lesson promises {promised} {worded[promised]}, and this call passed {promised} "
                f"{shape(given[promised])}") if promised else ""
    unpack = f"your code unpacks a sequence into {constant(names)} names there"
    if promised is None:
        if not given:
            return ""
        passed = ", ".join(f"{name} {shape(value)}" for name, value in list(given.items())[:3])
        return (f"; {unpack}, and this call passed {passed}: a shape has one entry per axis, so read the axes you "
                f"need by index ({constant('x.shape[-1]')}) rather than unpacking them all")
    return (f"; {unpack}, the lesson promises {promised} {worded[promised]}, and this call passed {promised} "
            f"{shape(given[promised])}: read the axes you need by index ({constant(f'{promised}.shape[-1]')}) "
            f"rather than unpacking them all")


# Exceptions a shape the code did not expect raises.
_SHAPE_ERRORS = frozenset({"RuntimeError", "ValueError", "IndexError"})


def remote_failure(task: Task, error: Failure, audience: Audience, check: "Check | None" = None,
                   loading: bool = False, inputs: "dict | None" = None) -> tuple[str, str, str]:
    """(status, what the student sees, what staff see) of an exception raised in the worker.
    What the student sees is a sentence built from the exception's type, where it was raised
    and what the check was doing: never, in a graded run, from the message, which the code
    chose, nor a class or line it could choose while it ran (Audience); staff see the
    message, the line and every frame."""
    raised = _Raised.of(error)
    words = _CAUSE_WORDS.get(error.cause)
    said = words(task, error, audience, raised) if words is not None else None
    return said if said is not None else _words_for_crash(task, error, audience, raised, check, loading, inputs)


class _Raised(NamedTuple):
    """A worker's exception as text: its type, message and place (`at`, as a sentence
    ends with it), and what staff read of it, every frame included."""

    kind: str
    message: str
    where: str
    at: str
    staff: str

    @classmethod
    def of(cls, error: Failure) -> _Raised:
        kind, message, where, line = (as_text(value or "") for value in (error.type, error.message, error.where,
                                                                          error.line))
        place = _student_where(where)
        if kind in _SYNTAX_ERRORS and where and line:
            # The line last, after all else: inside brackets, its own unclosed bracket read as closed.
            at = f"; {place} reads: {line}"
        else:
            at = f" ({place}: {line})" if where and line else (f" ({place})" if where else "")
        return cls(kind, message, where, at, f"{kind}: {message}{at}{_traceback(error.trace)}")


def _words_for_not_implemented(task: Task, error: Failure, audience: Audience,
                               raised: _Raised) -> tuple[str, str, str]:
    # The message is compared with task names, never echoed unless it is one.
    named = raised.message.strip("'\"")
    if named == task.name:
        shown = f"{task.qualname} still raises NotImplementedError"
        return NOT_IMPLEMENTED, shown, shown
    staff = f"it needs '{named}', which is not implemented yet" if raised.message else f"NotImplementedError{raised.at}"
    if not audience.private or named in catalogue.tasks():
        return ERROR, staff, staff
    return ERROR, f"NotImplementedError{audience.location(raised.where)}", staff


def _words_for_forbidden(task: Task, error: Failure, audience: Audience,
                         raised: _Raised) -> tuple[str, str, str] | None:
    forbidden = forbidden_code(error.forbidden)
    if forbidden is None:
        return None
    # Raised before any probe ran (a tripwire hit while the package loaded).
    said = (f"{forbidden.name} is not allowed in this task" if forbidden.kind is ForbiddenKind.NAME
            else forbidden_words(forbidden))
    if not audience.private:
        return FORBIDDEN, said, said
    if forbidden.kind in (ForbiddenKind.PROCESS, ForbiddenKind.THREAD):
        return FORBIDDEN, _forbidden_call_text(forbidden, task), said
    allowed = forbidden.kind is ForbiddenKind.NAME and forbidden.name in task.forbidden
    return FORBIDDEN, (said if allowed else "calls a library function this task forbids"), said


def _words_for_unfit(task: Task, error: Failure, audience: Audience,
                     raised: _Raised) -> tuple[str, str, str] | None:
    if error.unfit not in UNFIT:
        return None
    # A probe's own finding, in the kit's words.
    return FAILED, f"{task.qualname.split('.')[0]} {UNFIT[error.unfit]}", raised.staff


def _words_for_sealed(task: Task, error: Failure, audience: Audience,
                      raised: _Raised) -> tuple[str, str, str]:
    # The worker refused the read (or the call) before anything of the part was had.
    return FORBIDDEN, _SEALED[error.cause], raised.staff


# What the worker's seal refused (grader/run/inside/sealed.py), in the grader's words.
_SEALED = {
    Cause.SEALED_READ: ("reads the code of a part of the course's reference (its code object, source or frames): the "
             "reference's parts may be called, never read"),
    Cause.NOT_BUILT_ON: "runs the course's reference for a part this task does not build on: use your own code",
}


def _words_for_cannot_cross(task: Task, error: Failure, audience: Audience,
                            raised: _Raised) -> tuple[str, str, str]:
    # The course's part runs in a process of its own; what the code gave it could not go
    # there. The grader's words, by the cause alone: the message could be the code's.
    if error.cause is Cause.TOO_LARGE_TO_CROSS:
        said = (f"the code gave the course's part it builds on (or got back from it) {TOO_LARGE}, more than "
                f"the grader carries between processes: build smaller values (a graph of a few thousand Values, "
                f"tensors of a few MB)")
    else:
        said = ("the code gave the course's part it builds on a value of a kind it does not take: the course's "
                "parts take tensors, numbers, strings, lists, tuples and dicts of those, torch's generators, "
                "the package's own objects and Values")
    return ERROR, f"{task.qualname}: {said}", raised.staff


# The causes told in words of their own, whoever reads them; None from one of them (a
# forbidden call it cannot read, an unfit key it does not know) leaves a crash, as every
# other cause is (_words_for_crash). (A Failure's cause is always a Cause: messages.py builds it.)
_CAUSE_WORDS = {Cause.NOT_IMPLEMENTED: _words_for_not_implemented, Cause.FORBIDDEN: _words_for_forbidden,
                Cause.UNFIT: _words_for_unfit, **dict.fromkeys(_SEALED, _words_for_sealed),
                **dict.fromkeys((Cause.CANNOT_CROSS, Cause.TOO_LARGE_TO_CROSS), _words_for_cannot_cross)}


def _words_for_crash(task: Task, error: Failure, audience: Audience, raised: _Raised, check: "Check | None",
                 loading: bool, inputs: "dict | None") -> tuple[str, str, str]:
    """An exception no cause explains, as a crash: in a graded run, by its type, the file
    and what the check was doing."""
    kind, where, staff = raised.kind, raised.where, raised.staff
    if not audience.private:
        return ERROR, f"{kind}: {raised.message}{raised.at}{audience.part_at(where, task)}{_doing(check)}", staff
    if kind in _SYNTAX_ERRORS:
        compiled = audience.syntax_error(where)
        if compiled:
            return ERROR, compiled, staff
    if error.cause is Cause.EXIT:
        return ERROR, f"the code called sys.exit{audience.location(where)}", staff
    # A graded run names a type Python or torch defines and a file, never a class or a
    # line the code could have picked by what it read; the staff's text has both.
    name = audience.exception_name(kind, error.standard)
    what = name if name != "an exception" else "an exception of its own class"
    located = audience.location(where)
    if loading:
        # Before any task ran: the package's own import (or a module it lacks) failed.
        missing = error.missing_module if error.cause is Cause.MISSING_MODULE else None
        if missing in {t.module for t in catalogue.tasks().values()}:
            return ERROR, f"the submission has no {missing}.py", staff
        return ERROR, audience.redact(f"{what} was raised while the package was imported{located}; its message "
                                      f"is kept for course staff when graded (`make check` shows it)"), staff
    operation = failed_operation_words(error.operation)
    if not located:
        # Raised in a certified part working on what the student's code built or returned.
        shown = (f"{what} was raised outside your {task.qualname}, in a part that uses what it built or "
                 f"returned{_doing(check)}{operation}; its message is kept for course staff when graded "
                 f"(`make check` shows it)")
    else:
        shown = (f"{task.qualname} raised {what}{located}{_doing(check)}{operation}"
                 f"{broken_promise(task, error, check, inputs)}; its message is kept for course "
                 f"staff when graded (`make check` shows it)")
    return ERROR, audience.redact(shown), staff


def error_verdict(task: Task, error: Failure, audience: Audience, loading: bool = False) -> dict:
    """The verdict (grader/run/verdicts.py) of an exception raised in the worker, with
    only what its sentence may show the student: the course's file and, where the upload
    fixed it before anything ran (a syntax error, the grader's own compile) or no
    certified part ran beside it, the line; the exception's name where Python or torch
    defines it."""
    kind = as_text(error.type)
    message = as_text(error.message).strip("'\"")
    if error.cause is Cause.NOT_IMPLEMENTED:
        return {"kind": "not_implemented", "task": message if message in catalogue.tasks() else task.name}
    forbidden = forbidden_code(error.forbidden) if error.cause is Cause.FORBIDDEN else None
    if forbidden is not None or error.cause in _SEALED:
        call = forbidden.name if forbidden is not None and forbidden.kind is ForbiddenKind.NAME else ""
        return {"kind": "forbidden", "task": task.name, "call": call}
    if error.cause is Cause.UNFIT and error.unfit in UNFIT:
        return {"kind": "deviation", "task": task.name}
    missing = error.missing_module if error.cause is Cause.MISSING_MODULE else None
    if loading and missing in {t.module for t in catalogue.tasks().values()}:
        return {"kind": "load_failed", "file": f"{STUDENT_PACKAGE}/{missing}.py", "line": None, "error": "missing"}
    match = _LOCATION.fullmatch(as_text(error.where or ""))
    file, line = "", None
    if match and match[1] in audience.sources:
        own = not audience.private or match[1] in audience.course_files()
        file = f"{STUDENT_PACKAGE}/{match[1]}" if own else "a file of your own"
        line = int(match[2]) if not audience.private else None
        if kind in _SYNTAX_ERRORS and own:
            try:
                compile(audience.sources[match[1]], match[1], "exec", dont_inherit=True)
            except SyntaxError as compiled:
                line = compiled.lineno
            except Exception:  # noqa: BLE001 - a file too deep to compile: no line to give
                pass
    name = "SystemExit" if error.cause is Cause.EXIT else audience.exception_name(kind, error.standard)
    shown = name if name != "an exception" else ""
    if loading:
        return {"kind": "load_failed", "file": file, "line": line, "error": shown}
    return {"kind": "crash", "task": task.name, "error": shown, "file": file, "line": line}


_DTYPE_NAMES = frozenset({"float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8",
                          "bool", "complex64", "complex128"})


def failed_operation_words(value: "Operation | None") -> str:
    """The operator that raised, as the kit's recorder saw it: ', in aten.linalg_vector_norm
    on a float64 tensor of shape [3, 4], asked for dtype float32', or '' where the worker
    sent none or one of another shape. Names, dtypes and shapes only: what the kit saw of
    the student's tensors, never text the code wrote."""
    if value is None:
        return ""
    op, tensors, asked = value.op, value.tensors, value.dtype
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,60}", op) or not hasattr(torch.ops.aten, op):
        return ""
    if not isinstance(tensors, list) or len(tensors) > 4:
        return ""
    described = []
    for item in tensors:
        if not (isinstance(item, list) and len(item) == 2 and item[0] in _DTYPE_NAMES and isinstance(item[1], list)
                and len(item[1]) <= 6 and all(isinstance(n, int) and 0 <= n < 10**9 for n in item[1])):
            return ""
        described.append(f"a {item[0]} tensor of shape {item[1]}")
    said = f", in aten.{op}" + (" on " + ", ".join(described) if described else "")
    if asked is not None:
        if asked not in _DTYPE_NAMES:
            return ""
        said += f", asked for dtype {asked}"
        wider = [d for d, _ in tensors if _FLOAT_BITS.get(d, 0) > _FLOAT_BITS.get(asked, 99)]
        if wider:
            said += (f" (narrower than the tensor's {wider[0]}, which torch refuses: compute in the tensor's own "
                     f"dtype)")
    shapes = [shape for _, shape in tensors]
    if len(shapes) == 2 and sorted(map(len, shapes)) == [1, 2]:
        vector, matrix = sorted(shapes, key=len)
        if vector[0] == matrix[0] != matrix[1]:
            said += (f" (a tensor of shape {vector} lines up with the last axis of one of shape {matrix}, not its "
                     f"rows: keep the reduced axis, with keepdim=True or [:, [-1]])")
    return said


_FLOAT_BITS = {"float16": 16, "bfloat16": 16, "float32": 32, "float64": 64}


def _traceback(trace) -> str:
    """Every frame the worker named (certified ones too), for course staff only."""
    if not isinstance(trace, list) or not trace:
        return ""
    return "; traceback: " + " > ".join(as_text(frame, 120) for frame in trace[-12:])


def checked_reply(reply: ProbeReply) -> ProbeReply:
    """Replies are data the submission could have written itself: their shape was checked as
    they were decoded (grader/run/inside/messages.py); here, what they say of forbidden calls
    and tampering."""
    if not all(forbidden_code(c) is not None for c in reply.forbidden_calls):
        raise WorkerFailed(WorkerStatus.GARBAGE, "the process answered with a malformed list of forbidden calls")
    if reply.tampered:
        raise WorkerFailed(WorkerStatus.TAMPERED, f"the grader's probe code was changed while the submission ran "
                                                  f"({as_text(reply.tampered, 200)})")
    return reply


# ------------------------------------------------------------ forbidden calls, as codes
# The worker reports what it caught as a code (grader/run/inside/op_rules.py and tasks.py
# make them); every sentence about it is made here.

# The fields each kind of forbidden call fills in.
_FORBIDDEN_KINDS = {ForbiddenKind.NAME: ("name",), ForbiddenKind.OP: ("layer", "name"),
                    ForbiddenKind.FORWARD_AUTOGRAD: ("name",), ForbiddenKind.AUTOGRAD: ("name",),
                    ForbiddenKind.RECORDER_OFF: ("how", "name"), ForbiddenKind.THREAD: (),
                    ForbiddenKind.LIBRARY: ("name",), ForbiddenKind.PROCESS: ("name",),
                    ForbiddenKind.TAUGHT_LATER: ("name",)}
_OP_LAYERS = {"kernel": "kernel aten.", "function": "function torch."}
_RECORDER_OFF = {"dispatch_popped": "the dispatch mode was taken off its stack",
                 "stack_changed": "a mode stack was changed"}
THREADS = "a new thread, where the grader cannot see which torch operators run (stay in the calling thread)"
# A process started (or a terminal opened) by the code; the calls the worker names are
# those its audit hook refuses (grader/run/inside/syscall_filter.py).
PROCESS = "starts a process: your code must compute in the process the grader gave it"
# torch's own code, by module and qualified name: torch.optim.adam._single_tensor_adam
_TORCH_CODE = re.compile(r"torch(?:\.[A-Za-z_][A-Za-z0-9_]*|\.<[a-z]+>)+")


def taught_later(part: str) -> str:
    """A task's code called the course's part for a task the lessons teach after it."""
    later, chapter = catalogue.tasks()[part], catalogue.chapter_of_task()[part].number
    return (f"calls {later.qualname} (task '{part}', chapter {chapter}), which the lessons teach after this task: "
            f"here it is the course's code, not yours; build this task from what came before it")


def forbidden_code(code: "CaughtCall | None") -> "CaughtCall | None":
    """A forbidden call as the worker sent it, with only the fields its kind fills in, if
    what they say is one the worker could have caught (the code could have written it)."""
    if not isinstance(code, CaughtCall):
        return None
    kind, fields = code.kind, _FORBIDDEN_KINDS[code.kind]
    if not all(len(getattr(code, f)) <= 200 for f in fields):
        return None
    if kind is ForbiddenKind.OP and code.layer not in _OP_LAYERS:
        return None
    if kind is ForbiddenKind.LIBRARY and not _TORCH_CODE.fullmatch(code.name):
        return None
    if kind is ForbiddenKind.PROCESS and code.name not in syscall_filter.PROCESS_EVENTS:
        return None
    if kind is ForbiddenKind.TAUGHT_LATER and code.name not in catalogue.tasks():
        return None
    return CaughtCall(kind, **{f: getattr(code, f) for f in fields})


def forbidden_words(code: CaughtCall) -> str:
    """What was called, in the grader's words (course staff read this; so does a student
    of `make check`, where no certified part ran)."""
    kind, name = code.kind, code.name
    if kind == "name":
        return name
    if kind == "op":
        return f"torch's built-in {_OP_LAYERS[code.layer]}{name} ({op_rules.hint(name)})"
    if kind == "forward_autograd":
        return f"forward-mode autograd (torch.{name}): derive every gradient by hand"
    if kind == "autograd":
        return (f"autograd ({name} ran on a tensor that requires grad): derive every gradient by hand, "
                f"no tensor may require grad here")
    if kind == "recorder_off":
        how = _RECORDER_OFF.get(code.how) or (f"{name} was modified" if code.how == "handler_modified" else name)
        return f"code that switched off the grader's operator recorder ({how})"
    if kind == "library":
        return f"torch's own implementation of what this task asks for ({name})"
    if kind == "process":
        return f"{name}, which {PROCESS}"
    if kind == "taught_later":
        return taught_later(name)
    return THREADS


# What a library call that students paste for a task does differently from the task.
_LIBRARY_NOTES = {
    "torch.nn.functional.normalize": "it divides each vector by its length and never subtracts the mean (an "
                                     "RMS-style norm, not a LayerNorm)",
}


def _forbidden_call_text(code: CaughtCall, task: Task) -> str:
    """What a student sees of a forbidden call where certified parts ran: only names the
    task's own rules forbid are repeated, since the code could have chosen the rest."""
    kind, name = code.kind, code.name
    if kind == "name" and name in task.forbidden:
        return f"uses {name}: the point of this task is to write it yourself"
    if kind == "op" and op_rules.Rules(task.forbidden_ops).forbids(name):
        return f"runs torch's built-in {_OP_LAYERS[code.layer]}{name} ({op_rules.hint(name)})"
    if kind == "forward_autograd" and task.no_autograd:
        return "uses forward-mode autograd: derive every gradient by hand"
    if kind == "autograd" and task.no_autograd:
        return "uses autograd: derive every gradient by hand, no tensor may require grad here"
    if kind == "recorder_off":
        return "switches off the grader's operator recorder"
    if kind == "thread":
        return THREADS
    if kind == "library" and op_rules.Rules(task.forbidden_ops).forbids_library(name):
        note = next((f"; {said}" for call, said in _LIBRARY_NOTES.items() if name.startswith(call)), "")
        return f"runs torch's own implementation of what this task asks for ({name}){note}: write it yourself"
    if kind == "process":
        return PROCESS  # one sentence whichever call it was: the code chose the call
    if kind == "taught_later":
        return taught_later(name)  # a part the task's probes hold: its name tells nothing new
    return "calls a library function this task asks you to write"


def judge_answer(check: Check, task: Task, reply: ProbeReply, inputs: dict, expected,
                 audience: Audience, reference=None) -> tuple[str, str, str, dict | None]:
    """(status, what the student sees, what staff see, the verdict) of one reply (checked_reply)."""
    if reply.forbidden_calls:
        called = forbidden_code(reply.forbidden_calls[0])
        staff = f"uses {forbidden_words(called)}: the point of this task is to write it yourself"
        verdict = {"kind": "forbidden", "task": task.name, "call": called.name}
        if audience.private:
            return FORBIDDEN, _forbidden_call_text(called, task), staff, verdict
        return FORBIDDEN, staff, staff, verdict
    if reply.error is not None:
        return (*remote_failure(task, reply.error, audience, check, inputs=inputs),
                error_verdict(task, reply.error, audience))
    result = reply.result
    if isinstance(result, TooLarge):  # the worker's measure; the words are the grader's own, never what came
        said = f"the answer is too large to send back: {TOO_LARGE}"
        return FAILED, said, said, {"kind": "deviation", "task": task.name}
    if isinstance(result, (RemoteError, Opaque)):
        staff = f"the output does not have the expected form: {as_text(result, 300)}"
        what = "an exception object" if isinstance(result, RemoteError) else "an object that is not plain data"
        return FAILED, (f"the output does not have the expected form: it is {what}" if audience.private
                        else staff), staff, {"kind": "deviation", "task": task.name}
    try:
        with listening() as heard:
            diagnosis = check.judge(result, inputs, expected)
            if isinstance(diagnosis, SetAside):
                diagnosis = _with_that_fixed(check, diagnosis, result, inputs, expected)
    except Exception as error:  # noqa: BLE001 - the answer's form says whose fault it is
        status, shown, staff = judge_failure(check, result, error, audience, reference)
        return status, shown, staff, ({"kind": "deviation", "task": task.name} if status == FAILED else None)
    if diagnosis is None:
        return PASSED, "", "", None
    # The kind of verdict travels with the words (OwnPartsVerdict: judged on the student's parts).
    kind = OwnPartsVerdict if isinstance(diagnosis, OwnPartsVerdict) else str
    return (FAILED, kind(audience.redact(audience.bounded(str(diagnosis)))), str(diagnosis),
            of_judgement(task.name, diagnosis, heard.mistake))


def _with_that_fixed(check: Check, first: SetAside, result, inputs: dict, expected) -> str:
    """A diagnosis of a property the kit can set aside, and what the judge says of the answer
    with it corrected: one slip does not hide the others (the check fails all the same)."""
    try:
        second = check.judge(first.corrected(result), inputs, expected)
    except Exception:  # noqa: BLE001 - the corrected answer is the kit's guess: say only the first
        return str(first)
    if second is None:
        return f"{first}; with that fixed, the rest of this check holds"
    if isinstance(second, SetAside) or str(second) == str(first):
        return str(first)
    joined = f"{first}; with that fixed: {second}"
    if isinstance(second, Named):  # the mistake the second finding names is the verdict's
        return Named(joined, second.mistake)
    return OwnPartsVerdict(joined) if isinstance(second, OwnPartsVerdict) else joined


def judge_failure(check: Check, result, error: Exception, audience: Audience,
                  reference=None) -> tuple[str, str, str]:
    """A judge that raised: on an answer of another form than the probe's declared one
    (grader/run/forms.py), or one that departs from the reference's answer to the same
    inputs in what a form does not hold (`reference()`: a shape, NaN, a length), the answer
    is at fault, and the student is told where it departs; on an answer like the
    reference's in all of these, the course's check is, and the student is asked to report
    it. Where no form was declared, the answer is taken to be at fault, as a judge reads it."""
    raised = f"{type(error).__name__}: {as_text(error, 300)}"
    if isinstance(error, MissingFacts):
        said = (f"the course's check {check.name} lacks the data it judges with: report it to course staff "
                f"(the kit writes that data with `make student`)")
        return ERROR, said, f"{said} ({raised})\n{_judge_trace(error)}"
    form = declared(check)
    departs = difference(result, form) if form is not None else None
    if form is not None and departs is None and reference is not None:
        right = reference()
        departs = unlike(result, right) if right is not None else None
    if form is not None and departs is None:
        said = (f"the course's check {check.name} failed on an answer of the right form: report it to course "
                f"staff; it says nothing about your code")
        return ERROR, said, f"{said} ({raised})\n{_judge_trace(error)}"
    staff = f"the output does not have the expected form: {departs}" if departs else (
        f"the output does not have the expected form ({raised})")
    shown = staff if (departs or not audience.private) else (
        f"the output does not have the expected form ({type(error).__name__})")
    return FAILED, audience.redact(audience.bounded(shown)), staff


def _judge_trace(error: Exception) -> str:
    import traceback

    return "".join(traceback.format_exception(error)[-6:])


_FIXED_FAILURE_TEXT = {
    # These reasons quote what the worker sent; the student gets the grader's words only.
    WorkerStatus.GARBAGE: "the process running the code sent a malformed answer",
    WorkerStatus.TAMPERED: "the grader's probe code was changed while the submission ran",
}


def failure_texts(failure: WorkerFailed, audience: Audience, prefix: str = "") -> dict:
    shown = _FIXED_FAILURE_TEXT.get(failure.status, failure.reason) if audience.private else failure.reason
    output, staff_output = audience.output(failure.output)
    return {"diagnosis": audience.redact(prefix + shown), "output": output,
            "staff_diagnosis": prefix + failure.reason, "staff_output": staff_output}
