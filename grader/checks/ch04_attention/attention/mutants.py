"""Task attention: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch04_attention.attention import (
    cache_consistent, cache_one_token_at_a_time, causal_invariance, causal_softmax_weights, float64_precision,
    formula, formula_with_cache, shapes,
)
from grader.checks.ch04_attention.attention.hidden import matches_reference, matches_reference_with_cache
from grader.mutants import mutant, patch, variant


def _forward(scores="scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)",
             mask="scores = scores.masked_fill(torch.ones(T, total, dtype=torch.bool).triu(total - T + 1), float('-inf'))",
             softmax="weights = torch.softmax(scores, dim=-1)"):
    """A correct forward for the variants, with one part written another way (each part at 8 spaces)."""
    return (
        "        q = self.split_heads(self.q_proj(x))\n"
        "        k = self.split_heads(self.k_proj(x))\n"
        "        v = self.split_heads(self.v_proj(x))\n"
        "        if past_key_value is not None:\n"
        "            past_k, past_v = past_key_value\n"
        "            k = torch.cat([past_k, k], dim=2)\n"
        "            v = torch.cat([past_v, v], dim=2)\n"
        "        T, total = q.shape[2], k.shape[2]\n"
        f"        {scores}\n"
        f"        {mask}\n"
        f"        {softmax}\n"
        "        self.last_attention = weights\n"
        "        present = (k, v) if use_cache else None\n"
        "        return self.o_proj(self.merge_heads(weights @ v)), present\n"
    )


FORMULA = (formula, matches_reference)


WEIGHTS = (causal_softmax_weights,) + FORMULA


CACHE = (cache_consistent, cache_one_token_at_a_time,
         formula_with_cache, matches_reference_with_cache)

MUTANTS = [
    mutant("attention_softmax_in_float32", "attention", patch("""
        - weights = scores.exp()
        - weights = weights / weights.sum(dim=-1, keepdim=True)
        + weights = scores.float().exp()
        + weights = (weights / weights.sum(dim=-1, keepdim=True)).to(scores.dtype)
    """), float64_precision, "float32",
       "the softmax taken in float32 and cast back, as a transformer library does by default"),
    mutant("attention_no_causal_mask", "attention", patch("""
        - scores = scores.masked_fill(key_pos > query_pos, float("-inf"))
    """), WEIGHTS + (causal_invariance,), "no causal mask", "no causal mask"),
    mutant("attention_mask_hides_diagonal", "attention", patch("""
        - scores = scores.masked_fill(key_pos > query_pos, float("-inf"))
        + scores = scores.masked_fill(key_pos >= query_pos, float("-inf"))
    """), WEIGHTS, "diagonal", "the mask also hides the diagonal"),
    mutant("attention_mask_hides_diagonal_additive", "attention", patch("""
        - scores = scores.masked_fill(key_pos > query_pos, float("-inf"))
        + scores = scores - 1e9 * (key_pos >= query_pos).to(scores.dtype)
    """), WEIGHTS, "diagonal", "additive mask that also hides the diagonal"),
    mutant("attention_mask_lets_next_token_through", "attention", patch("""
        - scores = scores.masked_fill(key_pos > query_pos, float("-inf"))
        + scores = scores.masked_fill(key_pos > query_pos + 1, float("-inf"))
    """), WEIGHTS + (causal_invariance,), "next token", "triu offset 2"),
    mutant("attention_softmax_over_queries", "attention", patch("""
        - scores = scores - scores.amax(dim=-1, keepdim=True)
        + scores = scores - scores.amax(dim=-2, keepdim=True)
        - weights = weights / weights.sum(dim=-1, keepdim=True)
        + weights = weights / weights.sum(dim=-2, keepdim=True)
    """), WEIGHTS, "dim -2", "softmax over dim −2"),
    mutant("attention_keeps_scores", "attention", patch("""
          scores = scores.masked_fill(key_pos > query_pos, float("-inf"))
        + self.last_attention = scores
        - self.last_attention = weights
    """), causal_softmax_weights, "scores", "last_attention holds the scores"),
    mutant("attention_scale_one_over_d", "attention", patch("""
        - scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        + scores = q @ k.transpose(-2, -1) / (self.n_heads * self.d_head)
    """), FORMULA, "model width", "scaled by 1/d"),
    mutant("attention_scale_one_over_d_head", "attention", patch("""
        - scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        + scores = q @ k.transpose(-2, -1) / self.d_head
    """), FORMULA, "d_h itself", "scaled by 1/d_h"),
    mutant("attention_no_scale", "attention", patch("""
        - scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        + scores = q @ k.transpose(-2, -1)
    """), FORMULA, "not scaled", "no scaling"),
    mutant("attention_scale_sqrt_d", "attention", patch("""
        - scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        + scores = q @ k.transpose(-2, -1) / math.sqrt(self.n_heads * self.d_head)
    """), FORMULA, "sqrt(d)", "scaled by 1/sqrt(d)"),
    mutant("attention_cache_wrong_axis", "attention", patch("""
        - k = torch.cat([past_k, k], dim=2)
        - v = torch.cat([past_v, v], dim=2)
        + k = torch.cat([past_k, k], dim=1)
        + v = torch.cat([past_v, v], dim=1)
    """), CACHE, "time axis", "cache concatenated along the heads axis"),
    mutant("attention_cache_on_feature_axis", "attention", patch("""
        - k = torch.cat([past_k, k], dim=2)
        - v = torch.cat([past_v, v], dim=2)
        + k = torch.cat([past_k, k], dim=-1)
        + v = torch.cat([past_v, v], dim=-1)
    """), CACHE, "time axis", "cache concatenated along the feature axis"),
    mutant("attention_cache_ignored", "attention", patch("""
        - if past_key_value is not None:
        -     past_k, past_v = past_key_value
        -     k = torch.cat([past_k, k], dim=2)
        -     v = torch.cat([past_v, v], dim=2)
    """), CACHE, "ignored",
       "past_key_value ignored"),
    mutant("attention_present_without_new_tokens", "attention", patch("""
        - present = (k, v) if use_cache else None
        + present = (past_key_value if past_key_value is not None else (k, v)) if use_cache else None
    """), CACHE, "new tokens", "present returned without this call's tokens"),
    mutant("attention_present_without_cached_tokens", "attention", patch("""
        + new_k, new_v = k, v
          if past_key_value is not None:
        - present = (k, v) if use_cache else None
        + present = (new_k, new_v) if use_cache else None
    """), CACHE, "cached ones", "present holds only the new tokens"),
    mutant("attention_mask_not_shifted", "attention", patch("""
        - query_pos = torch.arange(past, total, device=x.device).unsqueeze(1)
        + query_pos = torch.arange(T, device=x.device).unsqueeze(1)
    """), CACHE, "not shifted", "mask not offset by the cache length"),
    mutant("attention_cache_after_new_tokens", "attention", patch("""
        - k = torch.cat([past_k, k], dim=2)
        - v = torch.cat([past_v, v], dim=2)
        + k = torch.cat([k, past_k], dim=2)
        + v = torch.cat([v, past_v], dim=2)
    """), CACHE, "placed after the new ones", "cached keys joined after the new ones"),
    mutant("attention_cache_keys_values_mixed", "attention", patch("""
        - k = torch.cat([past_k, k], dim=2)
        - v = torch.cat([past_v, v], dim=2)
        + k = torch.cat([past_v, k], dim=2)
        + v = torch.cat([past_k, v], dim=2)
    """), CACHE, "mixed up", "cached values joined to the new keys"),
    mutant("attention_weights_mix_keys", "attention", patch("""
        - out = self.merge_heads(self.attn_dropout(weights) @ v)
        + out = self.merge_heads(self.attn_dropout(weights) @ k)
    """), FORMULA + CACHE[2:], "mixes the keys, not the values", "the weights applied to the keys instead of the values"),
    mutant("attention_keys_from_query_projection", "attention", patch("""
        - k = self.split_heads(self.k_proj(x))
        + k = self.split_heads(self.q_proj(x))
    """), FORMULA + CACHE[2:], "queries with themselves",
       "the new keys projected with q_proj, so the scores compare the queries with themselves"),
    mutant("attention_cache_keys_new_first", "attention", patch("""
        - k = torch.cat([past_k, k], dim=2)
        + k = torch.cat([k, past_k], dim=2)
    """), CACHE, "cached keys come after the new ones", "only the keys' cache joined new-first"),
    mutant("attention_cache_new_first_negative_axis", "attention", patch("""
        - past_k, past_v = past_key_value
        - k = torch.cat([past_k, k], dim=2)
        - v = torch.cat([past_v, v], dim=2)
        + k = torch.cat((k, past_key_value[0]), dim=-2)
        + v = torch.cat((v, past_key_value[1]), dim=-2)
    """), CACHE, "order is reversed", "the cache joined new-first along dim -2"),
    mutant("attention_no_output_projection", "attention", patch("""
        - return self.o_proj(out), present
        + return out, present
    """), FORMULA, "o_proj", "the output projection left out"),
    mutant("attention_uses_sdpa", "attention", """
        q = self.split_heads(self.q_proj(x))
        k = self.split_heads(self.k_proj(x))
        v = self.split_heads(self.v_proj(x))
        if past_key_value is not None:
            k = torch.cat([past_key_value[0], k], dim=2)
            v = torch.cat([past_key_value[1], v], dim=2)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=past_key_value is None)
        return self.o_proj(self.merge_heads(out)), ((k, v) if use_cache else None)
    """, shapes, "scaled_dot_product_attention", "the library attention"),
    mutant("attention_ao_module", "attention", """
        q = self.split_heads(self.q_proj(x))
        k = self.split_heads(self.k_proj(x))
        v = self.split_heads(self.v_proj(x))
        if past_key_value is not None:
            k = torch.cat([past_key_value[0], k], dim=2)
            v = torch.cat([past_key_value[1], v], dim=2)
        d, T, total = x.shape[-1], x.shape[1], k.shape[2]
        layer = torch.ao.nn.quantizable.MultiheadAttention(d, self.n_heads, bias=False, dtype=x.dtype)
        with torch.no_grad():
            layer.linear_Q.weight.copy_(self.q_proj.weight)
            layer.linear_K.weight.copy_(torch.eye(d, dtype=x.dtype))
            layer.linear_V.weight.copy_(torch.eye(d, dtype=x.dtype))
            layer.out_proj.weight.copy_(self.o_proj.weight)
        future = torch.ones(T, total, dtype=torch.bool).tril(total - T).logical_not()
        time_first = lambda t: t.transpose(0, 1)
        out, weights = layer(time_first(x), time_first(self.merge_heads(k)), time_first(self.merge_heads(v)),
                             attn_mask=future, need_weights=True, average_attn_weights=False)
        self.last_attention = weights
        return time_first(out), ((k, v) if use_cache else None)
    """, formula, "torch.ao.nn.quantizable", "torch.ao's attention module does the work"),
    mutant("attention_square_causal_mask", "attention", _forward(
        mask="scores = scores.masked_fill(torch.tril(torch.ones(T, T)) == 0, float('-inf'))"),
        CACHE, "T × T", "a T × T lower triangle, as attention without a cache slices it: no room for the cached keys"),
]

VARIANTS = [
    variant("attention_einsum", "attention", _forward(
        scores="scores = torch.einsum('bhtd,bhsd->bhts', q, k) / math.sqrt(self.d_head)"),
        "einsum for the scores"),
    variant("attention_additive_mask", "attention", _forward(
        mask="scores = scores + torch.full((T, total), -1e9, dtype=scores.dtype).triu(total - T + 1)"),
        "an additive large-negative mask"),
    variant("attention_tril_indexing", "attention", _forward(
        mask="scores[..., ~torch.tril(torch.ones(T, total, dtype=torch.bool), diagonal=total - T)] = float('-inf')"),
        "torch.tril and boolean indexing"),
    variant("attention_manual_softmax", "attention", _forward(
        softmax="weights = (scores - scores.amax(-1, keepdim=True)).exp(); weights = weights / weights.sum(-1, keepdim=True)"),
        "softmax written out with exp and sum"),
    variant("attention_functional_softmax_matmul_scale_q", "attention", _forward(
        scores="scores = (q / self.d_head ** 0.5) @ k.transpose(2, 3)",
        softmax="weights = torch.nn.functional.softmax(scores, dim=3)"),
        "q scaled before the product, F.softmax with a positive axis"),
    variant("attention_loop_over_heads", "attention", """
        q = self.split_heads(self.q_proj(x))
        k = self.split_heads(self.k_proj(x))
        v = self.split_heads(self.v_proj(x))
        if past_key_value is not None:
            k = torch.cat((past_key_value[0], k), dim=-2)
            v = torch.cat((past_key_value[1], v), dim=-2)
        T, total = x.shape[1], k.shape[2]
        allowed = torch.tril(torch.ones(T, total, dtype=torch.bool), diagonal=total - T)
        heads, all_weights = [], []
        for i in range(self.n_heads):
            s = q[:, i] @ k[:, i].transpose(1, 2) / math.sqrt(self.d_head)
            s = torch.where(allowed, s, torch.tensor(float("-inf"), dtype=s.dtype))
            w = torch.softmax(s, dim=-1)
            all_weights.append(w)
            heads.append(w @ v[:, i])
        self.last_attention = torch.stack(all_weights, dim=1)
        out = self.o_proj(torch.cat(heads, dim=-1))
        return out, (k, v) if use_cache else None
    """, "a Python loop over heads"),
    variant("attention_fused_qkv", "attention", """
        d = self.n_heads * self.d_head
        fused = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight], dim=0)
        q, k, v = (self.split_heads(part) for part in (x @ fused.T).split(d, dim=-1))
        present_k, present_v = k, v
        if past_key_value is not None:
            present_k = torch.cat([past_key_value[0], k], dim=2)
            present_v = torch.cat([past_key_value[1], v], dim=2)
        past = present_k.shape[2] - q.shape[2]
        rows = torch.arange(q.shape[2]).view(-1, 1) + past
        cols = torch.arange(present_k.shape[2]).view(1, -1)
        scores = (q @ present_k.transpose(-1, -2)) * self.d_head ** -0.5
        scores = scores.masked_fill(cols > rows, -float("inf"))
        self.last_attention = scores.softmax(dim=-1)
        out = self.merge_heads(self.attn_dropout(self.last_attention) @ present_v)
        return self.o_proj(out), ((present_k, present_v) if use_cache else None)
    """, "one fused QKV product from the three weights, split afterwards"),
    variant("attention_shifted_triangle_in_place", "attention", _forward(
        scores="scores = q @ k.transpose(2, 3)",
        mask="scores.masked_fill_(torch.triu(torch.ones(total, total), diagonal=1).bool()[total - T:total, :total], -torch.inf)",
        softmax="weights = torch.softmax(scores / k.shape[-1] ** 0.5, dim=-1)"),
        "the rows of a full upper triangle at the cache offset, masked in place, scaled inside the softmax"),
    variant("attention_large_negative_fill", "attention", _forward(
        scores="scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))",
        mask="scores = scores.masked_fill(torch.tril(torch.ones(T, total), diagonal=total - T) == 0, -1e9)",
        softmax="weights = scores.softmax(dim=-1)"),
        "masked_fill with -1e9 where a lower triangle is 0, d_k read from the queries"),
    variant("attention_where_finfo_min", "attention", _forward(
        mask="scores = torch.where(torch.ones(T, total, dtype=torch.bool).tril(total - T), scores, "
             "torch.tensor(torch.finfo(scores.dtype).min, dtype=scores.dtype))"),
        "torch.where with the dtype's most negative number"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'Scaling by d,': ('attention_scale_one_over_d',),
    'by d_h,': ('attention_scale_one_over_d_head',),
    'by √d instead of √d_h': ('attention_scale_sqrt_d',),
    'not scaling': ('attention_no_scale',),
    'No mask': ('attention_no_causal_mask',),
    'a mask that also hides the diagonal': ('attention_mask_hides_diagonal', 'attention_mask_hides_diagonal_additive',),
    'a mask off by one that lets the next token through': ('attention_mask_lets_next_token_through',),
    'Softmax over dim −2': ('attention_softmax_over_queries',),
    'a mask not shifted by T_past': ('attention_mask_not_shifted',),
    'the cache joined along the wrong axis': ('attention_cache_wrong_axis', 'attention_cache_on_feature_axis',),
    '`present` holding only the new tokens': ('attention_present_without_cached_tokens',),
    'A mask sliced `[:T, :T]`': ('attention_square_causal_mask',),
}
