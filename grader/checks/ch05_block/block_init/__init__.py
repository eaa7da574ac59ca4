"""The block's parts: ln_attention, attention, ln_feedforward and feedforward.

The names are part of the contract; the two LayerNorms must be separate objects, and
the block registers exactly the ledger's 4d² + 2df + f + 5d parameters (for the public
check's sizes, a count the kit computed: grader/checks/facts.py).
"""

from __future__ import annotations

from grader.checks._api import Task, check, shown_count
from grader.checks.catalogue import known_class_name
from grader.checks.ch05_block.common import BLOCK_WALK, SIZES
from grader.checks.course import BLOCK_PARTS, config
from grader.checks.facts import known_facts

TASKS = [
    Task("block_init", "model", "TransformerBlock.__init__", "the block's parts"),
]


def probe_block_parts(ns, sizes):
    block = ns.model.TransformerBlock(config(ns, SIZES, **sizes))
    parts = {name: getattr(block, name, None) for name in BLOCK_PARTS}
    return {
        "missing": [name for name, part in parts.items() if part is None],
        "types": {name: type(part).__name__ for name, part in parts.items()},
        "norms_shared": parts["ln_attention"] is not None and parts["ln_attention"] is parts["ln_feedforward"],
        "parameters": sum(p.numel() for p in block.parameters()),
    }


@check("parameter_ledger", 2,
       "the block has ln_attention, attention, ln_feedforward, feedforward (two separate norms) "
       "and 4d² + 2df + f + 5d parameters",
       probe=probe_block_parts, inputs=lambda g: {"sizes": BLOCK_WALK})
def parameter_ledger(out, inputs, expected):
    return block_parts_problem(out, inputs, known_facts(inputs)["ledger"])


def block_parts_problem(out, inputs, ledger):
    """ledger: what 4d² + 2df + f + 5d gives for the block's sizes."""
    # Part names are the contract's; class names only when the grader knows them on its own.
    missing = [name for name in BLOCK_PARTS if name in out["missing"]]
    if missing:
        return f"the block has no attribute(s) {', '.join(missing)}; the names are part of the contract"
    wanted = {"ln_attention": "LayerNorm", "attention": "CausalSelfAttention",
              "ln_feedforward": "LayerNorm", "feedforward": "FeedForward"}
    for name, kind in wanted.items():
        found = out["types"].get(name)
        if found != kind:
            return f"block.{name} should be a {kind}, found {known_class_name(found) or 'an object of another class'}"
    if out["norms_shared"]:
        return "ln_attention and ln_feedforward are one object used twice: each branch needs its own LayerNorm"
    d, f = inputs["sizes"]["d_model"], inputs["sizes"]["d_ff"]
    if out["parameters"] != ledger:
        return (f"the block registers {shown_count(out['parameters'], grouped=False)} parameters; the ledger "
                f"4d² + 2df + f + 5d "
                f"gives {ledger} for d={d}, f={f}")
    return None
