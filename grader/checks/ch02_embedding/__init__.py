"""Chapter 02: the token embedding."""

TITLE = "Token embedding"
