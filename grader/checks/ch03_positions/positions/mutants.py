"""Task positions: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.ch03_positions.positions import (
    adds_rows, cache_offset, float64_precision, full_context, gradient, input_unchanged, same_rows_per_batch,
    too_long,
)
from grader.mutants import mutant, patch, variant

MUTANTS = [
    mutant("positions_in_float32", "positions", patch("""
        - return hidden + self.weight[past_length : past_length + T]
        + return (hidden.float() + self.weight[past_length : past_length + T].float()).to(hidden.dtype)
    """), float64_precision, "float32", "the sum taken in float32 and cast back"),
    mutant("positions_offset_ignored", "positions", patch("""
        - return hidden + self.weight[past_length : past_length + T]
        + return hidden + self.weight[:T]
    """), cache_offset, "past_length is ignored", "cache offset ignored: rows 0..T-1"),
    mutant("positions_modulo_wrap", "positions", """
        T = hidden.shape[1]
        rows = torch.arange(past_length, past_length + T) % self.weight.shape[0]
        return hidden + self.weight[rows]
    """, too_long, "wrapped", "positions wrap round modulo block_size"),
    mutant("positions_clamped", "positions", """
        T = hidden.shape[1]
        rows = torch.arange(past_length, past_length + T).clamp(max=self.weight.shape[0] - 1)
        return hidden + self.weight[rows]
    """, too_long, "clamped", "positions past the table reuse the last row"),
    mutant("positions_no_length_check", "positions", """
        T = hidden.shape[1]
        return hidden + self.weight[past_length : past_length + T]
    """, too_long, "reached torch", "no check: torch's broadcasting error"),
    mutant("positions_check_off_by_one", "positions", patch("""
        - if past_length + T > block_size:
        + if past_length + T >= block_size:
    """), full_context, "off by one", "a full context (== block_size) rejected"),
    mutant("positions_flattened_batch", "positions", """
        B, T, _ = hidden.shape
        if past_length + T > self.weight.shape[0]:
            raise ValueError(f"position {past_length + T - 1} is past block_size {self.weight.shape[0]}")
        rows = torch.arange(past_length, past_length + B * T).view(B, T)
        return hidden + self.weight[rows]
    """, (adds_rows, same_rows_per_batch), "flattened",
       "positions run on across the flattened batch"),
    mutant("positions_rows_off_by_one", "positions", patch("""
        - return hidden + self.weight[past_length : past_length + T]
        + return hidden + self.weight[past_length + 1 : past_length + T + 1]
    """), adds_rows, "off by one", "row p + 1 added at position p"),
    mutant("positions_detached", "positions", patch("""
        - return hidden + self.weight[past_length : past_length + T]
        + return hidden + self.weight.detach()[past_length : past_length + T]
    """), gradient, "no gradient", "position rows detached: no gradient"),
    mutant("positions_in_place", "positions", patch("""
        - return hidden + self.weight[past_length : past_length + T]
        + hidden += self.weight[past_length : past_length + T]
        + return hidden
    """), input_unchanged, "in place", "hidden += rows changes the caller's tensor"),
    mutant("positions_assert_length", "positions", """
        T = hidden.shape[1]
        assert past_length + T <= self.weight.shape[0], f"cannot forward {T} tokens after {past_length}"
        return hidden + self.weight[past_length : past_length + T]
    """, too_long, "assert", "the length checked with an assert statement"),
    mutant("positions_own_counter", "positions", """
        T = hidden.shape[1]
        start = getattr(self, "current_position", 0)
        if start + T > self.weight.shape[0]:
            raise ValueError(f"position {start + T - 1} is past block_size {self.weight.shape[0]}")
        self.current_position = start + T
        return hidden + self.weight[start : start + T]
    """, cache_offset, "past_length is ignored",
       "the module counts positions itself across calls instead of reading past_length"),
    mutant("positions_sinusoidal", "positions", """
        T, d = hidden.shape[1], hidden.shape[2]
        if past_length + T > self.weight.shape[0]:
            raise ValueError(f"position {past_length + T - 1} is past block_size {self.weight.shape[0]}")
        position = torch.arange(past_length, past_length + T, dtype=hidden.dtype).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d, 2, dtype=hidden.dtype) * -(math.log(10000.0) / d))
        pe = torch.zeros(T, d, dtype=hidden.dtype)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        return hidden + pe
    """, (adds_rows, gradient), "sine and cosine",
       "the original Transformer's fixed sinusoidal encoding instead of the learned rows"),
]

VARIANTS = [
    variant("positions_arange_unsqueeze", "positions", """
        B, T, d = hidden.shape
        if past_length + T > self.weight.size(0):
            raise ValueError(f"positions {past_length}..{past_length + T - 1} do not fit in block_size "
                             f"{self.weight.size(0)}")
        positions = torch.arange(past_length, past_length + T, device=hidden.device)
        return hidden + self.weight[positions].unsqueeze(0)
    """, "an arange of positions, indexed and unsqueezed to [1, T, d]"),
    variant("positions_narrow_expand", "positions", """
        T, C = hidden.size(1), self.weight.size(0)
        if past_length + T > C:
            raise ValueError("the sequence is too long for block_size " + str(C))
        return hidden + self.weight.narrow(0, past_length, T).expand_as(hidden)
    """, "narrow, then expand to the batch"),
    variant("positions_position_ids_row", "positions", """
        batch, T = hidden.shape[:2]
        if past_length + T > self.weight.shape[0]:
            raise ValueError(f"position {past_length + T - 1} has no row: block_size is {self.weight.shape[0]}")
        position_ids = torch.arange(past_length, past_length + T, dtype=torch.long).unsqueeze(0)
        return hidden + self.weight[position_ids]
    """, "position ids of shape [1, T] (the batch axis broadcast), looked up in the table"),
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {
    'Ignoring `past_length`': ('positions_offset_ignored',),
    'Numbering positions 0 … B·T − 1 across the batch': ('positions_flattened_batch',),
    'Using `%` to wrap positions': ('positions_modulo_wrap',),
    '`>=` where `>` belongs': ('positions_check_off_by_one',),
    'Adding in place (`hidden += …`)': ('positions_in_place',),
    'Reading `self.weight.data`': ('positions_detached',),
    'Checking the length with `assert`': ('positions_assert_length',),
    'Counting positions in the module across calls': ('positions_own_counter',),
    "Adding the original Transformer's fixed sine and cosine encoding": ('positions_sinusoidal',),
}
