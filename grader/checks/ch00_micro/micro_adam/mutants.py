"""Task micro_adam: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch00_micro.micro_adam import first_step_is_lr, hand_computation
from grader.checks.ch00_micro.micro_adam.hidden import random_steps
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("micro_adam_cosine_decay", "micro_adam", patch("""
        - lr_t = self.lr * (1.0 - self.t / self.total_steps)
        + lr_t = self.lr * 0.5 * (1.0 + math.cos(math.pi * self.t / self.total_steps))
    """), (hand_computation, random_steps), "cosine",
       "a cosine schedule where the lesson's is linear"),
    mutant("adam_no_bias_correction", "micro_adam", patch("""
        - m_hat = self.m[i] / correction1
        - v_hat = self.v[i] / correction2
        + m_hat, v_hat = self.m[i], self.v[i]
    """), (hand_computation, first_step_is_lr), "bias correction",
       "no bias correction"),
    mutant("adam_no_lr_decay", "micro_adam", patch("""
        - p.data -= lr_t * m_hat / (math.sqrt(v_hat) + self.eps)
        + p.data -= self.lr * m_hat / (math.sqrt(v_hat) + self.eps)
    """), hand_computation, "decay", "constant learning rate"),
    mutant("adam_grads_not_reset", "micro_adam", patch("""
        - p.grad = 0.0
    """), hand_computation, "reset", "p.grad not zeroed after the step"),
    mutant("adam_bias_correction_off_by_one", "micro_adam", patch("""
        - correction1 = 1.0 - b1 ** (self.t + 1)
        - correction2 = 1.0 - b2 ** (self.t + 1)

        - m_hat = self.m[i] / correction1
        - v_hat = self.v[i] / correction2
        + m_hat = self.m[i] / (1.0 - b1 ** self.t)
        + v_hat = self.v[i] / (1.0 - b2 ** self.t)
    """), hand_computation, "beta^(t+1)", "1 − β^t with t from 0: division by zero"),
    mutant("adam_rebinds_parameters", "micro_adam", patch("""
        - p.data -= lr_t * m_hat / (math.sqrt(v_hat) + self.eps)
        + self.params[i] = Value(p.data - lr_t * m_hat / (math.sqrt(v_hat) + self.eps))
    """), hand_computation, "did not move",
       "a new Value bound to self.params[i]: the model's own parameters never change"),
    mutant("adam_step_counter_not_advanced", "micro_adam", patch("""
        - self.t += 1
    """), hand_computation, "not advanced", "t stays 0: every step is the first"),
    mutant("adam_moments_not_kept", "micro_adam", patch("""
        - self.m[i] = b1 * self.m[i] + (1.0 - b1) * g
        - self.v[i] = b2 * self.v[i] + (1.0 - b2) * g * g
        - m_hat = self.m[i] / correction1
        - v_hat = self.v[i] / correction2
        + m = (1.0 - b1) * g
        + v = (1.0 - b2) * g * g
        + m_hat = m / correction1
        + v_hat = v / correction2
    """), hand_computation, "start from 0 at every step",
       "the moments computed afresh each step, never accumulated"),
]

VARIANTS = [
    variant("adam_count_first", "micro_adam", """
        self.t += 1
        t = self.t
        lr_t = self.lr * (1 - (t - 1) / self.total_steps)
        for i, p in enumerate(self.params):
            self.m[i] = self.beta1 * self.m[i] + (1 - self.beta1) * p.grad
            self.v[i] = self.beta2 * self.v[i] + (1 - self.beta2) * p.grad ** 2
            m_hat = self.m[i] / (1 - self.beta1 ** t)
            v_hat = self.v[i] / (1 - self.beta2 ** t)
            p.data = p.data - lr_t * m_hat / (v_hat ** 0.5 + self.eps)
            p.grad = 0
    """, "t incremented first, ** 0.5, integer zero grads"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'Grads not reset after an Adam step': ('adam_grads_not_reset',),
}
