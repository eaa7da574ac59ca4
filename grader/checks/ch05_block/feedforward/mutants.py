"""Task feedforward: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch05_block.feedforward import example_1
from grader.mutants import mutant, variant

MUTANTS = [
    mutant("feedforward_no_nonlinearity", "feedforward", """
        return self.fc2(self.fc1(x))
    """, example_1, "no nonlinearity", "no nonlinearity between the linear layers"),
    mutant("feedforward_relu", "feedforward", """
        return self.fc2(torch.relu(self.fc1(x)))
    """, example_1, "relu", "ReLU in the feed-forward"),
    mutant("feedforward_tanh_gelu", "feedforward", """
        hidden = self.fc1(x)
        hidden = 0.5 * hidden * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (hidden + 0.044715 * hidden ** 3)))
        return self.fc2(hidden)
    """, example_1, "tanh", "the tanh GELU written inline in the feed-forward"),
    mutant("feedforward_gelu_module", "feedforward", """
        return self.fc2(torch.nn.GELU()(self.fc1(x)))
    """, example_1, "torch.nn.GELU", "torch's GELU module in the feed-forward"),
]

VARIANTS = [
    variant("feedforward_explicit_matmul", "feedforward", """
        hidden = x @ self.fc1.weight.T + self.fc1.bias
        return gelu(hidden) @ self.fc2.weight.T + self.fc2.bias
    """, "explicit matrix products with the stored [f, d] weights"),
    variant("feedforward_functional_linear", "feedforward", """
        hidden = torch.nn.functional.linear(x, self.fc1.weight, self.fc1.bias)
        return torch.nn.functional.linear(gelu(hidden), self.fc2.weight, self.fc2.bias)
    """, "F.linear with the layers' weights"),
]
