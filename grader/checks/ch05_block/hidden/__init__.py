"""The hidden checks of ch05_block: TA-only, left out of the student release."""
