"""Task layer_norm: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch05_block.layer_norm import (
    constant_vector, each_position_alone, example_figures, float64_precision, shift_invariance,
)
from grader.checks.ch05_block.layer_norm.hidden import matches_reference
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("layer_norm_in_float32", "layer_norm", """
        xf = x.float()
        centred = xf - xf.mean(dim=-1, keepdim=True)
        variance = (centred * centred).mean(dim=-1, keepdim=True)
        return (centred / torch.sqrt(variance + self.eps)).to(x.dtype) * self.weight + self.bias
    """, float64_precision, "float32", "the statistics computed in float32 (mixed precision)"),
    mutant("layer_norm_l2_normalize", "layer_norm",
           "return torch.nn.functional.normalize(x, dim=-1) * math.sqrt(x.shape[-1]) * self.weight + self.bias\n",
           (example_figures, shift_invariance), "never subtracts the mean",
           "an RMS-style norm by F.normalize, pasted as the LayerNorm"),
    mutant("layer_norm_variance_d_minus_1", "layer_norm", patch("""
        - variance = (centred * centred).mean(dim=-1, keepdim=True)
        + variance = x.var(dim=-1, keepdim=True, unbiased=True)
    """), example_figures, "d - 1", "variance divided by d − 1"),
    mutant("layer_norm_variance_of_raw_x", "layer_norm", patch("""
        - variance = (centred * centred).mean(dim=-1, keepdim=True)
        + variance = (x * x).mean(dim=-1, keepdim=True)
    """), shift_invariance, "variance is taken of x itself", "variance of x, not of x − mean"),
    mutant("layer_norm_no_eps", "layer_norm", patch("""
        - return centred / torch.sqrt(variance + self.eps) * self.weight + self.bias
        + return centred / torch.sqrt(variance) * self.weight + self.bias
    """), constant_vector, "eps", "eps left out"),
    mutant("layer_norm_eps_outside_sqrt", "layer_norm", patch("""
        - return centred / torch.sqrt(variance + self.eps) * self.weight + self.bias
        + return centred / (torch.sqrt(variance) + self.eps) * self.weight + self.bias
    """), (example_figures, matches_reference), "outside the square root",
       "eps added outside the square root"),
    mutant("layer_norm_over_time_axis", "layer_norm", """
        mean = x.mean(dim=-2, keepdim=True)
        variance = ((x - mean) ** 2).mean(dim=-2, keepdim=True)
        return (x - mean) / torch.sqrt(variance + self.eps) * self.weight + self.bias
    """, (each_position_alone, matches_reference), "time axis", "statistics over the time axis"),
    mutant("layer_norm_over_all_axes", "layer_norm", """
        mean = x.mean()
        variance = ((x - mean) ** 2).mean()
        return (x - mean) / torch.sqrt(variance + self.eps) * self.weight + self.bias
    """, (each_position_alone, matches_reference), "all axes", "statistics over all axes"),
    mutant("layer_norm_no_gamma_beta", "layer_norm", patch("""
        - return centred / torch.sqrt(variance + self.eps) * self.weight + self.bias
        + return centred / torch.sqrt(variance + self.eps)
    """), (constant_vector, matches_reference), "gamma and beta are not applied",
       "γ/β not applied"),
    mutant("layer_norm_library", "layer_norm", """
        return torch.nn.functional.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)
    """, example_figures, "torch.nn.functional.layer_norm", "the library LayerNorm"),
    mutant("layer_norm_private_refs_helper", "layer_norm", """
        normalised, _, _ = getattr(getattr(torch, "_refs"), "_normalize")(x, [x.dim() - 1], self.eps)
        return normalised * self.weight + self.bias
    """, example_figures, "torch._refs", "a private helper of torch._refs normalises"),
    mutant("layer_norm_unbiased_std_eps_outside", "layer_norm", """
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)
        return self.weight * (x - mean) / (std + self.eps) + self.bias
    """, (example_figures, matches_reference), "std",
       "torch's std (divides by d − 1) with eps added to it, outside the square root"),
    mutant("layer_norm_unbiased_std_no_eps", "layer_norm", """
        mean = x.mean(dim=-1, keepdim=True)
        return (x - mean) / x.std(dim=-1, keepdim=True) * self.weight + self.bias
    """, (example_figures, matches_reference), "eps is missing",
       "torch's std (d − 1) and no eps at all"),
    mutant("layer_norm_std_plus_small_eps", "layer_norm", """
        mean = x.mean(-1, keepdim=True)
        return self.weight * (x - mean) / (x.std(-1, keepdim=True) + 1e-6) + self.bias
    """, (example_figures, matches_reference), "d - 1",
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
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'Dividing by d − 1': ('layer_norm_variance_d_minus_1',),
    'ε outside the square root': ('layer_norm_eps_outside_sqrt',),
    'normalising over time': ('layer_norm_over_time_axis',),
    'over every axis': ('layer_norm_over_all_axes',),
    'forgetting γ and β': ('layer_norm_no_gamma_beta',),
    'calling `torch.nn.functional.gelu`, `nn.LayerNorm` or\n  `F.layer_norm`': ('layer_norm_library',),
    '`x.std()` plus ε': ('layer_norm_unbiased_std_eps_outside', 'layer_norm_std_plus_small_eps',),
    '`x.std()` with no ε at all is two slips as well': ('layer_norm_unbiased_std_no_eps',),
}
