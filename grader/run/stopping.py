"""Ctrl-C in the kit's commands: obeyed at once, said in a sentence, never half-way
through a write.

Python turns SIGINT into KeyboardInterrupt wherever the main thread happens to be:
between two files of a result, in the clean-up that ends the workers, inside a library's
own `finally`. The commands `install()` this module's handler instead, under which

- the first Ctrl-C raises KeyboardInterrupt as usual and marks the process as stopping
  (`STOPPING`: grading threads read it and give up early);
- inside a `whole()` block a Ctrl-C waits until the block is done, so a record or a
  results file and its staff companion are written whole or not at all;
- a Ctrl-C after the first is ignored, so the stop the first one began (workers ended,
  what is done written) is not cut off half-way — a terminal's Ctrl-C reaches every
  process of its group, and a parent passes it on to its child as well. A student who
  presses it again and again (FORCE_AFTER more times) gets an exit on the spot.

The main thread never waits without a timeout while others work (`result_of`,
`first_done`, `joined`): CPython runs signal handlers on the main thread only, and the
kernel may hand a process's SIGINT to any of its threads; a main thread blocked on a
lock with no timeout is then never woken to see it, and the Ctrl-C is lost.

`moment(name)` marks a point of a run that the kit's tests interrupt. Where the
environment variable HERO_TRANSFORMER_PAUSE_AT names it, the program notes that it is
there (a line "paused at NAME" appended to the file HERO_TRANSFORMER_PAUSED names, or on
stderr without one: a child's stderr is often its parent's to read) and waits there for
Ctrl-C, so that the test's signal lands at that moment on any machine, idle or busy.
Elsewhere it costs a dictionary lookup.
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import sys
import threading
from contextlib import contextmanager

STOPPING = threading.Event()
SLICE = 0.1  # seconds the main thread waits at a time, between looks for a Ctrl-C
FORCE_AFTER = 3  # Ctrl-Cs after the first, while stopping, before the process exits at once
PAUSE_VARIABLE, PAUSED_VARIABLE = "HERO_TRANSFORMER_PAUSE_AT", "HERO_TRANSFORMER_PAUSED"

class Stopped(KeyboardInterrupt):
    """Ctrl-C, once the command has kept what it could; `said` tells the user what that
    is. A KeyboardInterrupt still, for whatever catches those (pytest, a caller's
    clean-up)."""

    def __init__(self, said: str):
        super().__init__(said)
        self.said = said


_state = {"depth": 0, "pending": False, "extra": 0}


def _on_ctrl_c(signum, frame):
    if STOPPING.is_set():
        _state["extra"] += 1
        if _state["extra"] >= FORCE_AFTER:
            sys.stderr.write("\nStopped at once.\n")
            sys.stderr.flush()
            os._exit(130)
        return
    STOPPING.set()
    if _state["depth"]:
        _state["pending"] = True  # raised when the whole() block ends
        return
    raise KeyboardInterrupt


def install() -> None:
    """Take over SIGINT for this process (from the main thread). A process started with
    SIGINT ignored (a shell's `command &`) keeps ignoring it."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_ctrl_c)


@contextmanager
def whole():
    """A block a Ctrl-C does not cut in two: the interrupt is raised when it ends."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals are handled on the main thread only: nothing can land here
        return
    _state["depth"] += 1
    try:
        yield
    finally:
        _state["depth"] -= 1
        if not _state["depth"] and _state["pending"]:
            _state["pending"] = False
            raise KeyboardInterrupt


def result_of(future: concurrent.futures.Future):
    """future.result(), waited for a slice at a time (see the module's docstring)."""
    while not future.done():
        concurrent.futures.wait([future], timeout=SLICE)
    return future.result()


def first_done(pending: set) -> set:
    """The futures of `pending` that are done, once one is."""
    while True:
        done, _ = concurrent.futures.wait(pending, timeout=SLICE, return_when=concurrent.futures.FIRST_COMPLETED)
        if done:
            return done


def joined(thread: threading.Thread) -> None:
    while thread.is_alive():
        thread.join(SLICE)


def moment(name: str) -> None:
    """A named point of a run; see the module's docstring."""
    if os.environ.get(PAUSE_VARIABLE) != name:
        return
    note = os.environ.get(PAUSED_VARIABLE)
    if note:
        with open(note, "a", encoding="utf-8") as file:
            file.write(f"paused at {name}\n")
    else:
        sys.stderr.write(f"paused at {name}\n")
        sys.stderr.flush()
    # On the main thread the Ctrl-C raises from this wait (or, inside whole(), sets
    # STOPPING and the block raises as it ends); on another thread the wait ends when
    # the main thread has begun to stop.
    while not STOPPING.wait(0.05):
        pass
