"""Task micro_value_exp: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch00_micro.micro_value_exp import value_and_gradient
from grader.mutants import mutant, variant

MUTANTS = [
    mutant("exp_gradient_uses_input", "micro_value_exp", """
        return Value(math.exp(self.data), (self,), (self.data,))
    """, value_and_gradient, "input", "exp's local gradient is x"),
    mutant("exp_expm1", "micro_value_exp", """
        result = math.expm1(self.data)
        return Value(result, (self,), (result + 1.0,))
    """, value_and_gradient, "expm1", "math.expm1 picked for math.exp"),
]

VARIANTS = [
    variant("value_exp_computed_twice", "micro_value_exp", """
        return Value(math.exp(self.data), (self,), (math.exp(self.data),))
    """, "math.exp called for the value and again for the local gradient"),
]
