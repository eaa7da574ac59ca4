"""Task micro_softmax: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch00_micro.micro_softmax import gradient, stable
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("softmax_shift_reversed", "micro_softmax", patch("""
        - exps = [(value - largest).exp() for value in logits]
        + exps = [(largest - value).exp() for value in logits]
    """), (stable, gradient), "negated",
       "exp(max - l): the order of the subtraction swapped"),
    mutant("softmax_is_log_softmax", "micro_softmax", patch("""
        - return [e / total for e in exps]
        + return [value - largest - total.log() for value in logits]
    """), (stable, gradient), "log-softmax",
       "returns log-probabilities"),
    mutant("softmax_without_max", "micro_softmax", patch("""
        - exps = [(value - largest).exp() for value in logits]
        + exps = [value.exp() for value in logits]
    """), stable, "largest", "no max subtraction: overflow"),
    mutant("softmax_total_detached", "micro_softmax", patch("""
        - total = vsum(exps)
        + total = sum(e.data for e in exps)
    """), gradient, "constant", "the total computed from .data"),
]

VARIANTS = [
    variant("softmax_reciprocal_of_total", "micro_softmax", """
        top = max(l.data for l in logits)
        exps = [(l + (-top)).exp() for l in logits]
        inverse = vsum(exps) ** -1
        return [e * inverse for e in exps]
    """, "exp of shifted values, multiplied by the total's reciprocal"),
    variant("softmax_max_as_a_value", "micro_softmax", """
        largest = max(logits, key=lambda v: v.data)
        exps = [(v - largest).exp() for v in logits]
        total = exps[0]
        for e in exps[1:]:
            total = total + e
        return [e / total for e in exps]
    """, "the max kept in the graph, the total as a chain of +"),
    variant("softmax_builtin_sum", "micro_softmax", """
        max_val = max(val.data for val in logits)
        exps = [(val - max_val).exp() for val in logits]
        total = sum(exps)
        return [e / total for e in exps]
    """, "Python's sum over the exponentials (0 + Value through __radd__)"),
]
