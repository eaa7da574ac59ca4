"""Task micro_value_pow: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch00_micro.micro_value_pow import power_rule
from grader.mutants import mutant, variant

MUTANTS = [
    mutant("pow_exponent_not_lowered", "micro_value_pow", """
        return Value(self.data**exponent, (self,), (exponent * self.data**exponent,))
    """, power_rule, "not lowered", "k·x^k instead of k·x^(k−1)"),
    mutant("pow_factor_k_missing", "micro_value_pow", """
        return Value(self.data**exponent, (self,), (self.data ** (exponent - 1),))
    """, power_rule, "factor k", "x^(k−1) without the factor k"),
    mutant("pow_base_and_exponent_swapped", "micro_value_pow", """
        return Value(exponent**self.data, (self,), (exponent * self.data ** (exponent - 1),))
    """, power_rule, "swapped", "k ** x computed for x ** k"),
]

VARIANTS = [
    variant("value_pow_math_pow", "micro_value_pow", """
        value = math.pow(self.data, exponent)
        return Value(value, (self,), (exponent * math.pow(self.data, exponent - 1),))
    """, "math.pow"),
]
