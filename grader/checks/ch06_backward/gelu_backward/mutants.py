"""Task gelu_backward: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch06_backward.gelu_backward import key_values, matches_autograd
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("gelu_backward_no_x_pdf", "gelu_backward", patch("""
        - return grad_out * (cdf + x * pdf)
        + return grad_out * cdf
    """), (matches_autograd, key_values), "x·φ(x)",
       "GELU derivative without the x·φ(x) term"),
    mutant("gelu_backward_no_chain_rule", "gelu_backward", patch("""
        - return grad_out * (cdf + x * pdf)
        + return cdf + x * pdf
    """), matches_autograd, "chain rule", "local derivative not times grad_out"),
    mutant("gelu_backward_tanh", "gelu_backward", """
        k = math.sqrt(2.0 / math.pi)
        t = torch.tanh(k * (x + 0.044715 * x ** 3))
        return grad_out * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x))
    """, matches_autograd, "tanh", "derivative of the tanh approximation"),
    mutant("gelu_backward_at_the_output", "gelu_backward", patch("""
          cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
        + x = x * cdf  # the point the derivative is taken at: GELU(x), not x
        + cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
    """), matches_autograd, "forward's output", "Φ and φ evaluated at GELU(x)"),
    mutant("gelu_backward_hidden_backward_call", "gelu_backward", """
        x = x.detach().requires_grad_(True)
        with torch.enable_grad():
            y = 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
            getattr(y, "back" + "ward")(grad_out)
        return x.grad
    """, matches_autograd, "by hand",
       ".backward() reached through getattr (the operator recorder sees the graph being built)"),
    mutant("gelu_backward_float32_constants", "gelu_backward", patch("""
        - cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
        - pdf = torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        + x32 = x.float()  # the constants and the arithmetic in float32
        + cdf = 0.5 * (1.0 + torch.erf(x32 / torch.tensor(2.0).sqrt()))
        + pdf = torch.exp(-0.5 * x32 * x32) / torch.tensor(2.0 * math.pi).sqrt()
    """), matches_autograd, "float32 precision", "computed in float32"),
]

VARIANTS = [
    variant("gelu_backward_ndtr", "gelu_backward", """
        density = torch.exp(-x.pow(2) / 2) * (2 * math.pi) ** -0.5
        return grad_out * torch.special.ndtr(x) + grad_out * x * density
    """, "torch.special.ndtr for Φ"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'GELU′ = Φ(x) only, forgetting x·φ(x)': ('gelu_backward_no_x_pdf',),
}
