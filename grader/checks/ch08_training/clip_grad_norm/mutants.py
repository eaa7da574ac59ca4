"""Task clip_grad_norm: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch08_training.clip_grad_norm import (
    below_limit_untouched, global_norm, matches_torch, missing_and_shared,
)
from grader.checks.ch08_training.clip_grad_norm.hidden import random_matches_torch
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("clip_norm_asks_for_float32", "clip_grad_norm", patch("""
        - total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g, 2.0) for g in grads]), 2.0)
        + total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g, 2.0, dtype=torch.float32)
        +                                               for g in grads]), 2.0)
    """), matches_torch, "narrower than", "the norm asked for in float32 of float64 gradients"),
    mutant("clip_per_tensor", "clip_grad_norm", """
        total = torch.zeros((), dtype=torch.float64)
        for p in parameters:
            if p.grad is None:
                continue
            norm = torch.linalg.vector_norm(p.grad)
            total = torch.sqrt(total**2 + norm**2)
            if norm > max_norm:
                p.grad.mul_(max_norm / (norm + 1e-6))
        return total
    """, (global_norm, matches_torch), "its own norm",
       "each tensor clipped on its own"),
    mutant("clip_always_scales", "clip_grad_norm", patch("""
        - scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        + scale = max_norm / (total + 1e-6)
    """), (below_limit_untouched, matches_torch), "below max_norm",
       "scales even below max_norm"),
    mutant("clip_returns_norm_after", "clip_grad_norm", patch("""
        - return total
        + return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    """), matches_torch, "after clipping", "returns the norm after clipping"),
    mutant("clip_reads_generator_twice", "clip_grad_norm", """
        unique = {id(p): p for p in parameters if p.grad is not None}
        total = torch.sqrt(sum((p.grad**2).sum() for p in unique.values()))
        scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        seen = set()
        for p in parameters:
            if p.grad is not None and id(p) not in seen:
                seen.add(id(p))
                p.grad.mul_(scale)
        return total
    """, missing_and_shared, "generator", "a generator of parameters read twice"),
    mutant("clip_torch_loop_with_repeats", "clip_grad_norm", """
        listed = [p for p in ([parameters] if isinstance(parameters, torch.Tensor) else parameters)
                  if p.grad is not None]
        if not listed:
            return torch.tensor(0.0)
        total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in listed]))
        factor = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        for p in listed:
            p.grad.mul_(factor)
        return total
    """, (missing_and_shared, random_matches_torch),
       "counted twice in the norm", "torch's own loop: a repeated tensor counted and scaled twice"),
    mutant("clip_library", "clip_grad_norm", """
        return torch.nn.utils.clip_grad_norm_(list({id(p): p for p in parameters}.values()), max_norm)
    """, matches_torch, "clip_grad_norm_", "torch's clip_grad_norm_"),
    mutant("clip_by_value", "clip_grad_norm", patch("""
        - scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        - for g in grads:
        -     g.mul_(scale.to(g.dtype))
        + for g in grads:
        +     g.clamp_(-max_norm, max_norm)
    """), matches_torch, "by value", "each entry clamped to [-max_norm, max_norm]"),
    mutant("clip_norm_in_float32", "clip_grad_norm", patch("""
        - total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g, 2.0) for g in grads]), 2.0)
        + total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float(), 2.0) for g in grads]), 2.0)
    """), matches_torch, "float32 precision", "the norm computed in float32"),
]

VARIANTS = [
    variant("clip_flattened_with_branch", "clip_grad_norm", """
        unique = []
        for p in ([parameters] if isinstance(parameters, torch.Tensor) else list(parameters)):
            if p.grad is not None and all(p is not q for q in unique):
                unique.append(p)
        if not unique:
            return torch.tensor(0.0)
        total = torch.cat([p.grad.reshape(-1) for p in unique]).pow(2).sum().sqrt()
        if total > max_norm:
            factor = max_norm / (total + 1e-6)
            for p in unique:
                p.grad.mul_(factor)
        return total
    """, "one flattened vector, scaling only in an if branch"),
    variant("clip_parameters_to_vector", "clip_grad_norm", """
        if isinstance(parameters, torch.Tensor):
            parameters = [parameters]
        unique = list({id(p): p for p in parameters if p.grad is not None}.values())
        if not unique:
            return torch.tensor(0.0)
        total = torch.nn.utils.parameters_to_vector([p.grad for p in unique]).norm()
        factor = (max_norm / (total + 1e-6)).clamp(max=1.0)
        for p in unique:
            p.grad.mul_(factor)
        return total
    """, "every gradient entry as one vector (parameters_to_vector), a clamped factor"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'Clipping each tensor on its own': ('clip_per_tensor',),
}
