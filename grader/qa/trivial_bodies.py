"""Bodies that compute nothing, for every task: each must score 0 on its task.

A property check (the output keeps its shape, the future does not leak in, a cache
agrees with a full pass) holds for the identity as much as for the right code; such a
check earns points only together with its task's value check (Check.gated_by). These
entries keep that promise honest: for every task, the bodies a student might hand in
before writing anything —

    nothing    `pass`: the function returns None (a constructor builds nothing)
    identity   returns its first argument unchanged
    zeros      returns its first argument times 0
    copy       returns a copy of its first argument
    constant   returns 1.0

— plus, where a task returns a pair or a triple, the identity in that shape (the
block's `return hidden, present` after running its attention). `python -m
grader.qa.catch_table` grades them all beside the mutants and fails when one scores.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from functools import lru_cache

from grader.mutants import Entry


@dataclass(frozen=True)
class Trivial(Entry):
    name: str
    task: str
    change: str  # the region's whole body
    kind: str = ""  # nothing, identity, zeros, copy, constant, or what the hand-written one does


# Tasks whose result is a tuple: the identity in that shape, run where the code would run.
SHAPED = {
    "attention": ("identity_pair", "return x, ((x, x) if use_cache else None)"),
    "block": ("identity_pair", """
        attended, present = self.attention(self.ln_attention(hidden), past_key_value, use_cache)
        return hidden, present
    """),
    "lm_forward": ("zero_logits", """
        B, T = idx.shape
        logits = torch.zeros(B, T, self.lm_head.weight.shape[0], device=idx.device)
        return logits, (None if targets is None else torch.tensor(0.0)), None
    """),
    "train_loop": ("zero_pair", "return 0.0, 0.0"),
}


def _parameters(task) -> list[str]:
    """The names of the task's function's parameters, self left out (the reference's)."""
    module = importlib.import_module(f"solutions.hero_transformer.{task.module}")
    function = module
    for part in task.qualname.split("."):
        function = getattr(function, part)
    return [p for p in inspect.signature(function).parameters if p != "self"]


@lru_cache(maxsize=1)
def trivial_entries() -> tuple[Trivial, ...]:
    from grader.checks import catalogue
    found = []
    for task in catalogue.tasks().values():
        found.append(Trivial(f"{task.name}_nothing", task.name, "pass", "nothing"))
        constructor = task.qualname.endswith("__init__")
        params = _parameters(task)
        if not constructor and params:
            first = params[0]
            found += [Trivial(f"{task.name}_identity", task.name, f"return {first}", "identity"),
                      Trivial(f"{task.name}_zeros", task.name, f"return {first} * 0", "zeros"),
                      Trivial(f"{task.name}_copy", task.name,
                              f"import copy\nreturn copy.deepcopy({first})", "copy")]
        if not constructor:
            found.append(Trivial(f"{task.name}_constant", task.name, "return 1.0", "constant"))
        if task.name in SHAPED:
            kind, body = SHAPED[task.name]
            found.append(Trivial(f"{task.name}_{kind}", task.name, body, kind))
    return tuple(found)
