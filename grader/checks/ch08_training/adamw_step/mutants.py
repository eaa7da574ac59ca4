"""Task adamw_step: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch08_training.adamw_step import decoupled_decay, first_step, matches_torch, skipped_steps
from grader.checks.ch08_training.adamw_step.hidden import random_matches_torch
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("adamw_no_bias_correction", "adamw_step", patch("""
        - denom = (v.sqrt() / math.sqrt(bias_correction2)).add_(self.eps)
        - p.addcdiv_(m, denom, value=-self.lr / bias_correction1)
        + denom = v.sqrt().add_(self.eps)
        + p.addcdiv_(m, denom, value=-self.lr)
    """), (first_step, matches_torch), "bias correction",
       "no bias correction"),
    mutant("adamw_coupled_weight_decay", "adamw_step", patch("""
        - grad = p.grad
        + grad = p.grad + self.weight_decay * p
        - p.mul_(1.0 - self.lr * self.weight_decay)
    """), (decoupled_decay, matches_torch), "L2",
       "weight decay added to the gradient (Adam + L2)"),
    mutant("adamw_vectors_not_decayed", "adamw_step", patch("""
        - p.mul_(1.0 - self.lr * self.weight_decay)
        + if p.dim() >= 2:
        +     p.mul_(1.0 - self.lr * self.weight_decay)
    """), (decoupled_decay, matches_torch), "fewer than two axes",
       "biases and gains left out of the decay (GPT-2's parameter groups)"),
    mutant("adamw_eps_inside_sqrt", "adamw_step", patch("""
        - denom = (v.sqrt() / math.sqrt(bias_correction2)).add_(self.eps)
        + denom = (v / bias_correction2 + self.eps).sqrt()
    """), matches_torch, "inside the square root", "eps inside the square root"),
    mutant("adamw_betas_swapped", "adamw_step", patch("""
        - beta1, beta2 = self.betas
        + beta2, beta1 = self.betas
    """), matches_torch, "swapped", "beta1 and beta2 swapped"),
    mutant("adamw_decay_after_update", "adamw_step", patch("""
        - p.mul_(1.0 - self.lr * self.weight_decay)
          p.addcdiv_(m, denom, value=-self.lr / bias_correction1)
        + p.mul_(1.0 - self.lr * self.weight_decay)
    """), matches_torch, "after the Adam update", "decay applied after the update"),
    mutant("adamw_moments_not_kept", "adamw_step", patch("""
        - m.mul_(beta1).add_(grad, alpha=1.0 - beta1)
        - v.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
        + m = (1.0 - beta1) * grad
        + v = (1.0 - beta2) * grad * grad
    """), matches_torch, "not kept", "fresh m and v every step"),
    mutant("adamw_one_global_step_count", "adamw_step", patch("""
          beta1, beta2 = self.betas
        + self.t = getattr(self, 't', 0) + 1
        - t = self.steps[i]
        + t = self.t
    """), (skipped_steps, random_matches_torch), "shared by all parameters",
       "one global t"),
    mutant("adamw_not_in_place", "adamw_step", patch("""
        - p.mul_(1.0 - self.lr * self.weight_decay)
        + p = p * (1.0 - self.lr * self.weight_decay)
        - p.addcdiv_(m, denom, value=-self.lr / bias_correction1)
        + p = p - self.lr / bias_correction1 * m / denom
    """), (first_step, matches_torch), "in place",
       "the update assigned to a local name"),
    mutant("adamw_steps_a_copy", "adamw_step", patch("""
        - p.mul_(1.0 - self.lr * self.weight_decay)
        + p = p.detach().clone()  # a working copy: every update below lands on it
        + p.mul_(1.0 - self.lr * self.weight_decay)
    """), (first_step, matches_torch), "did not move",
       "the update applied to a copy of the parameter"),
    mutant("adamw_rebinds_held_parameter", "adamw_step", patch("""
        - p.mul_(1.0 - self.lr * self.weight_decay)
        + p = p * (1.0 - self.lr * self.weight_decay)
        - p.addcdiv_(m, denom, value=-self.lr / bias_correction1)
        + self.params[i] = p - self.lr / bias_correction1 * m / denom
    """), (first_step, matches_torch), "now holds a new tensor",
       "the updated value stored in self.params[i] instead of written into the parameter"),
    mutant("adamw_library", "adamw_step", """
        if not hasattr(self, "_inner"):
            self._inner = torch.optim.AdamW(self.params, lr=self.lr, betas=self.betas, eps=self.eps,
                                            weight_decay=self.weight_decay)
        self._inner.param_groups[0]["lr"] = self.lr
        self._inner.step()
    """, matches_torch, "torch.optim.AdamW", "torch.optim.AdamW does the work"),
    mutant("adamw_step_sparse_adam", "adamw_step", """
        beta1, beta2 = self.betas
        functional = getattr(torch.optim, "_functional")
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            self.steps[i] += 1
            p.mul_(1.0 - self.lr * self.weight_decay)
            functional.sparse_adam([p], [p.grad.to_sparse()], [self.exp_avg[i]], [self.exp_avg_sq[i]], [self.steps[i]],
                                   eps=self.eps * math.sqrt(1.0 - beta2 ** self.steps[i]), beta1=beta1, beta2=beta2,
                                   lr=self.lr, maximize=False)
    """, matches_torch, "torch.optim._functional", "torch's sparse Adam does the step"),
    mutant("adamw_step_float32_hyperparameters", "adamw_step", """
        lr = torch.tensor(self.lr, dtype=torch.float32)
        decay = torch.tensor(self.weight_decay, dtype=torch.float32)
        beta1, beta2 = (torch.tensor(b, dtype=torch.float32) for b in self.betas)
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            self.steps[i] += 1
            t = self.steps[i]
            p.mul_(1 - lr * decay)
            m, v = self.exp_avg[i], self.exp_avg_sq[i]
            m.lerp_(p.grad, 1 - beta1)
            v.lerp_(p.grad.square(), 1 - beta2)
            denom = (v / (1 - beta2**t)).sqrt() + self.eps
            p.add_(m / denom * (-lr / (1 - beta1**t)))
    """, matches_torch, "float32 precision", "hyper-parameters held as float32 tensors"),
    mutant("adamw_step_float32_working_copy", "adamw_step", """
        beta1, beta2 = self.betas
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            self.steps[i] += 1
            t = self.steps[i]
            g, w = p.grad.float(), p.detach().float()  # the update worked out in float32
            m = self.exp_avg[i].float().mul_(beta1).add_(g, alpha=1 - beta1)
            v = self.exp_avg_sq[i].float().mul_(beta2).addcmul_(g, g, value=1 - beta2)
            self.exp_avg[i].copy_(m)
            self.exp_avg_sq[i].copy_(v)
            m_hat, v_hat = m / (1 - beta1**t), v / (1 - beta2**t)
            w -= self.lr * (m_hat / (v_hat.sqrt() + self.eps) + self.weight_decay * w)
            p.copy_(w)
    """, matches_torch, "float32 precision", "the update computed on a float32 copy"),
    mutant("adamw_step_eps_before_correction", "adamw_step", patch("""
        - denom = (v.sqrt() / math.sqrt(bias_correction2)).add_(self.eps)
        - p.addcdiv_(m, denom, value=-self.lr / bias_correction1)
        + step_size = self.lr * math.sqrt(bias_correction2) / bias_correction1
        + p.addcdiv_(m, v.sqrt().add_(self.eps), value=-step_size)
    """), (first_step, matches_torch), "before the bias correction",
       "eps added to sqrt(v) before the bias correction"),
    mutant("adamw_step_decay_after_eps_before_correction", "adamw_step", patch("""
        - p.mul_(1.0 - self.lr * self.weight_decay)

        - denom = (v.sqrt() / math.sqrt(bias_correction2)).add_(self.eps)
        - p.addcdiv_(m, denom, value=-self.lr / bias_correction1)
        + step_size = self.lr * math.sqrt(bias_correction2) / bias_correction1
        + p.addcdiv_(m, v.sqrt().add_(self.eps), value=-step_size)
        + p.add_(p, alpha=-self.lr * self.weight_decay)
    """), matches_torch, "decay comes after the update",
       "eps before the bias correction and the decay after the update, at once"),
]

VARIANTS = [
    variant("adamw_step_out_of_place_then_copy", "adamw_step", """
        b1, b2 = self.betas
        for i, p in enumerate(self.params):
            g = p.grad
            if g is None:
                continue
            self.steps[i] = t = self.steps[i] + 1
            decayed = p * (1 - self.lr * self.weight_decay)
            self.exp_avg[i].copy_(b1 * self.exp_avg[i] + (1 - b1) * g)
            self.exp_avg_sq[i].copy_(b2 * self.exp_avg_sq[i] + (1 - b2) * g * g)
            m_hat = self.exp_avg[i] / (1 - b1**t)
            v_hat = self.exp_avg_sq[i] / (1 - b2**t)
            p.copy_(decayed - self.lr * m_hat / (torch.sqrt(v_hat) + self.eps))
    """, "the formulas out of place, written back with copy_"),
    variant("adamw_step_lerp_and_addcdiv", "adamw_step", """
        beta1, beta2 = self.betas
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            self.steps[i] += 1
            t = self.steps[i]
            m, v = self.exp_avg[i], self.exp_avg_sq[i]
            m.lerp_(p.grad, 1 - beta1)
            v.mul_(beta2).add_(p.grad.square(), alpha=1 - beta2)
            p.mul_(1 - self.lr * self.weight_decay)
            step_size = self.lr / (1 - beta1**t)
            denom = v.div(1 - beta2**t).sqrt_().add_(self.eps)
            p.addcdiv_(m, denom, value=-step_size)
    """, "torch.lerp_ for m, in-place addcdiv_ for the update"),
    variant("adamw_step_decay_inside_the_update", "adamw_step", """
        beta1, beta2 = self.betas
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            self.steps[i] += 1
            t = self.steps[i]
            m = self.exp_avg[i].mul_(beta1).add_(p.grad, alpha=1 - beta1)
            v = self.exp_avg_sq[i].mul_(beta2).add_(p.grad * p.grad, alpha=1 - beta2)
            m_hat, v_hat = m / (1 - beta1**t), v / (1 - beta2**t)
            p.sub_(self.lr * (m_hat / (v_hat.sqrt() + self.eps) + self.weight_decay * p))
    """, "decay and Adam in one expression, both from the current p (float64 throughout)"),
    variant("adamw_step_lerp_both_moments", "adamw_step", """
        beta1, beta2 = self.betas
        for i, p in enumerate(self.params):
            g = p.grad
            if g is None:
                continue
            self.steps[i] += 1
            t = self.steps[i]
            p.mul_(1 - self.lr * self.weight_decay)
            self.exp_avg[i].lerp_(g, 1 - beta1)
            self.exp_avg_sq[i].lerp_(g.square(), 1 - beta2)
            denom = (self.exp_avg_sq[i] / (1 - beta2**t)).sqrt() + self.eps
            p.add_(self.exp_avg[i] / denom, alpha=-self.lr / (1 - beta1**t))
    """, "lerp_ for both moments, the step size folded into add_'s alpha"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'Weight decay added to g': ('adamw_coupled_weight_decay',),
    'biases and LayerNorm gains left out of the decay': ('adamw_vectors_not_decayed',),
    'applied after the update': ('adamw_decay_after_update',),
    'one global t for all parameters': ('adamw_one_global_step_count',),
    'Working in float32': ('adamw_step_float32_hyperparameters', 'adamw_step_float32_working_copy',),
}
