"""Chapter 05: LayerNorm, exact GELU, the feed-forward network and the pre-LN block."""

TITLE = "LayerNorm, GELU, feed-forward, pre-LN block"
