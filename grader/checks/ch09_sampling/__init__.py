"""Chapter 09: one draw (temperature, top-k, a seeded generator) and generation through
the KV cache."""

TITLE = "Sampling with the KV cache"
