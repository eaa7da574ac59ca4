"""The hidden checks of ch03_positions: TA-only, left out of the student release."""
