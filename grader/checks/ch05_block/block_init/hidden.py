"""The hidden checks of grader/checks/ch05_block/block_init/__init__.py."""

from __future__ import annotations

import torch

from grader.checks._api import check
from grader.checks.ch05_block.block_init import block_parts_problem, parameter_ledger, probe_block_parts
from grader.checks.ch05_block.hidden.oracles import block_parameters
from grader.checks.facts import facts_for


@facts_for(parameter_ledger)
def ledger_facts(ref, inputs):
    return {"ledger": block_parameters(inputs["sizes"]["d_model"], inputs["sizes"]["d_ff"])}


def drawn_sizes(g):
    """Sizes drawn for each grading: h = 2 or 4 heads of 4 to 16 features, f = 2d to 4d."""
    heads = 2 * (1 + int(torch.randint(2, (1,), generator=g)))
    d = heads * int(torch.randint(4, 17, (1,), generator=g))
    return {"sizes": {"d_model": d, "n_heads": heads, "d_ff": d * int(torch.randint(2, 5, (1,), generator=g))}}


@check("parameter_ledger_wide", 1, "the ledger holds for sizes drawn for each grading (d, h and f)",
       probe=probe_block_parts, inputs=drawn_sizes, hidden=True)
def parameter_ledger_wide(out, inputs, expected):
    """The public parameter_ledger, for the hidden check above."""
    sizes = inputs["sizes"]
    return block_parts_problem(out, inputs, block_parameters(sizes["d_model"], sizes["d_ff"]))
