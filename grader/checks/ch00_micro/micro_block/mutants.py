"""Task micro_block: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch00_micro.micro_block import formula, zero_branch_identity
from grader.checks.ch00_micro.micro_block.hidden import matches_reference
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("block_no_attention_residual", "micro_block", patch("""
        - x = [a + b for a, b in zip(x, linear(heads, self.table(layer, "wo")))]
        + x = linear(heads, self.table(layer, "wo"))
    """), (zero_branch_identity, formula), "residual",
       "x = WO(heads) without x +"),
    mutant("block_mlp_reads_layer_input", "micro_block", patch("""
        - x = [a + b for a, b in zip(x, linear(heads, self.table(layer, "wo")))]
        + u = [a + b for a, b in zip(x, linear(heads, self.table(layer, "wo")))]
          h = [value.relu() for value in linear(rmsnorm(x), self.table(layer, "fc1"))]
        - return [a + b for a, b in zip(x, linear(h, self.table(layer, "fc2")))]
        + return [a + b for a, b in zip(u, linear(h, self.table(layer, "fc2")))]
    """), formula, "after the attention residual", "the MLP reads the layer input"),
    mutant("block_attends_only_to_itself", "micro_block", patch("""
        - keys, values = self.cache[layer]["keys"], self.cache[layer]["values"]
        - keys.append(k)
        - values.append(v)
        + keys, values = [k], [v]
    """), formula, "cache", "no KV cache: each position sees only itself"),
    mutant("block_output_normalised", "micro_block", patch("""
        - return [a + b for a, b in zip(x, linear(h, self.table(layer, "fc2")))]
        + return rmsnorm([a + b for a, b in zip(x, linear(h, self.table(layer, "fc2")))])
    """), (zero_branch_identity, formula), "normalised",
       "the layer's output re-normalised"),
    mutant("block_keys_values_from_raw_stream", "micro_block", patch("""
        - k = linear(h, self.table(layer, "wk"))
        - v = linear(h, self.table(layer, "wv"))
        + k = linear(x, self.table(layer, "wk"))
        + v = linear(x, self.table(layer, "wv"))
    """), formula, "keys and values are computed from the raw stream",
       "only the queries read RMSNorm(x); keys and values project the raw stream"),
    mutant("block_heads_interleaved", "micro_block", patch("""
        - lo, hi = head * self.head_dim, (head + 1) * self.head_dim
        - out, weights = attention_head(q[lo:hi], [key[lo:hi] for key in keys], [val[lo:hi] for val in values])
        + part = slice(head, None, self.n_head)
        + out, weights = attention_head(q[part], [key[part] for key in keys], [val[part] for val in values])
    """), formula, "interleaved", "head h takes every H-th feature, not a contiguous slice"),
    mutant("block_queries_raw_and_no_mlp_residual", "micro_block", patch("""
        - q = linear(h, self.table(layer, "wq"))
        + q = linear(x, self.table(layer, "wq"))

        - return [a + b for a, b in zip(x, linear(h, self.table(layer, "fc2")))]
        + return linear(h, self.table(layer, "fc2"))
    """), formula, "2 parts of the layer differ",
       "two slips at once: queries from x and the MLP residual dropped"),
    mutant("block_values_through_wk", "micro_block", patch("""
        - v = linear(h, self.table(layer, "wv"))
        + v = linear(h, self.table(layer, "wk"))
    """), formula, "comes after the weights",
       "the values projected with WK: no catalogued layer gives this, the weights localise it"),
    mutant("block_attends_before_appending", "micro_block", patch("""
        - keys.append(k)
        - values.append(v)

        + keys.append(k)
        + values.append(v)
          x = [a + b for a, b in zip(x, linear(heads, self.table(layer, "wo")))]
    """), (formula, matches_reference), "before appending",
       "attends before appending the current key"),
    mutant("block_squared_relu", "micro_block", patch("""
        - h = [value.relu() for value in linear(rmsnorm(x), self.table(layer, "fc1"))]
        + h = [value.relu() ** 2 for value in linear(rmsnorm(x), self.table(layer, "fc1"))]
    """), formula, "squares its relu", "the MLP's ReLU squared, as one version of a well-known scalar GPT has it"),
]

VARIANTS = [
    variant("block_feature_loops", "micro_block", """
        cache = self.cache[layer]
        h = rmsnorm(x)
        cache["keys"].append(linear(h, self.table(layer, "wk")))
        cache["values"].append(linear(h, self.table(layer, "wv")))
        q = linear(h, self.table(layer, "wq"))
        d = self.head_dim
        concat = []
        for head in range(self.n_head):
            part = slice(head * d, head * d + d)
            out, weights = attention_head(q[part], [k[part] for k in cache["keys"]],
                                          [v[part] for v in cache["values"]])
            self.last_attention[layer][head] = [float(w.data) for w in weights]
            concat += out
        attended = linear(concat, self.table(layer, "wo"))
        x = [x[i] + attended[i] for i in range(self.n_embd)]
        hidden = linear(rmsnorm(x), self.table(layer, "fc1"))
        hidden = [z.relu() for z in hidden]
        mlp = linear(hidden, self.table(layer, "fc2"))
        return [x[i] + mlp[i] for i in range(self.n_embd)]
    """, "slices and index loops"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'Attending before appending the current key': ('block_attends_before_appending',),
    'A squared ReLU in the MLP': ('block_squared_relu',),
}
