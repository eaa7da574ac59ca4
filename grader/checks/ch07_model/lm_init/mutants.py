"""Task lm_init: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch07_model.lm_init import final_layer_norm, parameter_ledger, separate_blocks, untied_bias_free_head
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("lm_init_one_block_reused", "lm_init", patch("""
        - self.blocks = nn.ModuleList([TransformerBlock(cfg) for _ in range(cfg.n_layers)])
        + block = TransformerBlock(cfg)
        + self.blocks = nn.ModuleList([block] * cfg.n_layers)
    """), (separate_blocks, parameter_ledger), "one block object reused",
       "one block object reused N times"),
    mutant("lm_init_head_bias", "lm_init", patch("""
        - self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        + self.head = nn.Linear(cfg.d_model, cfg.vocab_size)
    """), (untied_bias_free_head, parameter_ledger), "the head has a bias",
       "a bias on the head"),
    mutant("lm_init_tied_head", "lm_init", patch("""
          self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        + self.head.weight = self.token_embedding.weight
    """), (untied_bias_free_head, parameter_ledger), "shared",
       "head tied to the token embedding"),
    mutant("lm_init_no_final_norm", "lm_init", patch("""
        - self.ln_final = LayerNorm(cfg.d_model)
    """), (parameter_ledger, final_layer_norm), "final LayerNorm",
       "no final LayerNorm"),
    mutant("lm_init_blocks_in_a_list", "lm_init", patch("""
        - self.blocks = nn.ModuleList([TransformerBlock(cfg) for _ in range(cfg.n_layers)])
        + self.blocks = [TransformerBlock(cfg) for _ in range(cfg.n_layers)]
    """), (parameter_ledger, separate_blocks), "ModuleList",
       "blocks in a plain Python list"),
]

VARIANTS = [
    variant("lm_init_loop_modulelist", "lm_init", """
        self.token_embedding = TokenEmbedding(cfg.vocab_size, cfg.d_model)
        self.position_embedding = PositionEmbedding(cfg.block_size, cfg.d_model)
        self.embedding_dropout = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList()
        for _ in range(cfg.n_layers):
            self.blocks.append(TransformerBlock(cfg))
        self.ln_final = LayerNorm(cfg.d_model)
        self.head = nn.Linear(in_features=cfg.d_model, out_features=cfg.vocab_size, bias=False)
    """, "ModuleList filled in a loop"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    '`[TransformerBlock(cfg)] * N`': ('lm_init_one_block_reused',),
    '`head.weight = token_embedding.weight` (tied)': ('lm_init_tied_head',),
    'a head with bias': ('lm_init_head_bias',),
    'Forgetting `ln_final`': ('lm_init_no_final_norm',),
}
