"""The attention's four projections, made in CausalSelfAttention.__init__.

The checks pin the contract: q_proj, k_proj, v_proj and o_proj are separate bias-free
d×d linear maps, 4d² parameters whatever the number of heads.
"""

from __future__ import annotations

import torch

from grader.checks._api import Task, check, plain_shape, shown_count, shown_shape
from grader.checks.ch04_attention.common import WALK_THROUGH, new_attention
from grader.checks.course import PROJECTIONS

TASKS = [
    Task("attention_init", "model", "CausalSelfAttention.__init__", "the Q/K/V/O projections"),
]


def probe_projections(ns, sizes, more_heads=None):
    module = new_attention(ns, sizes)
    parts = {name: getattr(module, name, None) for name in PROJECTIONS}
    report = {
        "missing": [name for name, part in parts.items() if part is None],
        "with_bias": [name for name, part in parts.items()
                      if part is not None and getattr(part, "bias", None) is not None],
        "shapes": {name: list(part.weight.shape) if isinstance(getattr(part, "weight", None), torch.Tensor) else None
                   for name, part in parts.items()},
        "distinct": len({id(part) for part in parts.values()}),
        "parameters": sum(p.numel() for p in module.parameters()),
    }
    if more_heads:
        report["parameters_more_heads"] = sum(
            p.numel() for p in new_attention(ns, {**sizes, "n_heads": more_heads}).parameters())
    return report


@check("projections", 2,
       "q_proj, k_proj, v_proj, o_proj are separate d×d linear maps without bias: 4d² = 64 parameters for d=4",
       probe=probe_projections, inputs=lambda g: {"sizes": WALK_THROUGH})
def projections(out, inputs, expected):
    d = inputs["sizes"]["d_model"]
    # The names are the contract's, in its order; what the probe reported only picks them.
    missing = [name for name in PROJECTIONS if name in out["missing"]]
    with_bias = [name for name in PROJECTIONS if name in out["with_bias"]]
    if missing:
        return (f"the attention has no attribute(s) {', '.join(missing)}; q_proj, k_proj, v_proj "
                f"and o_proj are part of the contract")
    if with_bias:
        return (f"{', '.join(with_bias)} {'has a bias' if len(with_bias) == 1 else 'have a bias'}: "
                f"Q/K/V/O are linear maps without bias, nn.Linear(d, d, bias=False)")
    if out["distinct"] < 4:
        return "some of q_proj, k_proj, v_proj, o_proj are one object used twice: each needs its own weights"
    for name in PROJECTIONS:
        shape = out["shapes"].get(name)
        if shape is None:
            return f"{name} has no weight tensor: each projection is an nn.Linear(d, d, bias=False)"
        if plain_shape(shape) != [d, d]:
            return (f"{name}.weight has shape {shown_shape(shape)}, expected [{d}, {d}]: each projection maps d "
                    f"features to d")
    if out["parameters"] != 4 * d * d:
        return (f"the attention registers {shown_count(out['parameters'], grouped=False)} parameters; four "
                f"bias-free d×d projections "
                f"give 4d² = {4 * d * d} for d={d}")
    if "parameters_more_heads" in out and out["parameters_more_heads"] != out["parameters"]:
        return "the parameter count changes with the number of heads; it should be 4d² whatever h is"
    return None
