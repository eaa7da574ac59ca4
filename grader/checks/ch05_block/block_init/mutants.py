"""Task block_init: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch05_block.block_init import parameter_ledger
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("block_shared_layer_norm", "block_init", patch("""
        - self.ln_feedforward = LayerNorm(cfg.d_model)
        + self.ln_feedforward = self.ln_attention
    """), parameter_ledger, "one object used twice", "the two LayerNorms are one object"),
    mutant("block_init_other_names", "block_init", """
        self.ln_1 = LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = LayerNorm(cfg.d_model)
        self.mlp = FeedForward(cfg)
    """, parameter_ledger, "names are part of the contract",
       "the parts named ln_1, attn, ln_2, mlp"),
]

VARIANTS = [
    variant("block_init_extra_attributes", "block_init", """
        self.d_model = cfg.d_model
        self.ln_attention = LayerNorm(cfg.d_model)
        self.attention = CausalSelfAttention(cfg)
        self.ln_feedforward = LayerNorm(cfg.d_model)
        self.feedforward = FeedForward(cfg)
        self.branch_names = ("attention", "feedforward")
    """, "extra plain attributes on the block"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'One LayerNorm object used for both branches': ('block_shared_layer_norm',),
}
