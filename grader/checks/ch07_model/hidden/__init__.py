"""The hidden checks of ch07_model: TA-only, left out of the student release."""
