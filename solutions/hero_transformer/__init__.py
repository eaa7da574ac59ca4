"""hero_transformer: a GPT-style decoder-only transformer, built chapter by chapter."""
