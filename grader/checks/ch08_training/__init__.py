"""Chapter 08: AdamW and gradient clipping by hand, padded batches, the training step,
the validation loss per character and the bigram baseline."""

TITLE = "Training: AdamW, clipping, batches, the loop"
TASK_MODULES = ("adamw_init", "adamw_step", "adamw_zero_grad", "clip_grad_norm", "make_batch", "train_loop",
                "evaluate", "bigram_baseline")
