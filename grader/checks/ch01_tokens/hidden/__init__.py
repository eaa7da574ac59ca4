"""The hidden checks of ch01_tokens: TA-only, left out of the student release."""
