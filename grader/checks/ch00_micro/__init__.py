"""Chapter 00: the whole GPT in miniature, on scalar Values in plain Python (micro.py):
the Value operations and backward, RMSNorm and softmax, one attention head, the layer and
forward, the document loss, Adam and sampling."""

TITLE = "The whole GPT in miniature (scalar autograd)"
