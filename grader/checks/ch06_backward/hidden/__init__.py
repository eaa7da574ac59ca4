"""The hidden checks of ch06_backward: TA-only, left out of the student release."""
