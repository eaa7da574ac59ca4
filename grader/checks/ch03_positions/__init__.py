"""Chapter 03: learned absolute positions, offset by the length of the KV cache."""

TITLE = "Learned absolute positions"
