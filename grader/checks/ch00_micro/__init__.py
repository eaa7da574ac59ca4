"""Chapter 00: the whole GPT in miniature, on scalar Values in plain Python (micro.py):
the Value operations and backward, RMSNorm and softmax, one attention head, the layer and
forward, the document loss, Adam and sampling."""

TITLE = "The whole GPT in miniature (scalar autograd)"
TASK_MODULES = ("micro_value_add", "micro_value_mul", "micro_value_pow", "micro_value_exp", "micro_value_log",
                "micro_value_relu", "micro_backward", "micro_rmsnorm", "micro_softmax", "micro_attention", "micro_block",
                "micro_forward", "micro_loss", "micro_adam", "micro_sample")
