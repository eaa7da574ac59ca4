"""Task bigram_baseline: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch08_training.bigram_baseline import by_hand, cropped_and_smoothed
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("bigram_no_kv_in_denominator", "bigram_baseline", patch("""
        - log_probs = torch.log((counts + smoothing) / (counts.sum(dim=1, keepdim=True) + smoothing * V))
        + log_probs = torch.log((counts + smoothing) / (counts.sum(dim=1, keepdim=True) + smoothing))
    """), by_hand, "k·V", "add-k without k·V in the denominator"),
    mutant("bigram_in_bits", "bigram_baseline", patch("""
        - log_probs = torch.log((counts + smoothing) / (counts.sum(dim=1, keepdim=True) + smoothing * V))
        + log_probs = torch.log2((counts + smoothing) / (counts.sum(dim=1, keepdim=True) + smoothing * V))
    """), by_hand, "bits", "log2 instead of ln"),
    mutant("bigram_ignores_block_size", "bigram_baseline", patch("""
        - inputs, targets = training_windows(ids, block_size or len(ids))
        + inputs, targets = ids[:-1], ids[1:]
    """), (by_hand, cropped_and_smoothed), "block_size",
       "every pair scored, block_size ignored"),
    mutant("bigram_counts_validation_too", "bigram_baseline", patch("""
        - for a, b in pairs(train_docs):
        + for a, b in pairs([*train_docs, *val_docs]):
    """), (by_hand, cropped_and_smoothed), "validation names",
       "the validation names counted with the training names"),
    mutant("bigram_drops_opening_bos", "bigram_baseline", patch("""
        - ids = tokenizer.encode_document(doc)
        + ids = tokenizer.encode_document(doc)[1:]
    """), (by_hand, cropped_and_smoothed),
       "no transition from BOS", "the opening BOS left out of every document"),
    mutant("bigram_counts_in_float32", "bigram_baseline", patch("""
        - counts = torch.zeros((V, V), dtype=torch.float64)
        + counts = torch.zeros((V, V))
    """), by_hand, "float32 precision", "counts in torch.zeros' default float32"),
]

VARIANTS = [
    variant("bigram_with_dicts", "bigram_baseline", """
        from collections import Counter

        def pairs(docs):
            out = []
            for doc in docs:
                ids = tokenizer.encode_document(doc)
                n = len(ids) - 1 if block_size is None else min(block_size, len(ids) - 1)
                out += list(zip(ids[:n], ids[1 : n + 1]))
            return out

        counts = Counter(pairs(train_docs))
        totals = Counter(a for a, _ in pairs(train_docs))
        V = tokenizer.vocab_size
        scored = pairs(val_docs)
        nll = [-math.log((counts[(a, b)] + smoothing) / (totals[a] + smoothing * V)) for a, b in scored]
        return sum(nll) / len(nll)
    """, "Counter of pairs and math.log, no tensors"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'Working in float32': ('bigram_counts_in_float32',),
}
