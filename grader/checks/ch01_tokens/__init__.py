"""Chapter 01: the character vocabulary with its BOS id, encode/decode, and the
(input, target) training windows."""

TITLE = "Tokens and training windows"
