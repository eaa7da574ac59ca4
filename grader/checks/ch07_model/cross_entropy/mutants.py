"""Task cross_entropy: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch07_model.cross_entropy import gradient, huge_logits, matches_log_softmax, tiny_probabilities
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("cross_entropy_summed", "cross_entropy", patch("""
        - return -picked.mean()
        + return -picked.sum()
    """), matches_log_softmax, "summed instead of averaged", "loss summed, not averaged"),
    mutant("cross_entropy_log_of_softmax_no_max", "cross_entropy", """
        exps = logits.exp()
        probs = exps / exps.sum(dim=-1, keepdim=True)
        picked = probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        return -picked.log().mean()
    """, huge_logits, "no max subtraction", "log(softmax) without max subtraction"),
    mutant("cross_entropy_one_global_max", "cross_entropy", """
        shifted = logits - logits.max()
        log_probs = shifted - shifted.exp().sum(dim=-1, keepdim=True).log()
        return -log_probs.gather(-1, targets.unsqueeze(-1)).mean()
    """, huge_logits, "whole tensor", "one max for the whole tensor, not each row's"),
    mutant("cross_entropy_wrong_axis", "cross_entropy", """
        shifted = logits - logits.amax(dim=1, keepdim=True)
        log_probs = shifted - shifted.exp().sum(dim=1, keepdim=True).log()
        return -log_probs.gather(-1, targets.unsqueeze(-1)).mean()
    """, matches_log_softmax, "wrong axis", "softmax over time, not the vocabulary"),
    mutant("cross_entropy_detached", "cross_entropy", patch("""
        - logits = logits.reshape(-1, logits.shape[-1])
        + logits = logits.detach().reshape(-1, logits.shape[-1])
    """), gradient, "not connected", "the loss detached from the logits"),
    mutant("cross_entropy_library", "cross_entropy", """
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    """, matches_log_softmax, "torch.nn.functional.cross_entropy", "the library loss"),
    mutant("cross_entropy_log_softmax_method", "cross_entropy", """
        log_probs = logits.log_softmax(dim=-1)
        return -log_probs.gather(-1, targets.unsqueeze(-1)).mean()
    """, matches_log_softmax, "log_softmax", "Tensor.log_softmax does the work"),
    mutant("cross_entropy_log_of_stable_softmax", "cross_entropy", """
        shifted = logits - logits.amax(dim=-1, keepdim=True)
        probs = shifted.exp() / shifted.exp().sum(dim=-1, keepdim=True)
        picked = probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        return -picked.log().mean()
    """, tiny_probabilities, "underflow", "log of a (stable) softmax: underflow to inf"),
    mutant("cross_entropy_distribution_log_prob", "cross_entropy", """
        flat, wanted = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
        return -torch.distributions.Categorical(logits=flat).log_prob(wanted).mean()
    """, matches_log_softmax, "torch.distributions.categorical",
       "a distribution's log_prob computes the loss"),
    mutant("cross_entropy_float32", "cross_entropy", patch("""
        - logits = logits.reshape(-1, logits.shape[-1])
        + logits = logits.float().reshape(-1, logits.shape[-1])  # the loss in float32
    """), matches_log_softmax, "float32 precision", "computed in float32"),
    mutant("cross_entropy_rows_summed_then_averaged", "cross_entropy", """
        shifted = logits - logits.amax(dim=-1, keepdim=True)
        log_probs = shifted - shifted.exp().sum(dim=-1, keepdim=True).log()
        picked = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        return -(picked.sum(dim=-1).mean() if picked.dim() > 1 else picked.mean())
    """, matches_log_softmax, "averages over the rows only",
       "each row's positions summed, the rows averaged"),
]

VARIANTS = [
    variant("cross_entropy_gather_logsumexp", "cross_entropy", """
        log_norm = torch.logsumexp(logits, dim=-1)
        target_logit = torch.gather(logits, -1, targets.unsqueeze(-1)).squeeze(-1)
        return (log_norm - target_logit).mean()
    """, "torch.gather and torch.logsumexp, no flattening"),
    variant("cross_entropy_one_hot", "cross_entropy", """
        top = logits.max(dim=-1, keepdim=True).values
        log_probs = logits - top - torch.log(torch.exp(logits - top).sum(dim=-1, keepdim=True))
        one_hot = torch.nn.functional.one_hot(targets, logits.shape[-1]).to(log_probs.dtype)
        return -(one_hot * log_probs).sum(dim=-1).mean()
    """, "a one-hot mask instead of indexing"),
    variant("cross_entropy_shifted_logsumexp_sum_over_count", "cross_entropy", """
        z = logits.reshape(-1, logits.size(-1))
        z = z - z.max(dim=1, keepdim=True)[0]
        nll = torch.logsumexp(z, dim=1) - z[torch.arange(z.size(0)), targets.reshape(-1)]
        return nll.sum() / nll.numel()
    """, "max-shifted logits, logsumexp minus the target's, sum / count"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'A loss that sums instead of averaging': ('cross_entropy_summed',),
    'exponentiates raw logits': ('cross_entropy_log_of_softmax_no_max',),
    'The log of a softmax': ('cross_entropy_log_of_stable_softmax',),
    'Logits or the loss switched to float32': ('cross_entropy_float32',),
}
