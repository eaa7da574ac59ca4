"""Task linear_backward: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch06_backward.linear_backward import matches_autograd
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("linear_backward_dweight_transposed", "linear_backward", patch("""
        - return dx, flat_grad.T @ flat_x, flat_grad.sum(dim=0)
        + return dx, flat_x.T @ flat_grad, flat_grad.sum(dim=0)
    """), matches_autograd, "transposed", "dW transposed"),
    mutant("linear_backward_dweight_per_batch", "linear_backward", patch("""
        - return dx, flat_grad.T @ flat_x, flat_grad.sum(dim=0)
        + return dx, grad_out.transpose(-2, -1) @ x, flat_grad.sum(dim=0)
    """), matches_autograd, "not summed over the batch", "dW not summed over the batch"),
    mutant("linear_backward_dbias_not_summed", "linear_backward", patch("""
        - return dx, flat_grad.T @ flat_x, flat_grad.sum(dim=0)
        + return dx, flat_grad.T @ flat_x, grad_out
    """), matches_autograd, "not summed", "db not summed"),
    mutant("linear_backward_float32", "linear_backward", patch("""
        - dx = grad_out @ weight
        + grad_out, x, weight = grad_out.float(), x.float(), weight.float()  # float32 throughout
        + dx = grad_out @ weight
    """), matches_autograd, "float32 precision", "computed in float32"),
    mutant("linear_backward_dweight_averaged", "linear_backward", patch("""
        - return dx, flat_grad.T @ flat_x, flat_grad.sum(dim=0)
        + return dx, flat_grad.T @ flat_x / flat_x.shape[0], flat_grad.sum(dim=0)
    """), matches_autograd, "averages over the positions", "dW averaged over the positions"),
]

VARIANTS = [
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

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'dγ, dβ, dW or db not summed over batch and time': ('linear_backward_dweight_per_batch', 'linear_backward_dbias_not_summed',),
    'dW transposed': ('linear_backward_dweight_transposed',),
}
