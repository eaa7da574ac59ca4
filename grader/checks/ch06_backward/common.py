"""What chapter 06's four tasks share: their rule against autograd, the tolerances,
and the two ways every hand-written gradient is judged.

Every hand-written gradient is compared, in float64, with what autograd gives on the
same forward, and with what each classic mistake gives. A second, gradcheck-style
property asks each gradient to agree with central finite differences of the forward
along a random direction. On the public checks' fixed inputs those gradients and
differences are data the kit computed (grader/checks/facts.py; hidden/oracles.py runs
the forwards, autograd and the differences); the hidden checks compute them in the
grader, never in the sandbox, where the tasks forbid autograd.
"""

from __future__ import annotations

import math

import torch

from grader.checks._api import (
    FLOAT32_STEP, FLOAT32_STEPS, GELU_KERNELS, NORM_KERNELS, compare, figures, first_diagnosis, float32_close,
    float32_verdict, named, off_by, shape_problem, torch_library_except, type_name,
)

NO_AUTOGRAD = ("torch.autograd.grad", "torch.autograd.backward", "torch.Tensor.backward",
               "torch.autograd.functional.vjp", "torch.autograd.functional.jacobian",
               "torch.func.grad", "torch.func.grad_and_value",
               "torch.func.vjp", "torch.func.jacrev", "torch.func.jacfwd")

# At run time: no autograd of any kind, and none of torch's backward kernels.
BY_HAND_OPS = ("*_backward", "*_backward_*") + NORM_KERNELS + GELU_KERNELS
# The lesson's shapes (backward.py): x [..., d], with grad_out shaped as the forward's output.
ANY_LEADING = (("x", "of any leading shape ([..., d])"), ("grad_out", "shaped as the forward's output ([..., d])"))
BY_HAND = dict(no_autograd=True, forbidden_ops=BY_HAND_OPS + torch_library_except())

ATOL, RTOL = 1e-9, 1e-7  # exact up to float64 rounding, any correct algebra
NEAR = dict(atol=1e-8, rtol=1e-6)  # reproducing a known mistake


def random_tensor(g, *shape, scale=1.0, shift=0.0):
    return torch.randn(*shape, generator=g, dtype=torch.float64) * scale + shift


# --------------------------------------------------------------------- judging


def shipped(out):
    return {"grads": [v for v in out] if isinstance(out, (tuple, list)) else out}


def returned_of(out, names: tuple[str, ...], function: str) -> "str | None":
    grads = out["grads"] = [v for v in out["grads"]] if isinstance(out["grads"], list) else out["grads"]
    if len(names) == 1:
        return None if isinstance(grads, torch.Tensor) else f"{names[0]} should be a tensor, got {type_name(grads)}"
    if not isinstance(grads, list) or len(grads) != len(names):
        got = f"{len(grads)} values" if isinstance(grads, list) else type(grads).__name__
        return f"{function} should return ({', '.join(names)}): {len(names)} tensors, got {got}"
    for value, name in zip(grads, names):
        if not isinstance(value, torch.Tensor):
            return f"{name} should be a tensor, got {type_name(value)}"
    return None


def _as_list(out, names):
    return [out["grads"]] if len(names) == 1 else list(out["grads"])


def judge_grads(out, names, function, right, shape_mistakes, value_mistakes, texts, atol=ATOL, rtol=RTOL,
                hidden=False, precision=False):
    """right: the correct gradients; shape_mistakes[name]: [(shape, why)]; value_mistakes[name]:
    {mistake: tensor}, what each mistake gives gradient name, said by texts[name][mistake] (the
    task's mistakes table). The first wrong gradient is diagnosed.
    Hidden checks name the mistake but print no shapes of their inputs. A gradient right to
    float32's precision only is the task's precision check's finding (precision=True: the
    check named matches_autograd); every other check passes it."""
    if problem := returned_of(out, names, function):
        return problem
    float32 = []
    for name, got, want in zip(names, _as_list(out, names), right):
        if tuple(got.shape) != tuple(want.shape):
            found = f"{name} has the wrong shape" if hidden else \
                f"{name} has shape {list(got.shape)}, expected {list(want.shape)}"
            for shape, why in shape_mistakes.get(name, []):
                if tuple(got.shape) == tuple(shape):
                    return f"{found}: {why}"
            return f"{found} (a gradient has the shape of what it is the gradient of)"
        if not torch.isfinite(got.double()).all():
            return f"{name} contains NaN or inf"
        if compare(got, want, atol=atol, rtol=rtol) is None and got.dtype == want.dtype:
            continue
        known = first_diagnosis(got, named(texts.get(name, {}), value_mistakes.get(name, {})), **NEAR, right=want)
        if known:
            return known
        if float32_close(got, want):
            float32.append((name, got, want))
            continue
        return compare(got, want, name, atol=atol, rtol=rtol)
    if float32 and precision:
        _, got, want = max(float32, key=lambda found: off_by(found[1], found[2]))
        listed = [name for name, _, _ in float32]
        what = listed[0] if len(listed) == 1 else f"{', '.join(listed[:-1])} and {listed[-1]}"
        return float32_verdict(what, f"your {function}", "the inputs' dtype (float64 here)", got, want,
                               plural=len(listed) > 1, against="autograd's gradients ")
    return None


def judge_finite_differences(out, names, function, tensors, directions, numeric_values, tolerance=1e-6):
    """gradcheck's idea without autograd: <grad, v> equals the directional derivative, the
    central difference of sum(grad_out * forward) along v in each input (numeric_values)."""
    if problem := returned_of(out, names, function):
        return problem
    for (name, got), tensor, direction, numeric in zip(zip(names, _as_list(out, names)), tensors, directions,
                                                        numeric_values):
        if problem := shape_problem(got, tensor.shape, name):
            return problem
        products = got.double() * direction
        analytic = products.sum().item()
        # A gradient computed in float32 is judged to float32's precision here: the task's
        # precision check names it.
        rounding = FLOAT32_STEPS * FLOAT32_STEP * (abs(numeric) + products.abs().sum().item())
        if not math.isfinite(analytic) or abs(analytic - numeric) > max(tolerance * (1.0 + abs(numeric)), rounding):
            yours, differences = figures(analytic, numeric, least=6)
            return (f"{name} disagrees with central finite differences of the forward along a random "
                    f"direction (your gradient gives {yours}, (f(θ + hv) − f(θ − hv)) / 2h gives "
                    f"{differences}): it is not the gradient of this forward")
    return None


def reduced_shapes(x_shape, what):
    """Shapes a per-feature gradient takes when the batch/time sum is done wrong."""
    shape = tuple(x_shape)
    mistakes = [(shape, f"{what} is not summed over batch and time: the same parameter serves every "
                        "position, so its gradient adds up over all of them")]
    if len(shape) > 2:
        mistakes.append((shape[1:], f"{what} is summed over the first (batch) axis only; sum over batch and time"))
    if len(shape) > 1:
        mistakes.append((shape[:-1], f"{what} is summed over the features; sum over every axis but the last"))
    mistakes.append(((), f"{what} is summed over every axis; keep the feature axis"))
    return mistakes
