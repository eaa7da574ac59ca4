"""Bodies that compute nothing, for every task: each must score 0 on its task.

A property check (the output keeps its shape, the future does not leak in, a cache
agrees with a full pass) holds for the identity as much as for the right code; such a
check earns points only together with its task's value check (Check.gated_by). These
entries keep that promise honest: for every task, the bodies a student might hand in
before writing anything —

    nothing    `pass`: the function returns None (a constructor builds nothing)
    identity   returns its first argument unchanged
    zeros      returns its first argument times 0
    half       returns its first argument times 0.5 (GELU's odd part holds for it)
    copy       returns a copy of its first argument
    constant   returns 1.0

— plus, where a task returns a pair or a triple, the identity in that shape (the
block's `return hidden, present` after running its attention), and

    table      the right answer where the arguments are ones the public checks pass (as
               a table of published answers, computed elsewhere, would give it), and an
               error anywhere else

A table passes public checks; it earns nothing only because no check on inputs drawn for
the grading gets an answer from it (grader.run.verdicts.published_inputs_only). `python -m
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
    # The backward passes return one gradient per input: zeros of each shape hold every
    # property a sum of gradients has (dx sums to zero over the features).
    "layer_norm_backward": ("zero_gradients", "return torch.zeros_like(x), torch.zeros_like(gamma), "
                                              "torch.zeros_like(gamma)"),
    "linear_backward": ("zero_gradients", "return torch.zeros_like(x), torch.zeros_like(weight), "
                                          "torch.zeros(weight.shape[0], dtype=weight.dtype)"),
    "residual_backward": ("zero_gradients", "return (torch.zeros_like(x), torch.zeros_like(gamma), "
                                            "torch.zeros_like(beta), torch.zeros_like(w1), torch.zeros_like(b1), "
                                            "torch.zeros_like(w2), torch.zeros_like(b2))"),
}


def _parameters(task) -> list[str]:
    """The names of the task's function's parameters, self left out (the reference's)."""
    module = importlib.import_module(f"solutions.hero_transformer.{task.module}")
    function = module
    for part in task.qualname.split("."):
        function = getattr(function, part)
    return [p for p in inspect.signature(function).parameters if p != "self"]


# The key a table files an answer under: the contents of every argument, whatever they
# hold (tensors, numbers, Values, strings, a model's weights, a config's fields). One text,
# run by the recorder here and written into each table's body, so that both compute the
# very same key.
TABLE_KEY = """
def _published_key(value, depth=0):
    # Told apart by what they offer, never by importing a library: chapter 00's module
    # must name no torch.
    kind = type(value).__name__
    if depth > 8:
        return "deep"
    if callable(getattr(value, "detach", None)) and hasattr(value, "shape"):  # a tensor
        return ("tensor", tuple(value.shape), str(value.dtype), tuple(value.detach().flatten().tolist()))
    if isinstance(value, (list, tuple)):
        return ("list", tuple(_published_key(item, depth + 1) for item in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), _published_key(v, depth + 1)) for k, v in value.items())))
    if isinstance(value, (int, float, str, bool)) or value is None:
        return ("plain", repr(value))
    if callable(getattr(value, "state_dict", None)):  # a module: its weights
        return ("module", kind, _published_key(dict(value.state_dict()), depth + 1))
    if callable(getattr(value, "get_state", None)):  # a generator: where the draws come from is an input too
        return ("generator", _published_key(value.get_state(), depth + 1))
    if callable(getattr(value, "getstate", None)):  # random.Random
        return ("rng", _published_key(value.getstate(), depth + 1))
    if hasattr(value, "data") and hasattr(value, "grad"):  # a Value of chapter 00
        return ("value", _published_key(value.data, depth + 1))
    fields = getattr(value, "__dict__", None)
    if isinstance(fields, dict):  # a config, chapter 00's model, a tokenizer
        return ("object", kind, _published_key({k: v for k, v in fields.items() if not callable(v)}, depth + 1))
    return ("other", kind)
"""


def _published_keys(task) -> frozenset:
    """The keys (TABLE_KEY) of the arguments of every call the task's public checks make
    on the reference, their inputs drawn as the student's own check draws them (the
    catch table grades with that seed too: a table at its strongest)."""
    import hashlib
    import inspect

    import torch

    from grader.checks import catalogue
    from grader.checks._api import PUBLIC_SEED
    from grader.generate.answer_scan import replaced, run_probe, time_limit
    from grader.run.reference import Reference

    namespace: dict = {}
    exec(TABLE_KEY, namespace)
    key_of = namespace["_published_key"]
    ns, keys, names = Reference.available().modules, set(), _parameters(task)

    def recording(original):
        signature = inspect.signature(original)

        def wrapper(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            keys.add(hashlib.sha256(repr(key_of(tuple(bound.arguments[name] for name in names))).encode()).hexdigest())
            return original(*args, **kwargs)
        return wrapper

    for check in [c for c in catalogue.all_checks() if c.task == task.name and not c.hidden]:
        inputs = check.make_inputs(torch.Generator().manual_seed(PUBLIC_SEED + sum(map(ord, check.name))))
        try:
            with replaced(ns, task, recording), time_limit(60):
                run_probe(check.probe, check, ns, inputs)
        except Exception:  # noqa: BLE001 - a check of a failure mode: what it passed is recorded
            pass
    return frozenset(keys)


def table_body(task) -> str:
    """The reference's body, run only on arguments among the public checks' (its answers
    looked up, as it were), raising on any other."""
    from grader.mutants import region_of
    from grader.run.reference import Reference

    keys = sorted(_published_keys(task))
    arguments = "".join(f"{name}, " for name in _parameters(task))
    reference = region_of(Reference.available().sources, task.name)[1]
    return (TABLE_KEY.strip("\n") + "\n\n"
            "import hashlib\n"
            f"if hashlib.sha256(repr(_published_key(({arguments}))).encode()).hexdigest() not in {keys!r}:\n"
            f"    raise LookupError('not among the published inputs')\n" + reference)


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
                      Trivial(f"{task.name}_half", task.name, f"return {first} * 0.5", "half"),
                      Trivial(f"{task.name}_copy", task.name,
                              f"import copy\nreturn copy.deepcopy({first})", "copy")]
        if not constructor:
            found.append(Trivial(f"{task.name}_constant", task.name, "return 1.0", "constant"))
        if task.name in SHAPED:
            kind, body = SHAPED[task.name]
            found.append(Trivial(f"{task.name}_{kind}", task.name, body, kind))
        if not constructor and params:
            found.append(Trivial(f"{task.name}_table", task.name, table_body(task), "table"))
    return tuple(found)
