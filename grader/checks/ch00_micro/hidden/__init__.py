"""The hidden checks of ch00_micro: TA-only, left out of the student release."""
