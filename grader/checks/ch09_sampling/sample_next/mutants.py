"""Task sample_next: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch09_sampling.sample_next import (
    follows_softmax, greedy_at_zero_temperature, seeded_draws_repeat, temperature_scaling, top_k_support,
    top_k_ties,
)
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("sample_top_k_threshold_over_rows", "sample_next", patch("""
        -     keep = torch.topk(rows, top_k, dim=-1).indices
        -     masked = torch.full_like(rows, float("-inf"))
        -     rows = masked.scatter(-1, keep, rows.gather(-1, keep))
        +     top_logits = torch.topk(rows, top_k, dim=-1).values
        +     rows = torch.where(rows < top_logits[:, -1], torch.full_like(rows, float("-inf")), rows)
    """), top_k_support, "keep the reduced axis", "a top-k threshold of shape [B] compared "
       "with logits [B, V] (broadcast along the vocabulary, not the rows)"),
    mutant("sample_ignores_temperature", "sample_next", patch("""
        - scaled = (rows - rows.amax(dim=-1, keepdim=True)) / temperature
        + scaled = rows - rows.amax(dim=-1, keepdim=True)
    """), temperature_scaling, "no effect", "temperature ignored"),
    mutant("sample_multiplies_by_temperature", "sample_next", patch("""
        - scaled = (rows - rows.amax(dim=-1, keepdim=True)) / temperature
        + scaled = (rows - rows.amax(dim=-1, keepdim=True)) * temperature
    """), temperature_scaling, "multiplied", "logits times the temperature"),
    mutant("sample_top_k_plus_one", "sample_next", patch("""
        - keep = torch.topk(rows, top_k, dim=-1).indices
        + keep = torch.topk(rows, min(top_k + 1, V), dim=-1).indices
    """), top_k_support, "off by one", "top-k keeps k + 1 ids"),
    mutant("sample_top_k_threshold_keeps_ties", "sample_next", patch("""
        - keep = torch.topk(rows, top_k, dim=-1).indices
        - masked = torch.full_like(rows, float("-inf"))
        - rows = masked.scatter(-1, keep, rows.gather(-1, keep))
        + kth = torch.topk(rows, top_k, dim=-1).values[:, -1:]
        + rows = rows.masked_fill(rows < kth, float("-inf"))
    """), top_k_ties, "threshold", "a >= threshold keeps every tie"),
    mutant("sample_greedy_by_sampling", "sample_next", patch("""
        - if temperature == 0.0:
        -     return rows.argmax(dim=-1).reshape(lead)
        + temperature = temperature or 1.0
    """), greedy_at_zero_temperature, "argmax", "temperature 0 samples instead of argmax"),
    mutant("sample_divides_by_zero", "sample_next", patch("""
        - if temperature == 0.0:
        -     return rows.argmax(dim=-1).reshape(lead)
    """), greedy_at_zero_temperature, "no division", "temperature 0 divides by zero"),
    mutant("sample_global_rng", "sample_next", patch("""
        - return torch.multinomial(probs, 1, generator=generator).reshape(lead)
        + return torch.multinomial(probs, 1).reshape(lead)
    """), seeded_draws_repeat, "generator", "the generator argument ignored"),
    mutant("sample_reseeds_globally", "sample_next", patch("""
        - return torch.multinomial(probs, 1, generator=generator).reshape(lead)
        + torch.manual_seed(0)
        + return torch.multinomial(probs, 1).reshape(lead)
    """), seeded_draws_repeat, "global random state", "torch.manual_seed inside sample_next"),
    mutant("sample_temperature_after_softmax", "sample_next", patch("""
        - scaled = (rows - rows.amax(dim=-1, keepdim=True)) / temperature
        - probs = torch.softmax(scaled, dim=-1)
        + probs = torch.softmax(rows, dim=-1) / temperature
    """), temperature_scaling, "no effect", "temperature applied to the probabilities"),
    mutant("sample_returns_a_column", "sample_next", patch("""
        - return torch.multinomial(probs, 1, generator=generator).reshape(lead)
        + return torch.multinomial(probs, 1, generator=generator)  # [B, 1], as multinomial gives it
    """), top_k_support, "trailing axis", "ids [B, 1] instead of [B]"),
    mutant("sample_int32_ids", "sample_next", patch("""
        - return torch.multinomial(probs, 1, generator=generator).reshape(lead)
        + return torch.multinomial(probs, 1, generator=generator).reshape(lead).int()
    """), follows_softmax, "with that fixed", "drawn ids cast to int32"),
]

VARIANTS = [
    variant("sample_top_k_subset_mapped_back", "sample_next", """
        lead, V = logits.shape[:-1], logits.shape[-1]
        rows = logits.reshape(-1, V).double()
        k = V if top_k is None else min(top_k, V)
        values, indices = torch.topk(rows, k, dim=-1)
        if temperature == 0:
            return indices[:, 0].reshape(lead)
        probs = torch.softmax((values - values[:, :1]) / temperature, dim=-1)
        choice = torch.multinomial(probs, 1, generator=generator)
        return indices.gather(-1, choice).reshape(lead)
    """, "torch.topk, then a draw among the k kept ids, mapped back to vocabulary ids"),
    variant("sample_probabilities_with_masked_fill", "sample_next", """
        V = logits.size(-1)
        flat = logits.reshape(-1, V).to(torch.float64)
        if temperature == 0:
            return flat.argmax(-1).view(logits.shape[:-1])
        flat = flat - flat.max(-1, keepdim=True).values
        if top_k is not None and top_k < V:
            drop = torch.ones_like(flat, dtype=torch.bool)
            drop.scatter_(-1, flat.topk(top_k, -1).indices, False)
            flat = flat.masked_fill(drop, float("-inf"))
        weights = torch.exp(flat / temperature)
        probs = weights / weights.sum(-1, keepdim=True)
        return torch.multinomial(probs, num_samples=1, generator=generator).view(logits.shape[:-1])
    """, "exp and normalise by hand, top-k as a boolean mask"),
    variant("sample_topk_scatter_softmax_stable", "sample_next", """
        lead, V = logits.shape[:-1], logits.shape[-1]
        rows = logits.reshape(-1, V).double()
        if temperature == 0:
            return rows.argmax(dim=-1).reshape(lead)
        if top_k is not None and top_k < V:
            values, indices = torch.topk(rows, top_k, dim=-1)
            rows = torch.full_like(rows, float("-inf")).scatter_(-1, indices, values)
        probs = torch.softmax(rows / temperature, dim=-1)
        return torch.multinomial(probs, 1, generator=generator).reshape(lead)
    """, "torch.topk then scatter_ into -inf, no max subtraction of its own (softmax subtracts it)"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'Applying temperature or top-k after the softmax': ('sample_temperature_after_softmax',),
    '`torch.manual_seed` inside `sample_next`': ('sample_reseeds_globally',),
}
