"""Chapter 05: the mistakes the chapter warns about, and right ways to write it."""

from grader.qa.mutants import mutant, patch, variant

MUTANTS = [
    # LayerNorm
    mutant("layer_norm_variance_d_minus_1", "layer_norm", patch("""
        - variance = (centred * centred).mean(dim=-1, keepdim=True)
        + variance = x.var(dim=-1, keepdim=True, unbiased=True)
    """), "ch05.layer_norm.example_figures", "d - 1", "variance divided by d − 1"),
    mutant("layer_norm_no_eps", "layer_norm", patch("""
        - return centred / torch.sqrt(variance + self.eps) * self.weight + self.bias
        + return centred / torch.sqrt(variance) * self.weight + self.bias
    """), "ch05.layer_norm.constant_vector", "eps", "eps left out"),
    mutant("layer_norm_eps_outside_sqrt", "layer_norm", patch("""
        - return centred / torch.sqrt(variance + self.eps) * self.weight + self.bias
        + return centred / (torch.sqrt(variance) + self.eps) * self.weight + self.bias
    """), ("ch05.layer_norm.example_figures", "ch05.layer_norm.matches_reference"), "outside the square root",
       "eps added outside the square root"),
    mutant("layer_norm_over_time_axis", "layer_norm", """
        mean = x.mean(dim=-2, keepdim=True)
        variance = ((x - mean) ** 2).mean(dim=-2, keepdim=True)
        return (x - mean) / torch.sqrt(variance + self.eps) * self.weight + self.bias
    """, ("ch05.layer_norm.each_position_alone", "ch05.layer_norm.matches_reference"), "time axis", "statistics over the time axis"),
    mutant("layer_norm_over_all_axes", "layer_norm", """
        mean = x.mean()
        variance = ((x - mean) ** 2).mean()
        return (x - mean) / torch.sqrt(variance + self.eps) * self.weight + self.bias
    """, ("ch05.layer_norm.each_position_alone", "ch05.layer_norm.matches_reference"), "all axes", "statistics over all axes"),
    mutant("layer_norm_no_gamma_beta", "layer_norm", patch("""
        - return centred / torch.sqrt(variance + self.eps) * self.weight + self.bias
        + return centred / torch.sqrt(variance + self.eps)
    """), ("ch05.layer_norm.constant_vector", "ch05.layer_norm.matches_reference"), "gamma and beta are not applied",
       "γ/β not applied"),
    # GELU
    mutant("gelu_tanh", "gelu", """
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    """, "ch05.gelu.exact_values", "tanh", "tanh-approximate GELU"),
    mutant("gelu_relu", "gelu", """
        return torch.clamp(x, min=0.0)
    """, "ch05.gelu.exact_values", "relu", "ReLU instead of GELU"),
    mutant("gelu_sigmoid", "gelu", """
        return x * torch.sigmoid(1.702 * x)
    """, "ch05.gelu.exact_values", "sigmoid", "sigmoid approximation"),
    # Feed-forward
    mutant("feedforward_no_nonlinearity", "feedforward", """
        return self.fc2(self.fc1(x))
    """, "ch05.feedforward.example_1", "no nonlinearity", "no nonlinearity between the linear layers"),
    mutant("feedforward_relu", "feedforward", """
        return self.fc2(torch.relu(self.fc1(x)))
    """, "ch05.feedforward.example_1", "relu", "ReLU in the feed-forward"),
    # The block's parts
    mutant("block_shared_layer_norm", "block_init", patch("""
        - self.ln_feedforward = LayerNorm(cfg.d_model)
        + self.ln_feedforward = self.ln_attention
    """), "ch05.block_init.parameter_ledger", "one object used twice", "the two LayerNorms are one object"),
    # The block
    mutant("block_post_ln", "block", """
        attended, present = self.attention(hidden, past_key_value, use_cache)
        hidden = self.ln_attention(hidden + attended)
        hidden = self.ln_feedforward(hidden + self.feedforward(hidden))
        return hidden, present
    """, ("ch05.block.example_1", "ch05.block.zero_branch_identity", "ch05.block.formula", "ch05.block.matches_reference"),
       "post-LN",
       "post-LN instead of pre-LN"),
    mutant("block_output_renormalised", "block", patch("""
        - return hidden, present
        + return self.ln_feedforward(hidden), present
    """), "ch05.block.zero_branch_identity", "re-normalised", "the block's output re-normalised"),
    mutant("block_feedforward_reads_x", "block", """
        attended, present = self.attention(self.ln_attention(hidden), past_key_value, use_cache)
        fed = self.feedforward(self.ln_feedforward(hidden))
        return hidden + attended + fed, present
    """, ("ch05.block.formula", "ch05.block.matches_reference"), "reads X instead of U", "feed-forward branch reads X, not U"),
    mutant("block_increment_broadcast", "block", patch("""
        - hidden = hidden + self.residual_dropout(attended)
        + hidden = hidden + self.residual_dropout(attended[:, -1:, :])
    """), ("ch05.block.causal_invariance", "ch05.block.matches_reference"), "future", "an increment broadcast from [B,1,d]"),
    mutant("block_one_norm_for_both", "block", patch("""
        - fed = self.feedforward(self.ln_feedforward(hidden))
        + fed = self.feedforward(self.ln_attention(hidden))
    """), ("ch05.block.formula", "ch05.block.matches_reference"), "one LayerNorm", "ln_attention used for both branches"),
    mutant("block_feedforward_first", "block", """
        hidden = hidden + self.feedforward(self.ln_feedforward(hidden))
        attended, present = self.attention(self.ln_attention(hidden), past_key_value, use_cache)
        return hidden + attended, present
    """, ("ch05.block.formula", "ch05.block.matches_reference"), "before attention", "feed-forward before attention"),
    mutant("block_branches_reordered_norms_left_in_place", "block", """
        hidden = hidden + self.feedforward(self.ln_attention(hidden))
        attended, present = self.attention(self.ln_feedforward(hidden), past_key_value, use_cache)
        return hidden + attended, present
    """, ("ch05.block.formula", "ch05.block.matches_reference"), "runs first",
       "the two branches' lines swapped, each LayerNorm left where it was"),
    mutant("block_norms_swapped", "block", """
        attended, present = self.attention(self.ln_feedforward(hidden), past_key_value, use_cache)
        hidden = hidden + attended
        return hidden + self.feedforward(self.ln_attention(hidden)), present
    """, ("ch05.block.formula", "ch05.block.matches_reference"), "swapped", "the two LayerNorms swapped"),
    mutant("block_no_residual", "block", patch("""
        - hidden = hidden + self.residual_dropout(attended)
        + hidden = self.residual_dropout(attended)
    """), "ch05.block.zero_branch_identity", "residual", "the attention residual dropped"),
    mutant("gelu_library", "gelu", """
        return torch.nn.functional.gelu(x)
    """, "ch05.gelu.exact_values", "torch.nn.functional.gelu", "the library GELU"),
    mutant("layer_norm_library", "layer_norm", """
        return torch.nn.functional.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)
    """, "ch05.layer_norm.example_figures", "torch.nn.functional.layer_norm", "the library LayerNorm"),
    mutant("block_drops_present", "block", patch("""
        - return hidden, present
        + return hidden, None
    """), "ch05.block.shape", "present", "present dropped"),
    mutant("block_no_cache_arguments", "block", patch("""
        - attended, present = self.attention(self.ln_attention(hidden), past_key_value, use_cache)
        + attended, present = self.attention(self.ln_attention(hidden))
    """), "ch05.block.shape", "cache arguments", "past_key_value and use_cache not passed to the attention"),
    # A private helper of torch._refs whose name no rule lists (reached past the static scan):
    # it returns the normalised rows, its mean and its reciprocal standard deviation.
    mutant("layer_norm_private_refs_helper", "layer_norm", """
        normalised, _, _ = getattr(getattr(torch, "_refs"), "_normalize")(x, [x.dim() - 1], self.eps)
        return normalised * self.weight + self.bias
    """, "ch05.layer_norm.example_figures", "torch._refs", "a private helper of torch._refs normalises"),
    # Families that arrive with code adapted from well-known implementations
    mutant("layer_norm_unbiased_std_eps_outside", "layer_norm", """
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)
        return self.weight * (x - mean) / (std + self.eps) + self.bias
    """, ("ch05.layer_norm.example_figures", "ch05.layer_norm.matches_reference"), "std",
       "torch's std (divides by d − 1) with eps added to it, outside the square root"),
    mutant("layer_norm_unbiased_std_no_eps", "layer_norm", """
        mean = x.mean(dim=-1, keepdim=True)
        return (x - mean) / x.std(dim=-1, keepdim=True) * self.weight + self.bias
    """, ("ch05.layer_norm.example_figures", "ch05.layer_norm.matches_reference"), "eps is missing",
       "torch's std (d − 1) and no eps at all"),
    mutant("gelu_tanh_pow", "gelu", """
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
        return 0.5 * x * (1.0 + torch.tanh(inner))
    """, "ch05.gelu.exact_values", "tanh", "the tanh GELU written with torch.pow, as GPT-2 ports write it"),
    mutant("gelu_module", "gelu", """
        return torch.nn.GELU()(x)
    """, "ch05.gelu.exact_values", "torch.nn.GELU", "torch's GELU module"),
    mutant("feedforward_tanh_gelu", "feedforward", """
        hidden = self.fc1(x)
        hidden = 0.5 * hidden * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (hidden + 0.044715 * hidden ** 3)))
        return self.fc2(hidden)
    """, "ch05.feedforward.example_1", "tanh", "the tanh GELU written inline in the feed-forward"),
    mutant("feedforward_gelu_module", "feedforward", """
        return self.fc2(torch.nn.GELU()(self.fc1(x)))
    """, "ch05.feedforward.example_1", "torch.nn.GELU", "torch's GELU module in the feed-forward"),
    mutant("block_init_other_names", "block_init", """
        self.ln_1 = LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = LayerNorm(cfg.d_model)
        self.mlp = FeedForward(cfg)
    """, "ch05.block_init.parameter_ledger", "names are part of the contract",
       "the parts named ln_1, attn, ln_2, mlp"),
    mutant("block_attention_tuple_added", "block", """
        hidden = hidden + self.attention(self.ln_attention(hidden))
        hidden = hidden + self.feedforward(self.ln_feedforward(hidden))
        return hidden
    """, ("ch05.block.example_1", "ch05.block.formula"), "returns a pair",
       "the attention's (out, present) added to the stream as it is, and a bare tensor returned"),
    mutant("layer_norm_std_plus_small_eps", "layer_norm", """
        mean = x.mean(-1, keepdim=True)
        return self.weight * (x - mean) / (x.std(-1, keepdim=True) + 1e-6) + self.bias
    """, ("ch05.layer_norm.example_figures", "ch05.layer_norm.matches_reference"), "d - 1",
       "torch's std plus an eps of 1e-6 written in: no figure the kit lists, near the d − 1 one"),
]

