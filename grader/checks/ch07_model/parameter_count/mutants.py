"""Task parameter_count: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch07_model.parameter_count import published_figures
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("parameter_count_no_final_norm", "parameter_count", patch("""
        - return 2 * V * d + C * d + N * per_block + 2 * d
        + return 2 * V * d + C * d + N * per_block
    """), published_figures, "final LayerNorm", "ledger without the final LayerNorm"),
    mutant("parameter_count_tied_head", "parameter_count", patch("""
        - return 2 * V * d + C * d + N * per_block + 2 * d
        + return V * d + C * d + N * per_block + 2 * d
    """), published_figures, "tied", "ledger with a tied head"),
]

VARIANTS = [
    variant("parameter_count_by_parts", "parameter_count", """
        d = cfg.d_model
        attention = 4 * d * d
        feedforward = d * cfg.d_ff + cfg.d_ff + cfg.d_ff * d + d
        norms = 2 * (2 * d)
        embeddings = cfg.vocab_size * d + cfg.block_size * d
        return embeddings + cfg.n_layers * (attention + feedforward + norms) + 2 * d + cfg.vocab_size * d
    """, "the ledger added up part by part"),
]
