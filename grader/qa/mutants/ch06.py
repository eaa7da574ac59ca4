"""Chapter 06: the mistakes of hand-written backward passes, and right ways to write them."""

from grader.qa.mutants import mutant, patch, variant

MUTANTS = [
    # LayerNorm
    mutant("layer_norm_backward_no_mean_terms", "layer_norm_backward", patch("""
        - dx = inv_std / d * (
        -     d * dnorm
        -     - dnorm.sum(dim=-1, keepdim=True)
        -     - normalised * (dnorm * normalised).sum(dim=-1, keepdim=True)
        - )
        + dx = dnorm * inv_std
    """), ("ch06.layer_norm_backward.matches_autograd",), "missing the mean terms",
       "dx without the two correction terms"),
    mutant("layer_norm_backward_no_variance_term", "layer_norm_backward", patch("""
        - - normalised * (dnorm * normalised).sum(dim=-1, keepdim=True)
    """), "ch06.layer_norm_backward.matches_autograd", "variance", "dx without the variance's correction"),
    mutant("layer_norm_backward_dgamma_not_summed", "layer_norm_backward", patch("""
        - dgamma = (grad_out * normalised).reshape(-1, d).sum(dim=0)
        + dgamma = grad_out * normalised
    """), "ch06.layer_norm_backward.matches_autograd", "not summed over batch and time",
       "dgamma not summed over batch and time"),
    mutant("layer_norm_backward_dbeta_not_summed", "layer_norm_backward", patch("""
        - dbeta = grad_out.reshape(-1, d).sum(dim=0)
        + dbeta = grad_out
    """), "ch06.layer_norm_backward.matches_autograd", "not summed over batch and time",
       "dbeta not summed over batch and time"),
    mutant("layer_norm_backward_unbiased_variance", "layer_norm_backward", patch("""
        - inv_std = 1.0 / torch.sqrt((centred * centred).mean(dim=-1, keepdim=True) + eps)
        + inv_std = 1.0 / torch.sqrt(x.var(dim=-1, keepdim=True) + eps)
    """), "ch06.layer_norm_backward.matches_autograd", "unbiased", "unbiased variance in the backward"),
    mutant("layer_norm_backward_ignores_gamma", "layer_norm_backward", patch("""
        - dnorm = grad_out * gamma
        + dnorm = grad_out
    """), "ch06.layer_norm_backward.matches_autograd", "ignores gamma", "γ left out of dx"),
    # GELU
    mutant("gelu_backward_no_x_pdf", "gelu_backward", patch("""
        - return grad_out * (cdf + x * pdf)
        + return grad_out * cdf
    """), ("ch06.gelu_backward.matches_autograd", "ch06.gelu_backward.key_values"), "x·φ(x)",
       "GELU derivative without the x·φ(x) term"),
    mutant("gelu_backward_no_chain_rule", "gelu_backward", patch("""
        - return grad_out * (cdf + x * pdf)
        + return cdf + x * pdf
    """), "ch06.gelu_backward.matches_autograd", "chain rule", "local derivative not times grad_out"),
    mutant("gelu_backward_tanh", "gelu_backward", """
        k = math.sqrt(2.0 / math.pi)
        t = torch.tanh(k * (x + 0.044715 * x ** 3))
        return grad_out * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x))
    """, "ch06.gelu_backward.matches_autograd", "tanh", "derivative of the tanh approximation"),
    # Linear
    mutant("linear_backward_dweight_transposed", "linear_backward", patch("""
        - return dx, flat_grad.T @ flat_x, flat_grad.sum(dim=0)
        + return dx, flat_x.T @ flat_grad, flat_grad.sum(dim=0)
    """), "ch06.linear_backward.matches_autograd", "transposed", "dW transposed"),
    mutant("linear_backward_dweight_per_batch", "linear_backward", patch("""
        - return dx, flat_grad.T @ flat_x, flat_grad.sum(dim=0)
        + return dx, grad_out.transpose(-2, -1) @ x, flat_grad.sum(dim=0)
    """), "ch06.linear_backward.matches_autograd", "not summed over the batch", "dW not summed over the batch"),
    mutant("linear_backward_dbias_not_summed", "linear_backward", patch("""
        - return dx, flat_grad.T @ flat_x, flat_grad.sum(dim=0)
        + return dx, flat_grad.T @ flat_x, grad_out
    """), "ch06.linear_backward.matches_autograd", "not summed", "db not summed"),
    # Residual
    mutant("residual_backward_no_skip", "residual_backward", patch("""
        - return grad_out + dx_branch, dgamma, dbeta, dw1, db1, dw2, db2
        + return dx_branch, dgamma, dbeta, dw1, db1, dw2, db2
    """), ("ch06.residual_backward.matches_autograd", "ch06.residual_backward.dead_branch"), "skip",
       "the residual (skip) gradient dropped"),
    mutant("residual_backward_skip_only", "residual_backward", patch("""
        - return grad_out + dx_branch, dgamma, dbeta, dw1, db1, dw2, db2
        + return grad_out, dgamma, dbeta, dw1, db1, dw2, db2
    """), "ch06.residual_backward.matches_autograd", "only the skip path", "the branch's dx dropped"),
    mutant("residual_backward_dw1_from_block_input", "residual_backward", patch("""
        - dnormed, dw1, db1 = linear_backward(dpre, normed, w1)
        + dnormed, dw1, db1 = linear_backward(dpre, x, w1)
    """), "ch06.residual_backward.matches_autograd", "block input",
       "fc1's weight gradient paired with the block's input x, not LN(x)"),
    mutant("residual_backward_dw2_before_activation", "residual_backward", patch("""
        - dact, dw2, db2 = linear_backward(grad_out, act, w2)
        + dact, dw2, db2 = linear_backward(grad_out, pre, w2)
    """), "ch06.residual_backward.matches_autograd", "before GELU",
       "fc2's weight gradient paired with the pre-activation, not GELU's output"),
    mutant("residual_backward_gelu_slope_at_output", "residual_backward", patch("""
        - dpre = gelu_backward(dact, pre)
        + dpre = gelu_backward(dact, act)
    """), "ch06.residual_backward.matches_autograd", "activation's output",
       "GELU's derivative taken at its output, not at fc1's pre-activation"),
    mutant("gelu_backward_at_the_output", "gelu_backward", patch("""
          cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
        + x = x * cdf  # the point the derivative is taken at: GELU(x), not x
        + cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
    """), "ch06.gelu_backward.matches_autograd", "forward's output", "Φ and φ evaluated at GELU(x)"),
    # Forbidden: autograd does the work
    mutant("layer_norm_backward_autograd", "layer_norm_backward", """
        import torch.nn.functional as F
        leaves = [t.detach().requires_grad_(True) for t in (x, gamma)]
        with torch.enable_grad():
            y = F.layer_norm(leaves[0], (x.shape[-1],), leaves[1], None, eps)
            dx, dgamma = torch.autograd.grad(y, leaves, grad_out)
        return dx, dgamma, grad_out.reshape(-1, x.shape[-1]).sum(0)
    """, "ch06.layer_norm_backward.matches_autograd", "torch.autograd.grad", "torch.autograd.grad does the work"),
    mutant("gelu_backward_hidden_backward_call", "gelu_backward", """
        x = x.detach().requires_grad_(True)
        with torch.enable_grad():
            y = 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
            getattr(y, "back" + "ward")(grad_out)
        return x.grad
    """, "ch06.gelu_backward.matches_autograd", "by hand",
       ".backward() reached through getattr (the operator recorder sees the graph being built)"),
    # Families that code adapted from well-known implementations brings: a backward ported
    # from code that works in float32 on [B, T, C] buffers, and gradients averaged where the
    # positions' contributions add up.
    mutant("layer_norm_backward_float32", "layer_norm_backward", patch("""
        - d = x.shape[-1]
        + grad_out, x, gamma = grad_out.float(), x.float(), gamma.float()  # float32 throughout
        + d = x.shape[-1]
    """), "ch06.layer_norm_backward.matches_autograd", "float32 precision", "computed in float32"),
    mutant("layer_norm_backward_unpacks_b_t_c", "layer_norm_backward", patch("""
        - d = x.shape[-1]
        + B, T, d = x.shape  # written for [B, T, C] buffers only
    """), ("ch06.layer_norm_backward.dx_sums_to_zero", "ch06.layer_norm_backward.finite_differences"),
       "any leading shape", "x unpacked as [B, T, C]: 2-D inputs refused"),
    mutant("linear_backward_float32", "linear_backward", patch("""
        - dx = grad_out @ weight
        + grad_out, x, weight = grad_out.float(), x.float(), weight.float()  # float32 throughout
        + dx = grad_out @ weight
    """), "ch06.linear_backward.matches_autograd", "float32 precision", "computed in float32"),
    mutant("linear_backward_dweight_averaged", "linear_backward", patch("""
        - return dx, flat_grad.T @ flat_x, flat_grad.sum(dim=0)
        + return dx, flat_grad.T @ flat_x / flat_x.shape[0], flat_grad.sum(dim=0)
    """), "ch06.linear_backward.matches_autograd", "averages over the positions", "dW averaged over the positions"),
    mutant("gelu_backward_float32_constants", "gelu_backward", patch("""
        - cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
        - pdf = torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        + x32 = x.float()  # the constants and the arithmetic in float32
        + cdf = 0.5 * (1.0 + torch.erf(x32 / torch.tensor(2.0).sqrt()))
        + pdf = torch.exp(-0.5 * x32 * x32) / torch.tensor(2.0 * math.pi).sqrt()
    """), "ch06.gelu_backward.matches_autograd", "float32 precision", "computed in float32"),
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
    variant("gelu_backward_ndtr", "gelu_backward", """
        density = torch.exp(-x.pow(2) / 2) * (2 * math.pi) ** -0.5
        return grad_out * torch.special.ndtr(x) + grad_out * x * density
    """, "torch.special.ndtr for Φ"),
    variant("linear_backward_einsum", "linear_backward", """
        dx = torch.einsum("...o,oi->...i", grad_out, weight)
        dweight = torch.einsum("...o,...i->oi", grad_out, x)
        dbias = torch.einsum("...o->o", grad_out)
        return dx, dweight, dbias
    """, "einsum for all three"),
    variant("linear_backward_tensordot", "linear_backward", """
        axes = list(range(x.dim() - 1))
        dweight = torch.tensordot(grad_out, x, dims=(axes, axes))
        dbias = grad_out.sum(dim=axes) if axes else grad_out.clone()
        return torch.matmul(grad_out, weight), dweight, dbias
    """, "tensordot over the leading axes"),
    variant("residual_backward_inline", "residual_backward", """
        # Everything written out, no helper calls.
        n = x.shape[-1]
        mu = x.mean(-1, keepdim=True)
        rstd = 1.0 / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps)
        xhat = (x - mu) * rstd
        normed = xhat * gamma + beta
        pre = normed @ w1.T + b1
        cdf = 0.5 * (1.0 + torch.erf(pre / math.sqrt(2.0)))
        act = pre * cdf
        flat = lambda t: t.reshape(-1, t.shape[-1])
        dw2 = flat(grad_out).T @ flat(act)
        db2 = flat(grad_out).sum(0)
        dpre = (grad_out @ w2) * (cdf + pre * torch.exp(-0.5 * pre * pre) / math.sqrt(2.0 * math.pi))
        dw1 = flat(dpre).T @ flat(normed)
        db1 = flat(dpre).sum(0)
        dnormed = dpre @ w1
        dgamma = flat(dnormed * xhat).sum(0)
        dbeta = flat(dnormed).sum(0)
        dxhat = dnormed * gamma
        dx_branch = rstd / n * (n * dxhat - dxhat.sum(-1, keepdim=True) - xhat * (dxhat * xhat).sum(-1, keepdim=True))
        return grad_out + dx_branch, dgamma, dbeta, dw1, db1, dw2, db2
    """, "the whole half-block written out without the helpers"),
    # The same two-mean formula on [..., d] of any leading shape, as code written for
    # [B, T, C] buffers computes it once per position: a correct alternative formulation.
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
    variant("linear_backward_accumulated_per_position", "linear_backward", """
        dx = grad_out @ weight
        flat_grad = grad_out.reshape(-1, weight.shape[0])
        flat_x = x.reshape(-1, weight.shape[1])
        dweight = torch.zeros_like(weight)
        dbias = torch.zeros_like(flat_grad[0])
        for g, row in zip(flat_grad, flat_x):
            dweight += torch.outer(g, row)
            dbias += g
        return dx, dweight, dbias
    """, "dW and db accumulated position by position (+=), as a loop over B·T does"),
]

# The lesson's common mistakes (quoted from its README) and the mutants that make them.
LESSON = {
    "LayerNorm's dx without the correction terms": ("layer_norm_backward_no_mean_terms",
                                                    "layer_norm_backward_no_variance_term"),
    "dγ, dβ, dW or db not summed over batch and time": ("layer_norm_backward_dgamma_not_summed",
                                                        "layer_norm_backward_dbeta_not_summed",
                                                        "linear_backward_dweight_per_batch",
                                                        "linear_backward_dbias_not_summed"),
    "dW transposed": ("linear_backward_dweight_transposed",),
    "GELU′ = Φ(x) only, forgetting x·φ(x)": ("gelu_backward_no_x_pdf",),
    "Forgetting the skip path's grad_out": ("residual_backward_no_skip",),
    "Unpacking `B, T, C = x.shape`": ("layer_norm_backward_unpacks_b_t_c",),
}
