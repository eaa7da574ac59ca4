"""What a check found, as data: the mistake it named, or the kind of failure.

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
                     grading (these): engine.published_inputs_only
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

KINDS = ("mistake", "deviation", "not_implemented", "waiting", "gated", "public_only", "load_failed", "crash", "timeout",
         "forbidden", "runner_failed", "unanswered")


def of_judgement(task: str, diagnosis, heard: str) -> dict:
    """The verdict of a judge's failing diagnosis."""
    key = getattr(diagnosis, "mistake", "") or heard
    return {"kind": "mistake", "task": task, "mistake": key} if key else {"kind": "deviation", "task": task}
