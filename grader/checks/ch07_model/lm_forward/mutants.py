"""Task lm_forward: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch07_model.lm_forward import (
    cache_matches_full, final_norm_feeds_head, formula, loss, positions_matter, shapes,
)
from grader.checks.ch07_model.lm_forward.hidden import matches_reference
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("lm_forward_tied_head", "lm_forward", patch("""
        - logits = self.head(self.ln_final(hidden))
        + logits = self.ln_final(hidden) @ self.token_embedding.weight.T
    """), (final_norm_feeds_head, formula), "tied",
       "logits from the token embedding's weights (weight tying), as GPT-2's code does"),
    mutant("lm_forward_no_final_norm", "lm_forward", patch("""
        - logits = self.head(self.ln_final(hidden))
        + logits = self.head(hidden)
    """), (final_norm_feeds_head, matches_reference), "final LayerNorm",
       "final LayerNorm not applied"),
    mutant("lm_forward_positions_not_offset", "lm_forward", patch("""
        - hidden = self.embedding_dropout(self.position_embedding(hidden, past_length))
        + hidden = self.embedding_dropout(self.position_embedding(hidden))
    """), cache_matches_full, "offset by the cache length", "positions restart at 0 after the cache"),
    mutant("lm_forward_no_positions", "lm_forward", patch("""
        - hidden = self.embedding_dropout(self.position_embedding(hidden, past_length))
        + hidden = self.embedding_dropout(hidden)
    """), (positions_matter, matches_reference),
       "position embeddings are not added", "no position embedding"),
    mutant("lm_forward_blocks_read_embeddings", "lm_forward", patch("""
        - hidden, present = block(hidden, past, use_cache)
        + out, present = block(hidden, past, use_cache)
        - logits = self.head(self.ln_final(hidden))
        + logits = self.head(self.ln_final(out))
    """), (formula, matches_reference), "last block",
       "every block reads the embeddings"),
    mutant("lm_forward_loss_shifted", "lm_forward", patch("""
        - loss = None if targets is None else cross_entropy(logits, targets)
        + loss = None if targets is None else cross_entropy(logits[:, :-1], targets[:, 1:])
    """), loss, "shifted again", "targets shifted a second time"),
    mutant("lm_forward_logits_to_float32", "lm_forward", patch("""
        - logits = self.head(self.ln_final(hidden))
        + logits = self.head(self.ln_final(hidden)).float()  # float32 for the loss
    """), formula, "float32 precision", "logits switched to float32"),
    mutant("lm_forward_last_position_without_targets", "lm_forward", patch("""
        - logits = self.head(self.ln_final(hidden))
        + normed = self.ln_final(hidden)
        + logits = self.head(normed if targets is not None else normed[:, -1:, :])  # only what generation needs
    """), shapes, "last position", "only the last position's logits without targets"),
]

VARIANTS = [
    variant("lm_forward_zip_presents", "lm_forward", """
        caches = past_key_values if past_key_values is not None else [None] * len(self.blocks)
        offset = 0 if past_key_values is None else past_key_values[0][1].size(-2)
        x = self.embedding_dropout(self.position_embedding(self.token_embedding(idx), past_length=offset))
        new_caches = []
        for block, cache in zip(self.blocks, caches):
            x, present = block(x, past_key_value=cache, use_cache=use_cache)
            new_caches.append(present)
        logits = self.head(self.ln_final(x))
        loss = cross_entropy(logits, targets) if targets is not None else None
        return logits, loss, (new_caches if use_cache else None)
    """, "zip over blocks and caches, keyword arguments"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'applying the head to the un-normalised hidden state': ('lm_forward_no_final_norm',),
    'Positions restarting at 0 on every cached call': ('lm_forward_positions_not_offset',),
    'Logits or the loss switched to float32': ('lm_forward_logits_to_float32',),
}
