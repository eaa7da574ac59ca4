"""Chapter 06: backward passes by hand (LayerNorm, GELU, linear, the residual branch),
each compared in float64 with autograd and with finite differences of its forward."""

TITLE = "Backward by hand"
