"""Task micro_value_mul: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch00_micro.micro_value_mul import value_and_gradients
from grader.mutants import mutant

MUTANTS = [
    mutant("mul_missing_term", "micro_value_mul", """
        return Value(self.data * other.data, (self,), (other.data,))
    """, value_and_gradients, "missing", "a * b forgets the other factor's term"),
    mutant("mul_local_gradients_swapped", "micro_value_mul", """
        return Value(self.data * other.data, (self, other), (self.data, other.data))
    """, value_and_gradients, "swapped", "d(ab)/da = a instead of b"),
    mutant("mul_operation_label", "micro_value_mul", """
        return Value(self.data * other.data, (self, other), "*")
    """, value_and_gradients, "label", "an operation label where the local gradients go"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'a multiplication whose two local derivatives are swapped': ('mul_local_gradients_swapped',),
    'An operation label': ('mul_operation_label',),
}
