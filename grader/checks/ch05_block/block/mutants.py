"""Task block: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch05_block.block import causal_invariance, example_1, formula, shape, zero_branch_identity
from grader.checks.ch05_block.block.hidden import matches_reference
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("block_post_ln", "block", """
        attended, present = self.attention(hidden, past_key_value, use_cache)
        hidden = self.ln_attention(hidden + attended)
        hidden = self.ln_feedforward(hidden + self.feedforward(hidden))
        return hidden, present
    """, (example_1, zero_branch_identity, formula, matches_reference),
       "post-LN",
       "post-LN instead of pre-LN"),
    mutant("block_output_renormalised", "block", patch("""
        - return hidden, present
        + return self.ln_feedforward(hidden), present
    """), zero_branch_identity, "re-normalised", "the block's output re-normalised"),
    mutant("block_feedforward_reads_x", "block", """
        attended, present = self.attention(self.ln_attention(hidden), past_key_value, use_cache)
        fed = self.feedforward(self.ln_feedforward(hidden))
        return hidden + attended + fed, present
    """, (formula, matches_reference), "reads X instead of U", "feed-forward branch reads X, not U"),
    mutant("block_increment_broadcast", "block", patch("""
        - hidden = hidden + self.residual_dropout(attended)
        + hidden = hidden + self.residual_dropout(attended[:, -1:, :])
    """), (causal_invariance, matches_reference), "future", "an increment broadcast from [B,1,d]"),
    mutant("block_one_norm_for_both", "block", patch("""
        - fed = self.feedforward(self.ln_feedforward(hidden))
        + fed = self.feedforward(self.ln_attention(hidden))
    """), (formula, matches_reference), "one LayerNorm", "ln_attention used for both branches"),
    mutant("block_feedforward_first", "block", """
        hidden = hidden + self.feedforward(self.ln_feedforward(hidden))
        attended, present = self.attention(self.ln_attention(hidden), past_key_value, use_cache)
        return hidden + attended, present
    """, (formula, matches_reference), "before attention", "feed-forward before attention"),
    mutant("block_branches_reordered_norms_left_in_place", "block", """
        hidden = hidden + self.feedforward(self.ln_attention(hidden))
        attended, present = self.attention(self.ln_feedforward(hidden), past_key_value, use_cache)
        return hidden + attended, present
    """, (formula, matches_reference), "runs first",
       "the two branches' lines swapped, each LayerNorm left where it was"),
    mutant("block_norms_swapped", "block", """
        attended, present = self.attention(self.ln_feedforward(hidden), past_key_value, use_cache)
        hidden = hidden + attended
        return hidden + self.feedforward(self.ln_attention(hidden)), present
    """, (formula, matches_reference), "swapped", "the two LayerNorms swapped"),
    mutant("block_no_residual", "block", patch("""
        - hidden = hidden + self.residual_dropout(attended)
        + hidden = self.residual_dropout(attended)
    """), zero_branch_identity, "residual", "the attention residual dropped"),
    mutant("block_drops_present", "block", patch("""
        - return hidden, present
        + return hidden, None
    """), shape, "present", "present dropped"),
    mutant("block_no_cache_arguments", "block", patch("""
        - attended, present = self.attention(self.ln_attention(hidden), past_key_value, use_cache)
        + attended, present = self.attention(self.ln_attention(hidden))
    """), shape, "cache arguments", "past_key_value and use_cache not passed to the attention"),
    mutant("block_attention_tuple_added", "block", """
        hidden = hidden + self.attention(self.ln_attention(hidden))
        hidden = hidden + self.feedforward(self.ln_feedforward(hidden))
        return hidden
    """, (example_1, formula), "returns a pair",
       "the attention's (out, present) added to the stream as it is, and a bare tensor returned"),
]

VARIANTS = [
    variant("block_with_helper", "block", """
        def branch(norm, layer, value):
            return layer(norm(value))
        attended, present = self.attention(self.ln_attention(hidden), past_key_value, use_cache)
        middle = hidden + attended
        return middle + branch(self.ln_feedforward, self.feedforward, middle), present
    """, "a student's own helper function"),
    variant("block_shortcut_variables", "block", """
        shortcut = hidden
        normed = self.ln_attention(hidden)
        attended, present = self.attention(normed, past_key_value=past_key_value, use_cache=use_cache)
        hidden = attended + shortcut
        shortcut = hidden
        hidden = self.feedforward(self.ln_feedforward(hidden)) + shortcut
        return hidden, present
    """, "a shortcut variable per branch, keyword arguments to the attention"),
    variant("block_sublayer_lambdas", "block", """
        def sublayer(value, norm, layer):
            return value + layer(norm(value))
        kept = {}
        def attend(normed):
            out, kept["present"] = self.attention(normed, past_key_value, use_cache)
            return out
        hidden = sublayer(hidden, self.ln_attention, attend)
        hidden = sublayer(hidden, self.ln_feedforward, lambda normed: self.feedforward(normed))
        return hidden, kept["present"]
    """, "a residual sublayer helper given a norm and a function"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'One LayerNorm object used for both branches': ('block_one_norm_for_both',),
    'Feeding X instead of U to the second branch': ('block_feedforward_reads_x',),
    "normalising the block's output": ('block_output_renormalised',),
    'Dropping `present`': ('block_drops_present',),
    'Adding what the attention returns straight to the stream': ('block_attention_tuple_added',),
    'not passing the cache arguments to the attention': ('block_no_cache_arguments',),
}
