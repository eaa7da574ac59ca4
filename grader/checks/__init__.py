"""The checks: one package per chapter (chNN_topic/), one folder per task named by its
solution region (catalogue.py says what it holds), each check declared with @check beside
its probe and judge (_api.py says how); the course's
contract (course.py); and the catalogue that collects them (catalogue.py).

These modules are imported on both sides: the grader reads the declarations, the
sandboxed worker runs the probes. So they import only torch, the standard library,
grader.checks._api and grader.checks.course — never the reference or anything that
scores."""
