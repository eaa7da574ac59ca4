"""The hidden checks of ch08_training: TA-only, left out of the student release."""
