"""Chapter 08: AdamW and gradient clipping by hand, padded batches, the training step,
the validation loss per character and the bigram baseline."""

TITLE = "Training: AdamW, clipping, batches, the loop"
