"""Code that runs inside the sandbox. Nothing here may import the reference, the
grader's scoring, or anything outside torch, the standard library and grader.checks."""
