"""Chapter 07: the full model: cross-entropy, the parameter ledger, TransformerLM's parts
and its forward pass (with the KV cache across every block)."""

TITLE = "The full language model"
