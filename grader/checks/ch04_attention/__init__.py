"""Chapter 04: causal multi-head self-attention with a KV cache. The walk-through
B=2, T=3, d=4, h=2 gives Q/K/V [2, 2, 3, 2] and weights [2, 2, 3, 3]."""

TITLE = "Causal multi-head attention with a KV cache"
