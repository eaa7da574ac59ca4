# Your copy of the course package. Fill in every part that raises
# NotImplementedError; `make check` tells you how each one is doing.
"""hero_transformer: a GPT-style decoder-only transformer, built chapter by chapter."""
