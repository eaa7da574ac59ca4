"""What a worker's memory holds of the grader: no answer to steal.

Not the graded task's reference, as a function or as its source (the worker holds only
the certified parts its task builds on, and those refuse to be read); no judge or oracle
of the check modules (probes only); no input that only the judge reads. Each attack
below looks for one of them from the task's own code.
"""

from __future__ import annotations

import pytest

from tests.hostile import assert_no_points, run, run_body


def test_reference_of_the_graded_task_is_not_in_memory(reference, sandbox):
    # Look through every loaded module for another gelu and call it.
    body = """
        import sys
        own = sys.modules[__name__].gelu
        for name, module in list(sys.modules.items()):
            candidate = getattr(module, "gelu", None)
            if name.startswith("torch"):
                continue  # torch's own gelu is a forbidden call, caught separately
            if callable(candidate) and candidate is not own:
                try:
                    return candidate(x)
                except Exception:
                    continue
        raise RuntimeError("no reference found")
    """
    results = run_body(reference, sandbox, "gelu", body)
    assert_no_points(results)


def test_reference_source_is_not_in_memory(reference, sandbox):
    # Search every string reachable from loaded modules for the reference body.
    body = """
        import gc
        for obj in gc.get_objects():
            if isinstance(obj, dict):
                for value in list(obj.values()):
                    if isinstance(value, str) and "torch.erf(x / math.sqrt(2.0))" in value and "def gelu" in value:
                        raise RuntimeError("found the reference source")
        raise RuntimeError("reference source not found")
    """
    results = run_body(reference, sandbox, "gelu", body)
    assert_no_points(results)
    # Either the walk finds nothing, or the worker refuses it (gc.get_objects would hand
    # out what certified code refers to: grader/run/inside/sealed.py).
    assert all("not found" in r.staff_diagnosis or "every object the collector tracks" in r.staff_diagnosis
               for r in results), [r.staff_diagnosis for r in results]


@pytest.mark.parametrize("task_name, body", [
    ("layer_norm", """
        import sys
        api = getattr(sys, "mod" + "ules")["gra" + "der.checks._api"]
        return api.layer_norm(x, self.weight, self.bias, eps=self.eps)
    """),
    ("gelu", """
        import sys
        return getattr(sys, "mod" + "ules")["gra" + "der.checks._api"].exact_gelu(x)
    """),
    ("layer_norm", """
        import sys
        checks = getattr(sys, "mod" + "ules")["gra" + "der.checks.ch05_block.layer_norm"]
        judges = [d.judge for d in vars(checks).get("__declared_checks__", [])]
        return judges[0].__globals__["layer_norm"](x, self.weight, self.bias, eps=self.eps)
    """),
])
def test_the_judges_oracles_are_not_in_the_sandbox(reference, sandbox, task_name, body):
    """The check modules run in the sandbox for their probes; a judge's oracle reached
    through sys.modules (or through the declared checks) refuses to run there."""
    results = run(reference, sandbox, task_name, body)
    assert_no_points(results)


def test_grader_only_inputs_never_reach_the_worker(reference, sandbox):
    # Walk up to the worker loop and read the call it received: the causal check's
    # "_first_changed" (judging data) stays in the grader, and each run of the check sees
    # only its own input (the other one goes to a separate worker).
    body = """
        import sys
        frame = sys._getframe()
        while frame is not None and "call" not in frame.f_locals:
            frame = frame.f_back
        sent = frame.f_locals["call"].inputs if frame is not None else {}
        raise RuntimeError("inputs: " + ",".join(sorted(sent)))
    """
    results = run(reference, sandbox, "block", body, only={"causal_invariance"})
    assert_no_points(results)
    assert "inputs: sizes,state,x (" in results[0].staff_diagnosis, results[0].staff_diagnosis
