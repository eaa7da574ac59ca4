"""Task layer_norm_backward: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch06_backward.layer_norm_backward import dx_sums_to_zero, finite_differences, matches_autograd
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("layer_norm_backward_no_mean_terms", "layer_norm_backward", patch("""
        - dx = inv_std / d * (
        -     d * dnorm
        -     - dnorm.sum(dim=-1, keepdim=True)
        -     - normalised * (dnorm * normalised).sum(dim=-1, keepdim=True)
        - )
        + dx = dnorm * inv_std
    """), (matches_autograd,), "missing the mean terms",
       "dx without the two correction terms"),
    mutant("layer_norm_backward_no_variance_term", "layer_norm_backward", patch("""
        - - normalised * (dnorm * normalised).sum(dim=-1, keepdim=True)
    """), matches_autograd, "variance", "dx without the variance's correction"),
    mutant("layer_norm_backward_dgamma_not_summed", "layer_norm_backward", patch("""
        - dgamma = (grad_out * normalised).reshape(-1, d).sum(dim=0)
        + dgamma = grad_out * normalised
    """), matches_autograd, "not summed over batch and time",
       "dgamma not summed over batch and time"),
    mutant("layer_norm_backward_dbeta_not_summed", "layer_norm_backward", patch("""
        - dbeta = grad_out.reshape(-1, d).sum(dim=0)
        + dbeta = grad_out
    """), matches_autograd, "not summed over batch and time",
       "dbeta not summed over batch and time"),
    mutant("layer_norm_backward_unbiased_variance", "layer_norm_backward", patch("""
        - inv_std = 1.0 / torch.sqrt((centred * centred).mean(dim=-1, keepdim=True) + eps)
        + inv_std = 1.0 / torch.sqrt(x.var(dim=-1, keepdim=True) + eps)
    """), matches_autograd, "unbiased", "unbiased variance in the backward"),
    mutant("layer_norm_backward_ignores_gamma", "layer_norm_backward", patch("""
        - dnorm = grad_out * gamma
        + dnorm = grad_out
    """), matches_autograd, "ignores gamma", "γ left out of dx"),
    mutant("layer_norm_backward_autograd", "layer_norm_backward", """
        import torch.nn.functional as F
        leaves = [t.detach().requires_grad_(True) for t in (x, gamma)]
        with torch.enable_grad():
            y = F.layer_norm(leaves[0], (x.shape[-1],), leaves[1], None, eps)
            dx, dgamma = torch.autograd.grad(y, leaves, grad_out)
        return dx, dgamma, grad_out.reshape(-1, x.shape[-1]).sum(0)
    """, matches_autograd, "torch.autograd.grad", "torch.autograd.grad does the work"),
    mutant("layer_norm_backward_float32", "layer_norm_backward", patch("""
        - d = x.shape[-1]
        + grad_out, x, gamma = grad_out.float(), x.float(), gamma.float()  # float32 throughout
        + d = x.shape[-1]
    """), matches_autograd, "float32 precision", "computed in float32"),
    mutant("layer_norm_backward_unpacks_b_t_c", "layer_norm_backward", patch("""
        - d = x.shape[-1]
        + B, T, d = x.shape  # written for [B, T, C] buffers only
    """), (dx_sums_to_zero, finite_differences),
       "any leading shape", "x unpacked as [B, T, C]: 2-D inputs refused"),
]

VARIANTS = [
    variant("layer_norm_backward_chain_rule", "layer_norm_backward", """
        # The step-by-step chain rule: through the variance, then the mean.
        n = x.shape[-1]
        mu = x.mean(-1, keepdim=True)
        xc = x - mu
        var = (xc ** 2).mean(-1, keepdim=True)
        std = (var + eps).sqrt()
        xhat = xc / std
        dxhat = grad_out * gamma
        dvar = (dxhat * xc).sum(-1, keepdim=True) * -0.5 * (var + eps) ** -1.5
        dmu = -(dxhat / std).sum(-1, keepdim=True) + dvar * (-2.0 * xc).mean(-1, keepdim=True)
        dx = dxhat / std + dvar * 2.0 * xc / n + dmu / n
        axes = list(range(x.dim() - 1))
        dgamma = (grad_out * xhat).sum(dim=axes) if axes else grad_out * xhat
        dbeta = grad_out.sum(dim=axes) if axes else grad_out.clone()
        return dx, dgamma, dbeta
    """, "the chain rule through dvar and dmean (CS231n style)"),
    variant("layer_norm_backward_rsqrt_flatten", "layer_norm_backward", """
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        g2 = grad_out.reshape(-1, shape[-1])
        rstd = torch.rsqrt(x2.var(dim=1, unbiased=False, keepdim=True) + eps)
        xhat = (x2 - x2.mean(dim=1, keepdim=True)) * rstd
        dxhat = g2 * gamma
        dx = rstd * (dxhat - dxhat.mean(1, keepdim=True) - xhat * (dxhat * xhat).mean(1, keepdim=True))
        return dx.reshape(shape), (g2 * xhat).sum(0), g2.sum(0)
    """, "flattened to [N, d], rsqrt and var(unbiased=False)"),
    variant("layer_norm_backward_two_reductions", "layer_norm_backward", """
        d = x.shape[-1]
        rows, grads = x.reshape(-1, d), grad_out.reshape(-1, d)
        mean = rows.mean(dim=1, keepdim=True)
        rstd = 1.0 / torch.sqrt(((rows - mean) ** 2).mean(dim=1, keepdim=True) + eps)
        norm = (rows - mean) * rstd
        dnorm = gamma * grads
        dnorm_mean = dnorm.mean(dim=1, keepdim=True)
        dnorm_norm_mean = (dnorm * norm).mean(dim=1, keepdim=True)
        dx = (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd
        return dx.reshape(x.shape), (norm * grads).sum(dim=0), grads.sum(dim=0)
    """, "the two per-position reductions, then one pass, on rows of any leading shape"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    "LayerNorm's dx without the correction terms": ('layer_norm_backward_no_mean_terms', 'layer_norm_backward_no_variance_term',),
    'dγ, dβ, dW or db not summed over batch and time': ('layer_norm_backward_dgamma_not_summed', 'layer_norm_backward_dbeta_not_summed',),
    'Unpacking `B, T, C = x.shape`': ('layer_norm_backward_unpacks_b_t_c',),
}
