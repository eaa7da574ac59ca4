"""Task merge_heads: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch04_attention.merge_heads import head_features, inverse_of_split
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("merge_heads_no_transpose", "merge_heads", patch("""
        - return x.transpose(1, 2).reshape(B, T, self.n_heads * self.d_head)
        + return x.reshape(B, T, self.n_heads * self.d_head)
    """), (head_features, inverse_of_split), "transpose",
       "merge without transposing h and T back"),
    mutant("merge_heads_interleaved", "merge_heads", patch("""
        - return x.transpose(1, 2).reshape(B, T, self.n_heads * self.d_head)
        + return x.permute(0, 2, 3, 1).reshape(B, T, self.n_heads * self.d_head)
    """), head_features, "interleaved", "heads' features interleaved"),
]

VARIANTS = [
    variant("merge_heads_contiguous_view", "merge_heads", """
        B, h, T, dh = x.shape
        return x.permute(0, 2, 1, 3).contiguous().view(B, T, h * dh)
    """, "permute + contiguous + view"),
    variant("merge_heads_cat_unbind", "merge_heads", """
        return torch.cat(x.unbind(dim=1), dim=-1)
    """, "the heads concatenated along the features"),
    variant("merge_heads_view_minus_one", "merge_heads", """
        batches = x.size(0)
        return x.transpose(1, 2).contiguous().view(batches, -1, self.n_heads * self.d_head)
    """, "transpose, contiguous, view(B, -1, h · d_h)"),
]
