"""What a student is shown of one check, the same on every platform (Gradescope,
PrairieLearn, Autolab, the nbgrader cell, a class run's feedback files, the terminal).

A public check shows its name, points, status, what a pass means (its summary), the
grader's diagnosis and, where the report allows it, what the code printed. A hidden
check shows its name, points, status and a diagnosis that holds no input and no
expected value: its summary names the hidden inputs ("the ledger holds for d=64, h=4,
f=256 (49,728 per block)"), and a judge's words about a failure may quote them or a
value computed from them ("… gives 49728 for d=64, f=256"), so the summary is left out
and every number in the diagnosis is withheld, unless its verdict shows that no hidden
input shaped the sentence (reads_whole: a named mistake in its task's own words, a
time-out, a package that did not load, a wait). The words stay: they say what is wrong.
Every back end builds its lines from `visible_check`, so none can show more than another.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A number standing alone: 64, 49,728, -0.0123, 2.5e-3, 1_000. Digits that are part of a
# name or a formula (fc1, float64, ch05, 4d², 2-D) are not numbers of the inputs.
_NUMBER = re.compile(r"(?<![\w.²³])[-−+]?(?:\d{1,3}(?:,\d{3})+|\d[\d_]*)(?:\.\d+)?(?:[eE][-+−]?\d+)?"
                     r"(?![\w²³])(?!-D\b)(?!\.\w)")
WITHHELD = "…"
# C0 controls but tab and newline, DEL, C1 controls (ESC/CSI/OSC start terminal escape
# sequences: cursor moves, erased lines, window titles, clipboard writes), and the Unicode
# bidi overrides/isolates that reorder what a line appears to say.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def plain(text) -> str:
    """Student-influenced text (diagnoses quoting exception messages, printed output, file
    and label names) with every control character removed, safe to show in a terminal."""
    return _CONTROL.sub("", str(text))


def _plain(text) -> str:
    return plain(text or "")


# Verdicts whose sentence the grader writes from what no hidden input decides: the kit's
# own names and limits, the student's own file, line and source, the processor seconds the
# code took, the parts a check waits on (grader/run/verdicts.py). A crash is not among them:
# its sentence names the input the check chose.
WHOLE_KINDS = frozenset({"waiting", "gated", "public_only", "load_failed", "not_implemented", "timeout", "forbidden",
                         "runner_failed", "unanswered"})


def reads_whole(text: str, verdict: "dict | None") -> bool:
    """Whether a hidden check's diagnosis may be published as it stands: a verdict of a
    kind above, or a named mistake said in the very words of its task's MISTAKES (a sentence
    of the public check module, the same for every input)."""
    kind = (verdict or {}).get("kind")
    if kind in WHOLE_KINDS:
        return True
    if kind == "mistake":
        from grader.checks import catalogue

        return text == catalogue.mistake_texts().get(verdict.get("task", ""), {}).get(verdict.get("mistake", ""))
    return False


def without_values(text: str, summary: str = "", verdict: "dict | None" = None) -> str:
    """A hidden check's diagnosis as a student may read it: whole where its verdict says no
    hidden input shaped it (reads_whole); else each value as its slot says (grader/checks/
    _slots.py: a kit constant, the student's own line, a public figure as it stands; a value
    from a hidden input in words), the sentences of the task's MISTAKES as they stand, and
    everything else with the check's summary (which names the hidden inputs) said in words
    and every number withheld."""
    text = _plain(text)
    if reads_whole(text, verdict):
        return text
    published, at = [], 0
    for start, end, shown in _published_spans(text, verdict):
        published += [_withheld(text[at:start], summary), shown]
        at = end
    published.append(_withheld(text[at:], summary))
    return "".join(published)


# What stands for a hidden check's summary inside a sentence ("while this check ran (…)").
HIDDEN_INPUTS = "on inputs kept hidden"


def _withheld(text: str, summary: str) -> str:
    if summary and summary in text:
        text = text.replace(summary, HIDDEN_INPUTS)
    return _NUMBER.sub(WITHHELD, text)


def _published_spans(text: str, verdict: "dict | None") -> list[tuple[int, int, str]]:
    """The stretches of `text` published as the data says, in order, none overlapping: its
    typed slots, and every sentence of its task's MISTAKES it quotes (public words, the
    same for every input)."""
    from grader.checks._slots import apart, spans

    verdict = verdict or {}
    found = spans(text, verdict.get("slots"))
    task = verdict.get("task")
    if task:
        from grader.checks import catalogue

        for said in catalogue.mistake_texts().get(task, {}).values():
            start = text.find(said) if said else -1
            while start >= 0:
                found.append((start, start + len(said), said))
                start = text.find(said, start + len(said))
    return apart(found)


def visible_verdict(verdict: "dict | None", hidden: bool) -> "dict | None":
    """The verdict as the student may read it beside the sentence (a results file's
    extra_data): a hidden check's slots without their places in a sentence the student
    does not see (a place would tell the length of what stands before it)."""
    if not hidden or not verdict or "slots" not in verdict:
        return verdict
    slots = [{"kind": "hidden", "words": slot.get("words", "")} if slot.get("kind") == "hidden"
             else {"kind": slot.get("kind"), "text": slot.get("text")} for slot in verdict["slots"]]
    return {**verdict, "slots": slots}


@dataclass(frozen=True)
class VisibleCheck:
    name: str
    hidden: bool
    status: str
    score: float
    points: float
    diagnosis: str = ""  # the grader's own words; for a hidden check, with no value in them
    summary: str = ""  # what a pass means; empty for a hidden check
    output: str = ""  # what the code printed, where the report shows it; empty for a hidden check
    gated: bool = False

    @property
    def said(self) -> str:
        """`passed`, or the status and the diagnosis: one line for a platform's message."""
        if self.status == "passed" or not self.diagnosis:
            return self.status
        return f"{self.status}: {self.diagnosis}"

    @property
    def note(self) -> str:
        """What to fix, under a check that did not pass: the diagnosis, else (a public
        check) what a pass means."""
        return self.diagnosis or self.summary


def visible_fields(name: str, hidden: bool, status: str, score: float, points: float, diagnosis: str = "",
                   summary: str = "", output: str = "", gated: bool = False,
                   verdict: "dict | None" = None) -> VisibleCheck:
    """The one place a check's student-facing fields are decided (a class run's record
    keeps the fields, so its feedback files come here too)."""
    if hidden:
        return VisibleCheck(name, True, status, score, points,
                            "" if status == "passed" else without_values(diagnosis, summary, verdict), "", "", gated)
    return VisibleCheck(name, False, status, score, points, "" if status == "passed" else _plain(diagnosis),
                        _plain(summary), _plain(output), gated)


def visible_check(result) -> VisibleCheck:
    """What a student is shown of a CheckResult."""
    check = result.check
    return visible_fields(check.name, check.hidden, result.status, result.score, check.points, result.diagnosis,
                          check.summary, result.output, bool(getattr(result, "gated", ())),
                          getattr(result, "verdict", None))
