"""Task micro_value_add: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch00_micro.micro_value_add import value_and_gradients
from grader.mutants import mutant, variant

MUTANTS = [
    mutant("add_gradient_to_one_side", "micro_value_add", """
        return Value(self.data + other.data, (self, other), (1.0, 0.0))
    """, value_and_gradients, "only one input", "+ passes the gradient to one input only"),
    mutant("add_operation_label", "micro_value_add", """
        return Value(self.data + other.data, (self, other), "+")
    """, value_and_gradients, "label", "an operation label where the local gradients go"),
]

VARIANTS = [
    variant("value_add_lists_and_ints", "micro_value_add", """
        return Value(other.data + self.data, [self, other], [1, 1])
    """, "children and local gradients as lists, integer gradients"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'An operation label': ('add_operation_label',),
}
