"""The hidden checks of ch04_attention: TA-only, left out of the student release."""
