"""Grading one submission: the engine that runs a task's checks (engine), the sandbox
that holds student code (sandbox, and inside/ for the code that runs in it), finding
the package in an upload (submission), the solution regions of the reference (regions), the static scans (scan_calls,
scan_tampering),
and how results are shown (report).

inside/ and this file are the only parts of grader/ besides checks/ that the sandbox
can see, so this file imports nothing."""
