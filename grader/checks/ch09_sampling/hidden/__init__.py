"""The hidden checks of ch09_sampling: TA-only, left out of the student release."""
