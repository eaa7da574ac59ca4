"""Task micro_value_log: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch00_micro.micro_value_log import value_and_gradient
from grader.mutants import mutant

MUTANTS = [
    mutant("log_gradient_is_log", "micro_value_log", """
        return Value(math.log(self.data), (self,), (math.log(self.data),))
    """, value_and_gradient, "1/x", "log's local gradient is log x"),
    mutant("log_common_logarithm", "micro_value_log", """
        return Value(math.log10(self.data), (self,), (1.0 / self.data,))
    """, value_and_gradient, "base 10", "log10 where the natural log belongs"),
    mutant("log_with_eps", "micro_value_log", """
        return Value(math.log(self.data + 1e-6), (self,), (1.0 / self.data,))
    """, value_and_gradient, "off by +", "an eps inside the log, as a guard against log 0"),
]
