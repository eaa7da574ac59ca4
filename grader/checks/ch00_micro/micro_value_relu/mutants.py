"""Task micro_value_relu: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch00_micro.micro_value_relu import at_zero, value_and_gradient
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("relu_gradient_for_negative_inputs", "micro_value_relu", """
        return Value(max(0.0, self.data), (self,), (1.0,))
    """, value_and_gradient, "negative", "relu passes the gradient for x < 0"),
    mutant("relu_gradient_one_at_zero", "micro_value_relu", patch("""
        - positive = self.data > 0.0
        + positive = self.data >= 0.0
    """), at_zero, "exactly", "relu'(0) = 1 against the docstring"),
    mutant("relu_leaky", "micro_value_relu", """
        positive = self.data > 0.0
        return Value(self.data if positive else 0.01 * self.data, (self,), (1.0 if positive else 0.0,))
    """, value_and_gradient, "leaky", "negative inputs kept at a hundredth"),
]

VARIANTS = [
    variant("value_relu_float_of_comparison", "micro_value_relu", """
        return Value(max(0.0, self.data), (self,), (float(self.data > 0),))
    """, "max and float(x > 0)"),
    variant("value_relu_boolean_local_gradient", "micro_value_relu", """
        return Value(0.0 if self.data < 0 else self.data, (self,), (self.data > 0,))
    """, "the local gradient as the boolean self.data > 0"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    "relu's derivative 1 at exactly 0": ('relu_gradient_one_at_zero',),
}
