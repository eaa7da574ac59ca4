"""Each check's inputs and expected values: drawn from the grading's seed, and worked out
by the reference in the grader's own process (never in a worker's), once per check."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import torch

from grader.checks._api import Check
from grader.profile import PHASES
from grader.run.reference import Reference
from grader.run.stopping import joined, result_of

# The reference runs in the grader's own process on several threads (expected values worked
# out ahead, a reference answer asked for a verdict): one at a time, so that what one run
# seeds and draws from torch's global generator is never another's.
REFERENCE_RUNS = threading.Lock()


def inputs_and_expected(check: Check, seed: int, reference: Reference | None) -> tuple[dict, object]:
    """A check's inputs, drawn from the grading's seed and the check's name (so the same
    whenever and on whichever thread they are drawn), and the reference's answer to them."""
    generator = torch.Generator().manual_seed(seed + sum(map(ord, check.name)))
    with PHASES.phase("inputs"):
        inputs = check.make_inputs(generator)
    with PHASES.phase("expected values"), REFERENCE_RUNS:
        expected = check.expect(reference.modules, inputs) if (check.expect and reference) else None
    return inputs, expected


class Answers:
    """Each check's inputs and expected values, computed once by whichever comes first:
    the thread that grades the check, or work done ahead of it — while the sandbox boots,
    and on a thread of its own that walks the plan while workers compute (the grader
    works out the next check's answer as a worker runs this one). Either way a check
    gets what inputs_and_expected gives it, raised errors included."""

    def __init__(self, seed: int, reference: Reference | None):
        self.seed, self.reference = seed, reference
        self._lock = threading.Lock()
        self._claimed: dict[str, Future] = {}
        self._stop = threading.Event()
        self._helper: threading.Thread | None = None

    def take(self, check: Check) -> tuple[dict, object]:
        future, mine = self._claim(check, again=True)
        if mine:
            self._compute(check, future)
        try:
            return result_of(future)
        finally:
            with self._lock:
                self._claimed[check.name] = None  # taken: nothing kept, nothing computed again ahead

    def _claim(self, check: Check, again: bool = False) -> tuple[Future | None, bool]:
        """The check's future and whether the caller is to compute it; a check already
        taken gives (None, False), or a new future to compute where `again` (a second run)."""
        with self._lock:
            future = self._claimed.get(check.name)
            if future is not None or (check.name in self._claimed and not again):
                return future, False
            future = self._claimed[check.name] = Future()
            return future, True

    def _compute(self, check: Check, future: Future) -> None:
        try:
            future.set_result(inputs_and_expected(check, self.seed, self.reference))
        except BaseException as error:  # noqa: BLE001 - the check that takes it raises it, as before
            future.set_exception(error)

    def ahead(self, checks: list[Check], until=None) -> None:
        """Compute the answers of `checks` in turn, skipping any already claimed, while
        `until()` holds (always, without it) and until stop()."""
        for check in checks:
            if self._stop.is_set() or (until is not None and not until()):
                return
            future, mine = self._claim(check)
            if mine:
                self._compute(check, future)

    def ahead_on_a_thread(self, checks: list[Check]) -> None:
        self._helper = threading.Thread(target=self.ahead, args=(checks,), name="answers ahead", daemon=True)
        self._helper.start()

    def stop(self) -> None:
        self._stop.set()
        if self._helper is not None:
            joined(self._helper)
