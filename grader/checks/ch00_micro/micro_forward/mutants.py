"""Task micro_forward: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch00_micro.micro_forward import ana_walk_through, formula, pure_python
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("forward_final_norm", "micro_forward", patch("""
        - return linear(x, self.state["lm_head"])
        + return linear(rmsnorm(x), self.state["lm_head"])
    """), formula, "final norm", "a final norm before the LM head"),
    mutant("forward_no_position_row", "micro_forward", patch("""
        - x = [t + p for t, p in zip(self.state["wte"][token_id], self.state["wpe"][pos])]
        + x = list(self.state["wte"][token_id])
    """), formula, "position row", "WPE[pos] not added"),
    mutant("forward_embedding_not_normalised", "micro_forward", patch("""
        - x = rmsnorm(x)
    """), formula, "not normalised", "no RMSNorm of the embedding sum"),
    mutant("forward_returns_features", "micro_forward", patch("""
        - return linear(x, self.state["lm_head"])
        + return x
    """), (ana_walk_through, formula), "LM head",
       "E features returned instead of V logits"),
    mutant("forward_first_layer_only", "micro_forward", patch("""
        - for layer in range(self.n_layer):
        -     x = self.block(layer, x)
        + x = self.block(0, x)
    """), formula, "every layer", "only layer 0 runs"),
    mutant("forward_imports_numpy", "micro_forward", patch("""
        + import numpy as np
          x = [t + p for t, p in zip(self.state["wte"][token_id], self.state["wpe"][pos])]
        - return linear(x, self.state["lm_head"])
        + head = np.array([[p.data for p in row] for row in self.state["lm_head"]])
        + return linear(x, self.state["lm_head"])[: head.shape[0]]
    """), pure_python, "plain Python", "numpy imported inside forward"),
    mutant("forward_uses_torch", "micro_forward", """
        import torch
        x = rmsnorm([t + p for t, p in zip(self.state["wte"][token_id], self.state["wpe"][pos])])
        for layer in range(self.n_layer):
            x = self.block(layer, x)
        logits = torch.tensor([[p.data for p in row] for row in self.state["lm_head"]]) @ torch.tensor(
            [v.data for v in x])
        return [Value(v) for v in logits.tolist()]
    """, formula, "torch.tensor", "torch for the LM head"),
    mutant("forward_head_tied_to_wte", "micro_forward", patch("""
        - return linear(x, self.state["lm_head"])
        + return linear(x, self.state["wte"])
    """), formula, "tied", "the logits read from WTE (a tied head) instead of LMHead"),
]

VARIANTS = [
    variant("forward_index_loop", "micro_forward", """
        wte, wpe = self.state["wte"][token_id], self.state["wpe"][pos]
        x = rmsnorm([wte[i] + wpe[i] for i in range(self.n_embd)])
        for layer in range(self.n_layer):
            x = self.block(layer, x)
        return [dot(row, x) for row in self.state["lm_head"]]
    """, "index loop and explicit dot per vocabulary row"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'Logits of length E instead of V': ('forward_returns_features',),
    'a final norm before the LM head': ('forward_final_norm',),
    'logits read from WTE (a tied head)': ('forward_head_tied_to_wte',),
}
