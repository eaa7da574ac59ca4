"""Chapter 07: the full model's classic mistakes, and right ways to write it."""

from grader.qa.mutants import mutant, patch, variant

MUTANTS = [
    # cross-entropy
    mutant("cross_entropy_summed", "cross_entropy", patch("""
        - return -picked.mean()
        + return -picked.sum()
    """), "ch07.cross_entropy.matches_log_softmax", "summed instead of averaged", "loss summed, not averaged"),
    mutant("cross_entropy_log_of_softmax_no_max", "cross_entropy", """
        exps = logits.exp()
        probs = exps / exps.sum(dim=-1, keepdim=True)
        picked = probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        return -picked.log().mean()
    """, "ch07.cross_entropy.huge_logits", "no max subtraction", "log(softmax) without max subtraction"),
    mutant("cross_entropy_wrong_axis", "cross_entropy", """
        shifted = logits - logits.amax(dim=1, keepdim=True)
        log_probs = shifted - shifted.exp().sum(dim=1, keepdim=True).log()
        return -log_probs.gather(-1, targets.unsqueeze(-1)).mean()
    """, "ch07.cross_entropy.matches_log_softmax", "wrong axis", "softmax over time, not the vocabulary"),
    mutant("cross_entropy_detached", "cross_entropy", patch("""
        - logits = logits.reshape(-1, logits.shape[-1])
        + logits = logits.detach().reshape(-1, logits.shape[-1])
    """), "ch07.cross_entropy.gradient", "not connected", "the loss detached from the logits"),
    mutant("cross_entropy_library", "cross_entropy", """
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    """, "ch07.cross_entropy.matches_log_softmax", "torch.nn.functional.cross_entropy", "the library loss"),
    mutant("cross_entropy_log_softmax_method", "cross_entropy", """
        log_probs = logits.log_softmax(dim=-1)
        return -log_probs.gather(-1, targets.unsqueeze(-1)).mean()
    """, "ch07.cross_entropy.matches_log_softmax", "log_softmax", "Tensor.log_softmax does the work"),
    # parameter ledger
    mutant("parameter_count_no_final_norm", "parameter_count", patch("""
        - return 2 * V * d + C * d + N * per_block + 2 * d
        + return 2 * V * d + C * d + N * per_block
    """), "ch07.parameter_count.published_figures", "final LayerNorm", "ledger without the final LayerNorm"),
    mutant("parameter_count_tied_head", "parameter_count", patch("""
        - return 2 * V * d + C * d + N * per_block + 2 * d
        + return V * d + C * d + N * per_block + 2 * d
    """), "ch07.parameter_count.published_figures", "tied", "ledger with a tied head"),
    # the model's parts
    mutant("lm_init_one_block_reused", "lm_init", patch("""
        - self.blocks = nn.ModuleList([TransformerBlock(cfg) for _ in range(cfg.n_layers)])
        + block = TransformerBlock(cfg)
        + self.blocks = nn.ModuleList([block] * cfg.n_layers)
    """), ("ch07.lm_init.separate_blocks", "ch07.lm_init.parameter_ledger"), "one block object reused",
       "one block object reused N times"),
    mutant("lm_init_head_bias", "lm_init", patch("""
        - self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        + self.head = nn.Linear(cfg.d_model, cfg.vocab_size)
    """), ("ch07.lm_init.untied_bias_free_head", "ch07.lm_init.parameter_ledger"), "the head has a bias",
       "a bias on the head"),
    mutant("lm_init_tied_head", "lm_init", patch("""
          self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        + self.head.weight = self.token_embedding.weight
    """), ("ch07.lm_init.untied_bias_free_head", "ch07.lm_init.parameter_ledger"), "shared",
       "head tied to the token embedding"),
    mutant("lm_init_no_final_norm", "lm_init", patch("""
        - self.ln_final = LayerNorm(cfg.d_model)
    """), ("ch07.lm_init.parameter_ledger", "ch07.lm_init.final_layer_norm"), "final LayerNorm",
       "no final LayerNorm"),
    mutant("lm_init_blocks_in_a_list", "lm_init", patch("""
        - self.blocks = nn.ModuleList([TransformerBlock(cfg) for _ in range(cfg.n_layers)])
        + self.blocks = [TransformerBlock(cfg) for _ in range(cfg.n_layers)]
    """), ("ch07.lm_init.parameter_ledger", "ch07.lm_init.separate_blocks"), "ModuleList",
       "blocks in a plain Python list"),
    # the forward pass
    mutant("lm_forward_no_final_norm", "lm_forward", patch("""
        - logits = self.head(self.ln_final(hidden))
        + logits = self.head(hidden)
    """), ("ch07.lm_forward.final_norm_feeds_head", "ch07.lm_forward.matches_reference"), "final LayerNorm",
       "final LayerNorm not applied"),
    mutant("lm_forward_positions_not_offset", "lm_forward", patch("""
        - hidden = self.embedding_dropout(self.position_embedding(hidden, past_length))
        + hidden = self.embedding_dropout(self.position_embedding(hidden))
    """), "ch07.lm_forward.cache_matches_full", "offset by the cache length", "positions restart at 0 after the cache"),
    mutant("lm_forward_no_positions", "lm_forward", patch("""
        - hidden = self.embedding_dropout(self.position_embedding(hidden, past_length))
        + hidden = self.embedding_dropout(hidden)
    """), ("ch07.lm_forward.positions_matter", "ch07.lm_forward.matches_reference"),
       "position embeddings are not added", "no position embedding"),
    mutant("lm_forward_blocks_read_embeddings", "lm_forward", patch("""
        - hidden, present = block(hidden, past, use_cache)
        + out, present = block(hidden, past, use_cache)
        - logits = self.head(self.ln_final(hidden))
        + logits = self.head(self.ln_final(out))
    """), ("ch07.lm_forward.formula", "ch07.lm_forward.matches_reference"), "last block",
       "every block reads the embeddings"),
    mutant("lm_forward_loss_shifted", "lm_forward", patch("""
        - loss = None if targets is None else cross_entropy(logits, targets)
        + loss = None if targets is None else cross_entropy(logits[:, :-1], targets[:, 1:])
    """), "ch07.lm_forward.loss", "shifted again", "targets shifted a second time"),
    mutant("cross_entropy_log_of_stable_softmax", "cross_entropy", """
        shifted = logits - logits.amax(dim=-1, keepdim=True)
        probs = shifted.exp() / shifted.exp().sum(dim=-1, keepdim=True)
        picked = probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        return -picked.log().mean()
    """, "ch07.cross_entropy.tiny_probabilities", "underflow", "log of a (stable) softmax: underflow to inf"),
    # torch's library doing the loss from kernels a hand-written loss may run (logsumexp, gather):
    # refused by where it runs, not by its name.
    mutant("cross_entropy_distribution_log_prob", "cross_entropy", """
        flat, wanted = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
        return -torch.distributions.Categorical(logits=flat).log_prob(wanted).mean()
    """, "ch07.cross_entropy.matches_log_softmax", "torch.distributions.categorical",
       "a distribution's log_prob computes the loss"),
    # Families that code adapted from well-known implementations brings: the loss or the
    # logits switched to float32, a loss averaged over the rows only, and the inference
    # shortcut that returns the last position's logits alone.
    mutant("cross_entropy_float32", "cross_entropy", patch("""
        - logits = logits.reshape(-1, logits.shape[-1])
        + logits = logits.float().reshape(-1, logits.shape[-1])  # the loss in float32
    """), "ch07.cross_entropy.matches_log_softmax", "float32 precision", "computed in float32"),
    mutant("cross_entropy_rows_summed_then_averaged", "cross_entropy", """
        shifted = logits - logits.amax(dim=-1, keepdim=True)
        log_probs = shifted - shifted.exp().sum(dim=-1, keepdim=True).log()
        picked = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        return -(picked.sum(dim=-1).mean() if picked.dim() > 1 else picked.mean())
    """, "ch07.cross_entropy.matches_log_softmax", "averages over the rows only",
       "each row's positions summed, the rows averaged"),
    mutant("lm_forward_logits_to_float32", "lm_forward", patch("""
        - logits = self.head(self.ln_final(hidden))
        + logits = self.head(self.ln_final(hidden)).float()  # float32 for the loss
    """), "ch07.lm_forward.formula", "float32 precision", "logits switched to float32"),
    mutant("lm_forward_last_position_without_targets", "lm_forward", patch("""
        - logits = self.head(self.ln_final(hidden))
        + normed = self.ln_final(hidden)
        + logits = self.head(normed if targets is not None else normed[:, -1:, :])  # only what generation needs
    """), "ch07.lm_forward.shapes", "last position", "only the last position's logits without targets"),
]

