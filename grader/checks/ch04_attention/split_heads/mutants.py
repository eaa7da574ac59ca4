"""Task split_heads: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch04_attention.split_heads import head_features, shape
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("split_heads_axes_mixed_up", "split_heads", patch("""
        - return x.view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        + return x.view(B, self.n_heads, T, self.d_head)
    """), head_features, "mixed up", "view(B, h, T, d_h) without the transpose"),
    mutant("split_heads_strided", "split_heads", patch("""
        - return x.view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        + return x.view(B, T, self.d_head, self.n_heads).permute(0, 3, 1, 2)
    """), head_features, "contiguous", "head i takes every h-th feature"),
    mutant("split_heads_no_transpose", "split_heads", patch("""
        - return x.view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        + return x.view(B, T, self.n_heads, self.d_head)
    """), shape, "heads axis comes second", "[B, T, h, d_h] returned"),
]

VARIANTS = [
    variant("split_heads_reshape_permute", "split_heads", """
        batch, time, width = x.shape
        return x.reshape(batch, time, self.n_heads, width // self.n_heads).permute(0, 2, 1, 3)
    """, "reshape + permute"),
    variant("split_heads_stack_chunks", "split_heads", """
        return torch.stack(x.split(self.d_head, dim=-1), dim=1)
    """, "one chunk of d_h features per head, stacked"),
    variant("split_heads_view_minus_one", "split_heads", """
        batches = x.size(0)
        return x.view(batches, -1, self.n_heads, self.d_head).transpose(1, 2)
    """, "view(B, -1, h, d_h), the time axis inferred"),
]
