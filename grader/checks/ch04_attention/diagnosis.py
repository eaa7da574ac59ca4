"""How a wrong attention shows in what it returns or does: the softmax weights it keeps
in self.last_attention, the shape of the cache it returns, and the axis its torch.cat
joined the cached keys along (logged in the sandbox, so that a cache joined along the
wrong axis can be named even when it crashes). Used by attention.py's probes and judges.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

from grader.checks._api import constant, own, shown_shape

AXIS_NAMES = {0: "the batch axis", 1: "the heads axis", 2: "the time axis", 3: "the feature axis"}


class CatLog(TorchFunctionMode):
    """Records every torch.cat in the student's forward: axis and input shapes, so
    that a cache joined along the wrong axis can be named even when it crashes; and
    the shapes each masked_fill or torch.where was given (`masks`), so that a causal
    mask built for T keys, met by scores over T_past + T, can be named too."""

    def __init__(self):
        super().__init__()
        self.calls = []
        self.masks = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in ("cat", "concat", "concatenate"):
            try:
                tensors = args[0] if args else kwargs.get("tensors")
                dim = args[1] if len(args) > 1 else kwargs.get("dim", kwargs.get("axis", 0))
                self.calls.append({"dim": int(dim), "shapes": [list(t.shape) for t in tensors]})
            except Exception:  # noqa: BLE001 - logging must never change what the code does
                pass
        elif name in ("masked_fill", "masked_fill_", "where"):
            try:
                self.masks.append([list(a.shape) for a in [*args, *kwargs.values()][:2] if isinstance(a, torch.Tensor)])
            except Exception:  # noqa: BLE001 - logging must never change what the code does
                pass
        return func(*args, **kwargs)


def crash_after_the_join(calls, past_shape, raised: str) -> "str | None":
    """The explanation of a crash once the cached keys were joined along time, as they should be."""
    if past_shape and any(len(call["shapes"]) == 2 and call["shapes"][0] == list(past_shape) and call["dim"] % 4 == 2
                          for call in calls):
        return (f"raised {raised} after joining the cached keys along the time axis: what comes after the join "
                f"(the scores, the causal mask, the weights) must span all T_past + T keys")
    return None


def mask_without_the_cache(masks, new: int, past: int) -> "str | None":
    """The explanation when a causal mask of T × T positions met scores over the T_past + T
    keys (a mask sliced as attention without a cache slices it: tril[:T, :T])."""
    total = past + new
    if not past or not masks:
        return None
    for shapes in masks:
        tails = [shape[-2:] for shape in shapes if len(shape) >= 2]
        if [new, new] in tails and [new, total] in tails:
            return (f"the causal mask covers {new} × {new} positions (T × T), but with {past} cached tokens the scores "
                    f"are {new} × {total}, T × (T_past + T): build the mask over every key, shifted by T_past, so new "
                    f"token t sees keys 0 … T_past + t")
    return None


def wrong_cache_axis(calls, past_shape) -> "str | None":
    """The explanation when a cat that joins the cached keys used an axis other than time."""
    for call in calls:
        if len(call["shapes"]) == 2 and call["shapes"][0] == list(past_shape) and len(past_shape) == 4:
            axis = call["dim"] % 4
            if axis != 2:
                return (f"the cache is concatenated along {AXIS_NAMES[axis]} (dim {own(call['dim'])}); keys and "
                        f"values are [B, h, T, d_h], so the cached and the new ones join along the time axis, "
                        f"dim {constant(2)}")
    return None


def cache_joined_new_first(calls, past: int, new: int) -> "str | None":
    """The explanation when a cat along time put this call's tokens before the cached ones
    (told apart by their lengths, so only where past != new)."""
    reversed_joins = [call for call in calls if len(call["shapes"]) == 2 and past != new
                      and all(len(shape) == 4 for shape in call["shapes"]) and call["dim"] % 4 == 2
                      and call["shapes"][0][2] == new and call["shapes"][1][2] == past
                      and call["shapes"][0][:2] == call["shapes"][1][:2]]
    if not reversed_joins:
        return None
    which = "both joins put" if len(reversed_joins) > 1 else "a join puts"
    return (f"the cache's order is reversed: {which} this call's new keys/values first and the cached ones after "
            f"them (torch.cat([new, past], dim=2)); the cache holds the earlier positions, so it comes first, "
            f"torch.cat([past, new], dim=2)")


def present_shape_problem(shape, what, sizes, cats) -> "str | None":
    """What is wrong with the shape of the returned keys or values, given B, h, T_past, T, d_h."""
    B, h, past, n, dh = sizes
    if shape == [B, h, past + n, dh]:
        return None
    if past and past == n and shape == [B, h, n, dh]:
        return (f"the returned {what} hold either only the cached tokens or only this call's: present must hold "
                f"both, the cached ones and this call's new tokens: [B, h, T_past + T, d_h]")
    if past and shape == [B, h, n, dh]:
        return (f"the returned {what} hold only this call's tokens; present must hold the cached ones too: "
                f"[B, h, T_past + T, d_h]")
    if past and shape == [B, h, past, dh]:
        return (f"the returned {what} hold only the cached tokens; present must add this call's new tokens: "
                f"[B, h, T_past + T, d_h]")
    known = wrong_cache_axis(cats, [B, h, past, dh]) if past else None
    return known or f"the returned {what} have shape {shown_shape(shape)}; present is [B, h, T_past + T, d_h]"


ROW_SUM_TOLERANCE = 4e-6  # a few of float32's steps at 1, over a row of a few dozen keys


def weights_diagnosis(w, past: int = 0, what: str = "self.last_attention") -> "str | None":
    """None when w [B, h, T, past + T] holds causal softmax rows; else what is wrong."""
    if not isinstance(w, torch.Tensor) or w.dim() != 4:
        return f"{what} should be a [B, h, T, T_past + T] tensor of softmax weights"
    T, S = w.shape[-2], w.shape[-1]
    w = w.double()
    query_pos = torch.arange(past, past + T).unsqueeze(1)
    key_pos = torch.arange(S).unsqueeze(0)
    diagonal = (key_pos == query_pos).expand_as(w)
    if torch.isnan(w).any():
        if past == 0 and torch.isnan(w[..., 0, :]).all():
            return f"{what} is NaN in the first row: " + constant(
                "the mask also hides the diagonal, so position 0 has no key left; a position must attend to itself "
                "(hide only the keys after it)")
        return f"{what} contains NaN"
    if torch.isinf(w).any():
        return (f"{what} contains -inf: it holds the masked scores, not the softmax weights; keep the weights "
                f"after the softmax")
    if (w < -1e-12).any():
        return f"{what} has negative entries; softmax weights are never negative (does it hold the scores?)"
    # Rows that sum to 1 to float32's precision are rows of weights: a softmax taken in
    # float32 is named once, by the task's precision check, not here.
    rows_ok = torch.allclose(w.sum(-1), torch.ones_like(w.sum(-1)), atol=ROW_SUM_TOLERANCE, rtol=0)
    if not rows_ok:
        if T == S and torch.allclose(w.sum(-2), torch.ones_like(w.sum(-2)), atol=ROW_SUM_TOLERANCE, rtol=0):
            return ("each row of weights should sum to 1, but the columns do: the softmax is taken over dim -2 "
                    "(the queries); take it over the last axis (the keys)")
        return f"each row of {what} (one query's weights over the keys) should sum to 1"
    later = w[(key_pos > query_pos).expand_as(w)]
    further = w[(key_pos > query_pos + 1).expand_as(w)]
    # keys a query may see but an unshifted mask (key > t) would hide, its own excepted: t < key < past + t
    unshifted = (key_pos < query_pos) & (key_pos > torch.arange(T).unsqueeze(1))
    if past > 0 and unshifted.any() and (w[unshifted.expand_as(w)].abs() < 1e-15).all():
        return ("the causal mask is not shifted by the cache length: new token t sits at position T_past + t "
                "and may attend to every cached key and to itself, but the weights hide them")
    seen_diagonal = w[(diagonal & (query_pos > 0)).expand_as(w)]
    if seen_diagonal.numel() and (seen_diagonal.abs() < 1e-15).all():
        if past > 0 and not unshifted.any():
            return ("the new token gets zero weight on its own key: either the mask also hides the diagonal, or "
                    "it is not shifted by the cache length (new token t sits at position T_past + t and sees "
                    "every cached key and itself)")
        return ("the weights on the diagonal are zero: the mask also hides the diagonal; a position must "
                "attend to itself (hide only the keys after it)")
    if later.numel() and (later.abs() > 1e-12).any():
        if further.numel() and (further.abs() <= 1e-12).all():
            return ("the mask lets the next token through: each position also attends to the one after it "
                    "(an off-by-one mask offset); hide every key after the query's own position")
        if further.numel():
            return ("the weights above the diagonal are not zero: there is no causal mask, so a position attends "
                    "to later positions")
        return ("a position attends to the one after it: the causal mask must hide every key after the "
                "query's own position")
    return None
