"""What grading produces: a check's status, a check's result, a submission's report.
Plain data, imported by the engine that makes them and by everything that shows them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importing the checks imports torch: the CLI reads results before it may
    from grader.checks._api import Check

# The statuses a check can end with.
PASSED, FAILED, ERROR, TIMEOUT, NOT_IMPLEMENTED, FORBIDDEN = (
    "passed", "failed", "error", "timeout", "not implemented", "forbidden")
# Only where no certified part stands in (the student's own check): the check could only
# be judged with right parts, and a part it builds on fails its own checks in this run.
WAITING = "waiting"
STATUSES = (PASSED, FAILED, ERROR, TIMEOUT, NOT_IMPLEMENTED, FORBIDDEN, WAITING)

# CheckResult.cause: the grader could not start a process to run the submission's code.
RUNNER_FAILED = "runner_failed"
# CheckResult.cause: the package did not import (a syntax error, a crash or a hang at
# module level): one finding for every check it stopped, which no part waits on.
LOAD_FAILED = "load_failed"
# CheckResult.cause: the grader itself failed on the check (a bug of the kit's, to report).
GRADER_FAILED = "grader_failed"

# CheckResult.answer: what the answer was, where the code gave one.
COMPUTED, TRIVIAL, RAISED = "computed", "trivial", "raised"


def with_slots(verdict: "dict | None", slots: list) -> "dict | None":
    """The verdict with the diagnosis's typed values (grader/checks/_slots.py) in it."""
    if verdict is None or not slots:
        return verdict
    from grader.checks._slots import as_data

    return {**verdict, "slots": as_data(slots)}


@dataclass
class CheckResult:
    check: Check
    status: str
    diagnosis: str = ""  # what the student is shown
    output: str = ""  # what the student's code printed, shown only where no certified part ran beside it
    certified: tuple[str, ...] = ()  # the tasks whose reference stood in while this ran
    # Course staff only: the diagnosis with everything the student's code said in it
    # (exception messages, reprs, the line its traceback named) and all it printed.
    # Where certified parts ran beside the student's code, that code could read them, so
    # none of its words may reach the student; these fields keep them for staff.
    staff_diagnosis: str = ""
    staff_output: str = ""
    seconds: float = 0.0  # wall time of this check, its worker's start included (`grade --profile`)
    # Why, as a code, where the grader itself stopped the check (RUNNER_FAILED: no process
    # to run the code could be started), so no caller has to read the diagnosis.
    cause: str = ""
    # The value checks whose failure withheld this check's points (Check.gated_by): its
    # property held, but so it does for a body that computes nothing.
    gated: tuple[str, ...] = ()
    # WAITING: the tasks this check builds on that fail their own checks in this run.
    waiting_on: tuple[str, ...] = ()
    # What the answer the check judged was (grader.run.verdicts.kind_of_answer): COMPUTED,
    # TRIVIAL (what a body that computes nothing gives: None, zeros, a constant, a multiple
    # of an input) or RAISED (the probe caught an exception of the code's and reported it).
    answer: str = "computed"
    # The judge reached its verdict on the student's own parts (grader.checks._api.
    # OwnPartsVerdict): a failure that is the task's own, which never waits on a part.
    on_own_parts: bool = False
    # What the check found, as data (grader/run/verdicts.py): the named mistake or the kind
    # of failure; None when it passed.
    verdict: "dict | None" = None
    # The values the diagnosis quotes, typed by where they come from (grader/checks/_slots.py),
    # split off the judge's sentence here, where every diagnosis passes; the verdict keeps them.
    slots: list = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        from grader.checks._slots import split, strip

        self.diagnosis, self.slots = split(self.diagnosis)
        self.staff_diagnosis = strip(self.staff_diagnosis)
        self.verdict = with_slots(self.verdict, self.slots)

    @property
    def score(self) -> float:
        return self.check.points if self.status == PASSED else 0.0


@dataclass
class GradeReport:
    submission: str
    results: list[CheckResult]
    sandbox: str
    certified: str
    elapsed: float = 0.0
    problem: str = ""  # a submission-level problem (no package found, ...)

    @property
    def score(self) -> float:
        return sum(r.score for r in self.results)

    @property
    def max_score(self) -> float:
        return sum(r.check.points for r in self.results)
