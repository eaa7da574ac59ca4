"""Task embedding: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch02_embedding.embedding import bad_id_named, bad_ids, float64_precision, gradient, lookup
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("embedding_through_float32", "embedding", patch("""
        - return self.weight[idx.long()]
        + return self.weight.float()[idx.long()].to(self.weight.dtype)
    """), float64_precision, "float32", "the weight cast to float32 on the way"),
    mutant("embedding_no_checks", "embedding", """
        return self.weight[idx]
    """, bad_ids, "IndexError", "no range or dtype check: torch's IndexError"),
    mutant("embedding_upper_bound_only", "embedding", patch("""
        - if idx.numel() and (idx.min() < 0 or idx.max() >= vocab_size):
        + if idx.numel() and idx.max() >= vocab_size:
    """), bad_ids, "negative", "negative ids read rows from the end"),
    mutant("embedding_float_truncated", "embedding", patch("""
        - if idx.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        -     raise ValueError(f"token ids must be an integer tensor, got dtype {idx.dtype}")
    """), bad_ids, "integers", "float ids silently truncated"),
    mutant("embedding_first_id_only", "embedding", patch("""
        - if idx.numel() and (idx.min() < 0 or idx.max() >= vocab_size):
        -     bad = idx[(idx < 0) | (idx >= vocab_size)][0].item()
        + bad = idx.reshape(-1)[0].item()
        + if not 0 <= bad < vocab_size:
    """), bad_ids, "IndexError", "only the first id is range-checked"),
    mutant("embedding_message_without_id", "embedding", patch("""
        - raise ValueError(f"token id {bad} is outside the vocabulary [0, {vocab_size})")
        + raise ValueError("a token id is outside the vocabulary")
    """), bad_id_named, "name the bad id", "ValueError that does not name the id"),
    mutant("embedding_detached", "embedding", patch("""
        - return self.weight[idx.long()]
        + return self.weight.data[idx.long()]
    """), gradient, "no gradient", "lookup through .data: no gradient"),
    mutant("embedding_library_call", "embedding", """
        V = self.weight.shape[0]
        if idx.is_floating_point():
            raise ValueError(f"token ids must be integers, got {idx.dtype}")
        if (idx < 0).any() or (idx >= V).any():
            raise ValueError(f"token id {idx[(idx < 0) | (idx >= V)][0].item()} is outside [0, {V})")
        return torch.nn.functional.embedding(idx, self.weight)
    """, lookup, "torch.nn.functional.embedding", "the library lookup the task asks to write"),
    mutant("embedding_row_off_by_one", "embedding", patch("""
        - return self.weight[idx.long()]
        + return self.weight[idx.long() - 1]
    """), lookup, "off by one", "row id − 1 read for id"),
    mutant("embedding_one_hot", "embedding", patch("""
        - return self.weight[idx.long()]
        + return (idx.long().unsqueeze(-1) == torch.arange(self.weight.shape[0])).to(self.weight.dtype)
    """), lookup, "one-hot", "one-hot vectors returned instead of rows"),
    mutant("embedding_asserts_range", "embedding", """
        assert not idx.is_floating_point(), "token ids must be integers"
        assert idx.min() >= 0 and idx.max() < self.weight.shape[0], "token id out of range"
        return self.weight[idx.long()]
    """, bad_ids, "assert", "the ids checked with assert statements"),
    mutant("embedding_module_from_table", "embedding", """
        if idx.is_floating_point():
            raise ValueError(f"token ids must be integers, got {idx.dtype}")
        V = self.weight.shape[0]
        if idx.numel() and (idx.min() < 0 or idx.max() >= V):
            raise ValueError(f"token id {idx[(idx < 0) | (idx >= V)][0].item()} is outside [0, {V})")
        return torch.nn.Embedding.from_pretrained(self.weight, freeze=False)(idx)
    """, lookup, "torch.nn.Embedding", "an nn.Embedding made from the table"),
    mutant("embedding_scaled_by_sqrt_d", "embedding", patch("""
        - return self.weight[idx.long()]
        + return self.weight[idx.long()] * math.sqrt(self.weight.shape[1])
    """), lookup, "sqrt(d)", "rows multiplied by sqrt(d), as the original Transformer's embedding"),
]

VARIANTS = [
    variant("embedding_index_select", "embedding", """
        if idx.is_floating_point() or idx.is_complex() or idx.dtype == torch.bool:
            raise ValueError(f"token ids must be integers, not {idx.dtype}")
        V = self.weight.size(0)
        bad = (idx < 0) | (idx >= V)
        if bad.any():
            raise ValueError(f"token id {int(idx[bad][0])} is not in [0, {V})")
        return self.weight.index_select(0, idx.reshape(-1).long()).reshape(*idx.shape, -1)
    """, "index_select on the flattened ids, then reshape"),
    variant("embedding_one_hot_matmul", "embedding", """
        class TokenIdError(ValueError):
            pass
        if torch.is_floating_point(idx):
            raise TokenIdError("token ids must be integers, got " + str(idx.dtype))
        V = self.weight.shape[0]
        for i in idx.flatten().tolist():
            if i < 0 or i >= V:
                raise TokenIdError(f"bad token id {i}: the vocabulary has ids 0..{V - 1}")
        return torch.nn.functional.one_hot(idx.long(), V).to(self.weight.dtype) @ self.weight
    """, "one-hot rows times the weight; a ValueError subclass; a Python loop over the ids"),
    variant("embedding_gather", "embedding", """
        if idx.dtype not in (torch.long, torch.int, torch.short, torch.int8, torch.uint8):
            raise ValueError(f"ids must be an integer tensor (got {idx.dtype})")
        V, d = self.weight.shape
        if idx.numel() and not (0 <= int(idx.min()) and int(idx.max()) < V):
            raise ValueError(f"token id {int(idx.min()) if int(idx.min()) < 0 else int(idx.max())} out of range 0..{V - 1}")
        flat = idx.reshape(-1, 1).long().expand(-1, d)
        return torch.gather(self.weight, 0, flat).view(*idx.shape, d)
    """, "torch.gather along the rows"),
    variant("embedding_plain_indexing_any_integer", "embedding", """
        if torch.is_floating_point(idx) or torch.is_complex(idx) or idx.dtype == torch.bool:
            raise ValueError(f"token ids must be integers, got {idx.dtype}")
        outside = (idx < 0) | (idx >= self.weight.size(0))
        if outside.any():
            raise ValueError(f"token id {idx[outside].flatten()[0].item()} is outside the vocabulary")
        return self.weight[idx]
    """, "plain indexing with the ids as given (int32 too), the bad ids found with one mask"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'Reading row `id + 1` or `id − 1`': ('embedding_row_off_by_one',),
    'Returning one-hot vectors instead of the weight rows': ('embedding_one_hot',),
    'Checking only the upper bound': ('embedding_upper_bound_only',),
    'Looking the rows up in a detached copy': ('embedding_detached',),
    'Raising the error only for the first row of the batch': ('embedding_first_id_only',),
    'Checking the ids with `assert`': ('embedding_asserts_range',),
    'Multiplying the rows by √d': ('embedding_scaled_by_sqrt_d',),
}
