"""Task residual_backward: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch06_backward.residual_backward import dead_branch, matches_autograd
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("residual_backward_no_skip", "residual_backward", patch("""
        - return grad_out + dx_branch, dgamma, dbeta, dw1, db1, dw2, db2
        + return dx_branch, dgamma, dbeta, dw1, db1, dw2, db2
    """), (matches_autograd, dead_branch), "skip",
       "the residual (skip) gradient dropped"),
    mutant("residual_backward_skip_only", "residual_backward", patch("""
        - return grad_out + dx_branch, dgamma, dbeta, dw1, db1, dw2, db2
        + return grad_out, dgamma, dbeta, dw1, db1, dw2, db2
    """), matches_autograd, "only the skip path", "the branch's dx dropped"),
    mutant("residual_backward_dw1_from_block_input", "residual_backward", patch("""
        - dnormed, dw1, db1 = linear_backward(dpre, normed, w1)
        + dnormed, dw1, db1 = linear_backward(dpre, x, w1)
    """), matches_autograd, "block input",
       "fc1's weight gradient paired with the block's input x, not LN(x)"),
    mutant("residual_backward_dw2_before_activation", "residual_backward", patch("""
        - dact, dw2, db2 = linear_backward(grad_out, act, w2)
        + dact, dw2, db2 = linear_backward(grad_out, pre, w2)
    """), matches_autograd, "before GELU",
       "fc2's weight gradient paired with the pre-activation, not GELU's output"),
    mutant("residual_backward_gelu_slope_at_output", "residual_backward", patch("""
        - dpre = gelu_backward(dact, pre)
        + dpre = gelu_backward(dact, act)
    """), matches_autograd, "activation's output",
       "GELU's derivative taken at its output, not at fc1's pre-activation"),
]

VARIANTS = [
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
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    "Forgetting the skip path's grad_out": ('residual_backward_no_skip',),
}
