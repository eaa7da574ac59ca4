"""Task train_loop: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch08_training.train_loop import (
    every_parameter_trains, fresh_clipped_gradients, returns_loss_and_norm,
)
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("train_step_no_zero_grad", "train_loop", patch("""
        - optimizer.zero_grad()
    """), (fresh_clipped_gradients, returns_loss_and_norm), "accumulate",
       "no zero_grad: gradients pile up"),
    mutant("train_step_step_before_backward", "train_loop", patch("""
        + optimizer.step()
          loss.backward()
        - optimizer.step()
    """), (every_parameter_trains, fresh_clipped_gradients),
       "before optimizer.step()", "optimizer.step() before backward()"),
    mutant("train_step_zero_grad_after_backward", "train_loop", patch("""
        - optimizer.zero_grad()

        - optimizer.step()
        + optimizer.zero_grad()  # a clean slate for the step
        + optimizer.step()
    """), (every_parameter_trains, fresh_clipped_gradients),
       "zero_grad() ran after loss.backward()", "gradients cleared between backward and step"),
    mutant("train_step_loss_after_update", "train_loop", patch("""
        - return loss.item(), float(norm)
        + with torch.no_grad():
        +     after = masked_loss(model(inputs)[0], targets, mask)
        + return after.item(), float(norm)
    """), returns_loss_and_norm, "after the update", "returns the loss after the update"),
    mutant("train_step_clips_after_step", "train_loop", patch("""
        - optimizer.step()

        + optimizer.step()
          if max_norm is not None:
    """), fresh_clipped_gradients, "not clipped", "clipping after the step"),
    mutant("train_step_returns_tensors", "train_loop", patch("""
        - return loss.item(), float(norm)
        + return loss.detach(), norm
    """), returns_loss_and_norm, "floats", "tensors returned instead of floats"),
    mutant("train_step_loss_over_every_position", "train_loop", patch("""
        - loss = masked_loss(logits, targets, mask)
        + loss = cross_entropy(logits, targets)
    """), returns_loss_and_norm, "padded positions", "the loss scores the padding too"),
]

VARIANTS = [
    variant("train_step_zero_grad_at_the_end", "train_loop", """
        logits = model(inputs)[0]
        loss = masked_loss(logits, targets, mask)
        loss.backward()
        grads = [p.grad for p in optimizer.params if p.grad is not None]
        norm = torch.sqrt(sum((g**2).sum() for g in grads))
        if max_norm is not None:
            clip_grad_norm(optimizer.params, max_norm)
        optimizer.step()
        optimizer.zero_grad()
        return float(loss), norm.item()
    """, "the gradients cleared after the step instead of before the forward"),
    variant("train_step_model_zero_grad", "train_loop", """
        model.zero_grad(set_to_none=True)
        logits = model(inputs)[0]
        loss = masked_loss(logits, targets, mask)
        loss.backward()
        norm = clip_grad_norm(optimizer.params, float("inf") if max_norm is None else max_norm)
        optimizer.step()
        return loss.item(), norm.item()
    """, "the model's own zero_grad(set_to_none=True), an infinite max_norm for no clipping"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'No `zero_grad`': ('train_step_no_zero_grad',),
}
