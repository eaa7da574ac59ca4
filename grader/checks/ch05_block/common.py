"""What chapter 05's task modules share: the sizes its modules are built with.

Everything here runs on both sides: in the sandbox to build inputs into modules, and in
the grader to compute what known mistakes would output."""

from __future__ import annotations

from grader.checks.course import WALK_THROUGH

# The chapter's Config; a check's `sizes` go on top (course.config).
SIZES = dict(vocab_size=11, block_size=8, d_model=4, n_heads=2, n_layers=1, d_ff=8)
# One block of the walk-through: d=4, h=2, f=8.
BLOCK_WALK = {name: WALK_THROUGH[name] for name in ("d_model", "n_heads", "d_ff")}
