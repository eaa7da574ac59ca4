"""Task gelu: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch05_block.gelu import exact_values, float64_precision
from grader.mutants import mutant, variant

MUTANTS = [
    mutant("gelu_in_float32", "gelu",
           "return (0.5 * x.float() * (1.0 + torch.erf(x.float() / math.sqrt(2.0)))).to(x.dtype)\n",
           float64_precision, "float32", "GELU computed in float32 and cast back"),
    mutant("gelu_tanh", "gelu", """
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    """, exact_values, "tanh", "tanh-approximate GELU"),
    mutant("gelu_relu", "gelu", """
        return torch.clamp(x, min=0.0)
    """, exact_values, "relu", "ReLU instead of GELU"),
    mutant("gelu_sigmoid", "gelu", """
        return x * torch.sigmoid(1.702 * x)
    """, exact_values, "sigmoid", "sigmoid approximation"),
    mutant("gelu_library", "gelu", """
        return torch.nn.functional.gelu(x)
    """, exact_values, "torch.nn.functional.gelu", "the library GELU"),
    mutant("gelu_tanh_pow", "gelu", """
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
        return 0.5 * x * (1.0 + torch.tanh(inner))
    """, exact_values, "tanh", "the tanh GELU written with torch.pow, as GPT-2 ports write it"),
    mutant("gelu_module", "gelu", """
        return torch.nn.GELU()(x)
    """, exact_values, "torch.nn.GELU", "torch's GELU module"),
    mutant("gelu_rounded_constant", "gelu", """
        return 0.5 * x * (1.0 + torch.erf(x * 0.7071068))
    """, exact_values, "ran in float64", "1/√2 rounded to seven digits, computed in float64"),
    mutant("gelu_float32_constant", "gelu", """
        return 0.5 * x * (1.0 + torch.erf(x * torch.tensor(0.7071067811865476)))
    """, float64_precision, "torch.tensor(...) without a dtype",
       "1/√2 made a tensor without a dtype: float32, however many digits it was written with"),
    mutant("gelu_constant_offset", "gelu", """
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0))) + 1e-6
    """, exact_values, "one constant added", "a stray eps added to the output"),
]

VARIANTS = [
    variant("gelu_erfc", "gelu", """
        return 0.5 * x * torch.erfc(-x / math.sqrt(2.0))
    """, "the erfc form Φ(x) = ½ erfc(−x/√2)"),
    variant("gelu_normal_cdf", "gelu", """
        return x * torch.special.ndtr(x)
    """, "torch.special.ndtr as Φ"),
    variant("gelu_normal_distribution_cdf", "gelu", """
        return x * torch.distributions.Normal(0.0, 1.0).cdf(x)
    """, "Φ from torch.distributions.Normal(0, 1).cdf"),
    variant("gelu_erf_times_inverse_root", "gelu", """
        return x * 0.5 * (1.0 + torch.erf(x * (1.0 / math.sqrt(2.0))))
    """, "x · ½ · (1 + erf(x · 1/√2))"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'The tanh GELU': ('gelu_tanh',),
    'calling `torch.nn.functional.gelu`, `nn.LayerNorm` or\n  `F.layer_norm`': ('gelu_library',),
}
