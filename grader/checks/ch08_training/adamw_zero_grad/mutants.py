"""Task adamw_zero_grad: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch08_training.adamw_zero_grad import before_any_backward, clears_gradients, sets_none
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("zero_grad_does_nothing", "adamw_zero_grad", patch("""
        - p.grad = None
        + grad = p.grad
        + grad = None
    """), clears_gradients, "old gradient", "the gradients are never cleared"),
    mutant("zero_grad_resets_moments", "adamw_zero_grad", """
        for i, p in enumerate(self.params):
            p.grad = None
            self.exp_avg[i] = torch.zeros_like(p)
            self.exp_avg_sq[i] = torch.zeros_like(p)
    """, clears_gradients, "optimizer's state", "the moments reset with the gradients"),
    mutant("zero_grad_assumes_a_gradient", "adamw_zero_grad", patch("""
        - p.grad = None
        + p.grad.zero_()
    """), before_any_backward, "AttributeError", "p.grad.zero_() on a None gradient"),
    mutant("zero_grad_zeroes_in_place", "adamw_zero_grad", patch("""
        - p.grad = None
        + if p.grad is not None:
        +     p.grad.zero_()
    """), sets_none, "tensor of zeros", "gradients zeroed in place instead of set to None"),
]

VARIANTS = [
    variant("zero_grad_detach_then_none", "adamw_zero_grad", """
        for p in self.params:
            if p.grad is not None:
                p.grad.detach_()
                p.grad = None
    """, "each existing gradient detached, then dropped"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    '`zero_grad` filling the gradients with zeros': ('zero_grad_zeroes_in_place',),
}