VARIANTS = [
    variant("layer_norm_var_unbiased_false", "layer_norm", """
        mean = x.mean(-1, keepdim=True)
        variance = x.var(-1, keepdim=True, unbiased=False)
        return self.weight * (x - mean) / (variance + self.eps).sqrt() + self.bias
    """, "torch.var(unbiased=False) instead of the mean of squares"),
    variant("layer_norm_rsqrt_mean_of_squares", "layer_norm", """
        mean = torch.mean(x, dim=-1, keepdim=True)
        second_moment = torch.mean(x * x, dim=-1, keepdim=True)
        inv = torch.rsqrt(second_moment - mean * mean + self.eps)
        return (x - mean) * inv * self.weight + self.bias
    """, "E[x²] − E[x]² with rsqrt"),
    variant("gelu_erfc", "gelu", """
        return 0.5 * x * torch.erfc(-x / math.sqrt(2.0))
    """, "the erfc form Φ(x) = ½ erfc(−x/√2)"),
    variant("gelu_normal_cdf", "gelu", """
        return x * torch.special.ndtr(x)
    """, "torch.special.ndtr as Φ"),
    variant("feedforward_explicit_matmul", "feedforward", """
        hidden = x @ self.fc1.weight.T + self.fc1.bias
        return gelu(hidden) @ self.fc2.weight.T + self.fc2.bias
    """, "explicit matrix products with the stored [f, d] weights"),
    variant("block_with_helper", "block", """
        def branch(norm, layer, value):
            return layer(norm(value))
        attended, present = self.attention(self.ln_attention(hidden), past_key_value, use_cache)
        middle = hidden + attended
        return middle + branch(self.ln_feedforward, self.feedforward, middle), present
    """, "a student's own helper function"),
    variant("block_init_extra_attributes", "block_init", """
        self.d_model = cfg.d_model
        self.ln_attention = LayerNorm(cfg.d_model)
        self.attention = CausalSelfAttention(cfg)
        self.ln_feedforward = LayerNorm(cfg.d_model)
        self.feedforward = FeedForward(cfg)
        self.branch_names = ("attention", "feedforward")
    """, "extra plain attributes on the block"),
    variant("layer_norm_unpacks_b_t_c", "layer_norm", """
        B, T, C = x.size()
        mean = x.sum(-1, keepdim=True) / C
        shifted = x - mean
        variance = (shifted ** 2).sum(-1, keepdim=True) / C
        inverse_std = (variance + self.eps) ** -0.5
        return shifted * inverse_std * self.weight + self.bias
    """, "x unpacked as [B, T, C]; sums divided by C and (var + eps) ** -0.5"),
    variant("layer_norm_var_correction_0", "layer_norm", """
        centred = x - x.mean(dim=-1, keepdim=True)
        return self.weight * centred / torch.sqrt(torch.var(x, dim=-1, keepdim=True, correction=0) + self.eps) + self.bias
    """, "torch.var with correction=0"),
    variant("gelu_normal_distribution_cdf", "gelu", """
        return x * torch.distributions.Normal(0.0, 1.0).cdf(x)
    """, "Φ from torch.distributions.Normal(0, 1).cdf"),
    variant("gelu_erf_times_inverse_root", "gelu", """
        return x * 0.5 * (1.0 + torch.erf(x * (1.0 / math.sqrt(2.0))))
    """, "x · ½ · (1 + erf(x · 1/√2))"),
    variant("feedforward_functional_linear", "feedforward", """
        hidden = torch.nn.functional.linear(x, self.fc1.weight, self.fc1.bias)
        return torch.nn.functional.linear(gelu(hidden), self.fc2.weight, self.fc2.bias)
    """, "F.linear with the layers' weights"),
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

# The lesson's common mistakes (quoted from its README) and the mutants that make them.
LESSON = {
    "Dividing by d − 1": ("layer_norm_variance_d_minus_1",),
    "ε outside the square root": ("layer_norm_eps_outside_sqrt",),
    "normalising over time": ("layer_norm_over_time_axis",),
    "over every axis": ("layer_norm_over_all_axes",),
    "forgetting γ and β": ("layer_norm_no_gamma_beta",),
    "The tanh GELU": ("gelu_tanh",),
    "calling `torch.nn.functional.gelu`, `nn.LayerNorm` or\n  `F.layer_norm`": ("gelu_library", "layer_norm_library"),
    "One LayerNorm object used for both branches": ("block_shared_layer_norm", "block_one_norm_for_both"),
    "Feeding X instead of U to the second branch": ("block_feedforward_reads_x",),
    "normalising the block's output": ("block_output_renormalised",),
    "Dropping `present`": ("block_drops_present",),
    "`x.std()` plus ε": ("layer_norm_unbiased_std_eps_outside", "layer_norm_std_plus_small_eps"),
    "`x.std()` with no ε at all is two slips as well": ("layer_norm_unbiased_std_no_eps",),
    "Adding what the attention returns straight to the stream": ("block_attention_tuple_added",),
    "not passing the cache arguments to the attention": ("block_no_cache_arguments",),
}