VARIANTS = [
    variant("cross_entropy_gather_logsumexp", "cross_entropy", """
        log_norm = torch.logsumexp(logits, dim=-1)
        target_logit = torch.gather(logits, -1, targets.unsqueeze(-1)).squeeze(-1)
        return (log_norm - target_logit).mean()
    """, "torch.gather and torch.logsumexp, no flattening"),
    variant("cross_entropy_one_hot", "cross_entropy", """
        top = logits.max(dim=-1, keepdim=True).values
        log_probs = logits - top - torch.log(torch.exp(logits - top).sum(dim=-1, keepdim=True))
        one_hot = torch.nn.functional.one_hot(targets, logits.shape[-1]).to(log_probs.dtype)
        return -(one_hot * log_probs).sum(dim=-1).mean()
    """, "a one-hot mask instead of indexing"),
    variant("cross_entropy_shifted_logsumexp_sum_over_count", "cross_entropy", """
        z = logits.reshape(-1, logits.size(-1))
        z = z - z.max(dim=1, keepdim=True)[0]
        nll = torch.logsumexp(z, dim=1) - z[torch.arange(z.size(0)), targets.reshape(-1)]
        return nll.sum() / nll.numel()
    """, "max-shifted logits, logsumexp minus the target's, sum / count"),
    variant("parameter_count_by_parts", "parameter_count", """
        d = cfg.d_model
        attention = 4 * d * d
        feedforward = d * cfg.d_ff + cfg.d_ff + cfg.d_ff * d + d
        norms = 2 * (2 * d)
        embeddings = cfg.vocab_size * d + cfg.block_size * d
        return embeddings + cfg.n_layers * (attention + feedforward + norms) + 2 * d + cfg.vocab_size * d
    """, "the ledger added up part by part"),
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

# The lesson's common mistakes (quoted from its README) and the mutants that make them.
LESSON = {
    "`[TransformerBlock(cfg)] * N`": ("lm_init_one_block_reused",),
    "`head.weight = token_embedding.weight` (tied)": ("lm_init_tied_head",),
    "a head with bias": ("lm_init_head_bias",),
    "Forgetting `ln_final`": ("lm_init_no_final_norm",),
    "applying the head to the un-normalised hidden state": ("lm_forward_no_final_norm",),
    "Positions restarting at 0 on every cached call": ("lm_forward_positions_not_offset",),
    "A loss that sums instead of averaging": ("cross_entropy_summed",),
    "exponentiates raw logits": ("cross_entropy_log_of_softmax_no_max",),
    "The log of a softmax": ("cross_entropy_log_of_stable_softmax",),
    "Logits or the loss switched to float32": ("lm_forward_logits_to_float32", "cross_entropy_float32"),
}
