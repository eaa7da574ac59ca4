"""The checks, one module per chapter. These modules are imported on both sides: the
grader reads their check tables, the sandboxed worker runs their probe functions.
So they import only torch, the standard library and grader.checks._api — never the
reference or anything that scores."""
