"""Task micro_loss: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch00_micro.micro_loss import ana_mean_nll, window
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("loss_summed", "micro_loss", patch("""
        - return vsum(losses) / n
        + return vsum(losses)
    """), ana_mean_nll, "SUM", "summed, not averaged"),
    mutant("loss_divided_by_len_ids", "micro_loss", patch("""
        - return vsum(losses) / n
        + return vsum(losses) / len(ids)
    """), ana_mean_nll, "len(ids)", "divided by len(ids), not the scored positions"),
    mutant("loss_ignores_the_window", "micro_loss", patch("""
        - for pos in range(n):
        + for pos in range(len(ids) - 1):
        - return vsum(losses) / n
        + return vsum(losses) / (len(ids) - 1)
    """), window, "pairs past the window", "scores every pair, past block_size"),
    mutant("loss_target_is_the_input", "micro_loss", patch("""
        - losses.append(-probs[ids[pos + 1]].log())
        + losses.append(-probs[ids[pos]].log())
    """), ana_mean_nll, "ids[p + 1]", "the target is the input id, not the next one"),
    mutant("loss_keeps_the_previous_cache", "micro_loss", patch("""
        - model.start_sequence()
        + if model.cache is None:
        +     model.start_sequence()
    """), (ana_mean_nll, window), "depends on the first",
       "a sequence is started only when none is open: a second call finds the first one's keys and values"),
    mutant("loss_never_starts_a_sequence", "micro_loss", patch("""
        - model.start_sequence()
    """), (ana_mean_nll, window), "start_sequence",
       "forward called with no sequence open"),
]

VARIANTS = [
    variant("loss_log_sum_exp", "micro_loss", """
        model.start_sequence()
        total = Value(0.0)
        for pos in range(n):
            logits = model.forward(ids[pos], pos)
            top = max(l.data for l in logits)
            log_total = vsum([(l - top).exp() for l in logits]).log() + top
            total = total + (log_total - logits[ids[pos + 1]])
        return total * (1.0 / n)
    """, "cross-entropy as log-sum-exp minus the target logit"),
    variant("loss_reciprocal_times_sum", "micro_loss", """
        model.start_sequence()
        losses = []
        for pos in range(n):
            probs = softmax(model.forward(ids[pos], pos))
            losses.append(-probs[ids[pos + 1]].log())
        return (1 / n) * sum(losses, Value(0))
    """, "(1 / n) times Python's sum of the position losses"),
]
