"""Task attention_init: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch04_attention.attention_init import projections
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("attention_init_lazy_linear", "attention_init", """
        self.q_proj = nn.LazyLinear(cfg.d_model, bias=False)
        self.k_proj = nn.LazyLinear(cfg.d_model, bias=False)
        self.v_proj = nn.LazyLinear(cfg.d_model, bias=False)
        self.o_proj = nn.LazyLinear(cfg.d_model, bias=False)
    """, projections, "lazily", "projections created lazily (nn.LazyLinear), as a textbook does"),
    mutant("attention_init_with_bias", "attention_init", """
        self.q_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=True)
        self.k_proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.v_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=True)
        self.o_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=True)
    """, projections, "bias", "bias on Q/K/V/O"),
    mutant("attention_init_shared_query_key", "attention_init", patch("""
        - self.k_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        + self.k_proj = self.q_proj
    """), projections, "one object", "q_proj and k_proj are one layer"),
    mutant("attention_init_output_bias", "attention_init", patch("""
        - self.o_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        + self.o_proj = nn.Linear(cfg.d_model, cfg.d_model)
    """), projections, "bias", "only the output projection keeps its bias"),
    mutant("attention_init_packed_qkv", "attention_init", """
        self.c_attn = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.c_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
    """, projections, "q_proj", "one packed [3d, d] projection and c_proj, under other names"),
]

VARIANTS = [
    variant("attention_init_positional", "attention_init", """
        d = cfg.d_model
        self.q_proj, self.k_proj = nn.Linear(d, d, False), nn.Linear(d, d, False)
        self.v_proj, self.o_proj = nn.Linear(d, d, False), nn.Linear(d, d, False)
        self.scale = 1.0 / math.sqrt(cfg.d_head)
    """, "bias passed positionally, an extra plain attribute"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'Projections with bias': ('attention_init_with_bias', 'attention_init_output_bias',),
    'one `nn.Linear` object reused for q, k and v': ('attention_init_shared_query_key',),
}
