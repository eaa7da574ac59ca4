"""What chapter 00's task modules share. micro.py is plain Python: the probes hand back
floats and lists of floats (a Value's .data and .grad), never Value objects, and the
judges compare them with what a right (or a known wrong) implementation gives, which
on the public checks' inputs is data the kit computed (grader/checks/facts.py, with
the float oracles of hidden/oracles.py). Below: the tasks' common Task fields, float
comparisons, and the small MicroGPT the model-level checks build with a fixed seed.
"""

from __future__ import annotations

import math
import random

from grader.checks._api import Task


TOL = 1e-9  # pure Python float64 on both sides: only summation order differs
NEAR = 1e-7  # reproducing a known mistake

# micro.py is plain Python. The static scan resolves every name a graded function uses
# through micro.py's imports; the same names become tripwires in the sandbox, so they
# must be importable function attributes (never a bare module, never a class that the
# sandbox itself needs). "No torch or numpy anywhere in micro.py" is a check of its own
# (ch00.micro_forward.pure_python).
NO_TORCH = ("torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.exp", "torch.log", "torch.sqrt",
            "torch.rsqrt", "torch.softmax", "torch.log_softmax", "torch.relu", "torch.matmul",
            "torch.multinomial", "torch.nn.functional.softmax", "torch.nn.functional.log_softmax",
            "torch.nn.functional.relu", "torch.nn.functional.cross_entropy", "torch.nn.functional.rms_norm",
            "torch.autograd.grad", "torch.autograd.backward")


def task_of(name, qualname, title):
    return Task(name, "micro", qualname, title, forbidden=NO_TORCH)


# ----------------------------------------------------------------------- helpers


def is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def close_enough(a: float, b: float, tol: float = TOL) -> bool:
    return is_number(a) and abs(a - b) <= tol * max(1.0, abs(b))


def flat_of(value):
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from flat_of(item)
    else:
        yield value


def shape_of(value):
    return [len(value), *(shape_of(value[0]) if value and isinstance(value[0], (list, tuple)) else [])] \
        if isinstance(value, (list, tuple)) else []


def all_close(actual, expected, tol: float = TOL) -> bool:
    """Nested lists of numbers, equal in structure and to tol (relative above 1)."""
    if isinstance(expected, (list, tuple)):
        return (isinstance(actual, (list, tuple)) and len(actual) == len(expected)
                and all(all_close(a, e, tol) for a, e in zip(actual, expected)))
    return close_enough(actual, expected, tol)


def off_by(actual, expected) -> float:
    """The largest absolute difference of two nested lists of the same structure."""
    return max((abs(a - e) for a, e in zip(flat_of(actual), flat_of(expected))), default=0.0)


def values_of(ns, numbers):
    return [ns.micro.Value(x) for x in numbers]


def data_of(values, what="the result"):
    """Floats from a list of Values; a TypeError names what was returned instead."""
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{what} should be a list of Values, got {type(values).__name__}")
    out = []
    for v in values:
        if not hasattr(v, "data"):
            raise TypeError(f"{what} should be a list of Values, found a {type(v).__name__}")
        out.append(float(v.data))
    return out


def kind_of(value) -> str:
    return type(value).__name__


# ---------------------------------------------------------------- the model


SMALL = {"vocab_size": 7, "n_embd": 8, "n_layer": 1, "block_size": 6, "n_head": 2, "mlp_ratio": 2}
NAMES = {"vocab_size": 27, "n_embd": 16, "n_layer": 1, "block_size": 16, "n_head": 4, "mlp_ratio": 4}
ANA = [26, 0, 13, 0, 26]  # 'ana' framed by BOS = 26 (chapter 01's tokenizer on the names list)


def model_of(micro, sizes, seed, spread=None):
    """A MicroGPT; with spread, weights redrawn with a larger std so attention is far from uniform."""
    model = micro.MicroGPT(**sizes, seed=seed)
    if spread:
        rng = random.Random(seed + 1)
        for p in model.params:
            p.data = rng.gauss(0.0, spread)
    return model


def micro_tables(model):
    return {name: [[p.data for p in row] for row in table] for name, table in model.state.items()}


def tables_fingerprint(tables) -> "dict | None":
    """Per weight table: its rows, its entries, and three sums of the entries (plain, of
    squares, and weighted by their place in the table). A table drawn otherwise, in
    another order or shape, changes them far beyond a tolerance; drawn by the same
    code on another platform, where random.gauss (built on libm's log, cos and sin)
    may land an ulp away, they move only in their last bits. None for tables that are
    not lists of rows of numbers."""
    try:
        fingerprint = {}
        for name, rows in tables.items():
            flat = [x for row in rows for x in row]
            if not all(is_number(x) for x in flat):
                return None
            n = len(flat)
            fingerprint[str(name)] = [len(rows), n, math.fsum(flat), math.fsum(x * x for x in flat),
                                      math.fsum((k + 1) / n * x for k, x in enumerate(flat))]
        return fingerprint
    except (AttributeError, TypeError):
        return None


def same_tables(fingerprint, expected) -> bool:
    """Two fingerprints of tables_fingerprint: the same tables, counts exactly and sums to TOL."""
    if not isinstance(fingerprint, dict) or fingerprint.keys() != expected.keys():
        return False
    return all(got[:2] == want[:2] and all_close(got[2:], want[2:], TOL)
               for got, want in ((fingerprint[name], expected[name]) for name in expected))
