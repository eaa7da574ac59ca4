"""The hidden checks of ch02_embedding: TA-only, left out of the student release."""
