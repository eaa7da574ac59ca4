"""Chapter 08: AdamW and gradient clipping by hand, padded batches, the training step,
the validation loss per character and the bigram baseline.

The optimizer is compared with AdamW written out here (hand_adamw, proven equal to
torch.optim.AdamW by tests/test_grader_oracles.py) and the clipping with
torch.nn.utils.clip_grad_norm_, both run in the grader on the same parameters and
gradients the probe was given: the sandbox only applies the student's code and reports
what it did.
"""

from __future__ import annotations

import copy
import math

import torch

from grader.checks._api import Task, check, exception_name, compare, matches, shape_problem, try_call

CHAPTER, TITLE = "08", "Training: AdamW, clipping, batches, the loop"

TASKS = [
    Task("adamw_init", "train", "AdamW.__init__", "AdamW's parameters and state"),
    Task("adamw_step", "train", "AdamW.step", "one AdamW update",
         forbidden=("torch.optim.AdamW", "torch.optim.Adam", "torch.optim.adamw.adamw", "torch.optim.adam.adam",
                    "torch.optim._functional.adamw", "torch.optim._functional.adam",
                    "torch._fused_adamw_", "torch._fused_adam_"),
         forbidden_ops=("_fused_*", "_foreach_*")),
    Task("adamw_zero_grad", "train", "AdamW.zero_grad", "forgetting the gradients"),
    Task("clip_grad_norm", "train", "clip_grad_norm", "clipping by the global norm",
         forbidden=("torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_norm",
                    "torch.nn.utils.clip_grad.clip_grad_norm_", "torch.nn.utils.clip_grad.clip_grad_norm",
                    "torch.nn.utils.get_total_norm", "torch.nn.utils.clip_grads_with_norm_"),
         forbidden_ops=("_foreach_*",)),
    Task("make_batch", "train", "make_batch", "padded batches with a mask"),
    Task("train_loop", "train", "train_step", "the training step"),
    Task("evaluate", "train", "evaluate", "the loss per scored character"),
    Task("bigram_baseline", "train", "bigram_baseline", "the count-based bigram baseline"),
]

F64 = torch.float64
CLIP_EPS = 1e-6  # max_norm / (norm + 1e-6), as torch.nn.utils.clip_grad_norm_

# ----------------------------------------------------------------------- helpers
# These run on both sides: in the sandbox to build models and optimizers, and in the
# grader to compute what torch, or a known mistake, would output.

SIZES = dict(vocab_size=7, block_size=6, d_model=8, n_heads=2, n_layers=1, d_ff=16, dropout=0.0)


def _config(ns, **sizes):
    base = dict(SIZES)
    base.update(sizes)
    return ns.model.Config(**base)


def _model(ns, sizes, state=None):
    model = ns.model.TransformerLM(_config(ns, **sizes)).double()
    if state:
        model.load_state_dict({k: v.clone() for k, v in state.items()}, strict=True)
    return model


def random_lm_state(g, sizes, scale=1.0):
    """A state_dict for the contract's module names (chapter 07), weights of a size
    that gives the model something to learn."""
    s = {**SIZES, **sizes}
    V, C, d, f = s["vocab_size"], s["block_size"], s["d_model"], s["d_ff"]
    r = lambda *shape, s=1.0: torch.randn(*shape, generator=g, dtype=F64) * s * scale  # noqa: E731
    state = {"token_embedding.weight": r(V, d), "position_embedding.weight": r(C, d)}
    for i in range(s["n_layers"]):
        p = f"blocks.{i}."
        state.update({p + "ln_attention.weight": 1 + r(d, s=0.3), p + "ln_attention.bias": r(d, s=0.3),
                      p + "attention.q_proj.weight": r(d, d, s=0.5), p + "attention.k_proj.weight": r(d, d, s=0.5),
                      p + "attention.v_proj.weight": r(d, d, s=0.5), p + "attention.o_proj.weight": r(d, d, s=0.5),
                      p + "ln_feedforward.weight": 1 + r(d, s=0.3), p + "ln_feedforward.bias": r(d, s=0.3),
                      p + "feedforward.fc1.weight": r(f, d, s=0.5), p + "feedforward.fc1.bias": r(f, s=0.5),
                      p + "feedforward.fc2.weight": r(d, f, s=0.5), p + "feedforward.fc2.bias": r(d, s=0.5)})
    state.update({"ln_final.weight": 1 + r(d, s=0.3), "ln_final.bias": r(d, s=0.3), "head.weight": r(V, d, s=0.5)})
    return state


def _is_float(value) -> bool:
    return isinstance(value, (float, int)) and not isinstance(value, bool)


def _close(a: float, b: float, tol: float = 1e-9) -> bool:
    return abs(a - b) <= tol * max(1.0, abs(b))


# ===================================================================== AdamW

HYPER = {"lr": 1e-2, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}


def _leaves(initial):
    return [p.clone().requires_grad_(True) for p in initial]


def probe_adamw_trajectory(ns, params, grads, lrs, hyper):
    """Apply the student's AdamW.step to the given gradients; the parameters after every step."""
    leaves = _leaves(params)
    optimizer = ns.train.AdamW(leaves, lr=lrs[0], betas=tuple(hyper["betas"]), eps=hyper["eps"],
                               weight_decay=hyper["weight_decay"])
    trajectory = [[] for _ in leaves]
    for lr, step_grads in zip(lrs, grads):
        optimizer.lr = lr
        for p, g in zip(leaves, step_grads):
            p.grad = None if g is None else g.clone()
        optimizer.step()
        for i, p in enumerate(leaves):
            trajectory[i].append(p.detach().clone())
    return {"trajectory": [torch.stack(t) for t in trajectory],
            "requires_grad": [bool(p.requires_grad) for p in leaves]}


def hand_adamw(params, grads, lrs, hyper, mistake=None):
    """AdamW written out, optionally with one classic mistake, for the diagnoses."""
    beta1, beta2 = hyper["betas"]
    if mistake == "betas_swapped":
        beta1, beta2 = beta2, beta1
    eps, wd = hyper["eps"], hyper["weight_decay"]
    ps = [p.clone() for p in params]
    m = [torch.zeros_like(p) for p in ps]
    v = [torch.zeros_like(p) for p in ps]
    t = [0 for _ in ps]
    trajectory = [[] for _ in ps]
    for step, (lr, step_grads) in enumerate(zip(lrs, grads)):
        for i, g in enumerate(step_grads):
            if g is None:
                if mistake != "missing_as_zero":
                    continue
                g = torch.zeros_like(ps[i])
            t[i] += 1
            tt = step + 1 if mistake == "global_t" else t[i]
            p = ps[i]
            if mistake == "coupled":
                g = g + wd * p
            elif mistake == "decay_without_lr":
                p = p * (1 - wd)
            elif mistake not in ("decay_after", "no_decay"):
                p = p * (1 - lr * wd)
            if mistake == "restarted_moments":
                m[i] = (1 - beta1) * g
                v[i] = (1 - beta2) * g * g
            else:
                m[i] = beta1 * m[i] + (1 - beta1) * g
                v[i] = beta2 * v[i] + (1 - beta2) * g * g
            if mistake == "no_bias_correction":
                m_hat, v_hat = m[i], v[i]
            else:
                m_hat, v_hat = m[i] / (1 - beta1**tt), v[i] / (1 - beta2**tt)
            denom = torch.sqrt(v_hat + eps) if mistake == "eps_inside" else torch.sqrt(v_hat) + eps
            p = p - lr * m_hat / denom
            if mistake == "decay_after":
                p = p * (1 - lr * wd)
            ps[i] = p
        for i, p in enumerate(ps):
            trajectory[i].append(p.clone())
    return [torch.stack(t) for t in trajectory]


ADAMW_MISTAKES = [
    ("no_bias_correction", "there is no bias correction: divide m by (1 - beta1^t) and v by (1 - beta2^t), "
                           "with t the parameter's own step count"),
    ("coupled", "the weight decay is added to the gradient (Adam with L2, coupled); AdamW's decay is decoupled: "
                "p <- p * (1 - lr * weight_decay), applied to p directly, never through m and v"),
    ("eps_inside", "eps is inside the square root; AdamW divides by sqrt(v_hat) + eps"),
    ("betas_swapped", "beta1 and beta2 are swapped: m uses beta1 (the first of betas), v uses beta2"),
    ("restarted_moments", "the moments are not kept from step to step: each parameter needs its own m and v "
                          "(self.exp_avg[i], self.exp_avg_sq[i]), updated in place every step"),
    ("decay_after", "the weight decay is applied after the Adam update; decay first, from the current p"),
    ("decay_without_lr", "the weight decay is not scaled by the learning rate: p <- p * (1 - lr * weight_decay)"),
    ("no_decay", "there is no weight decay: p <- p * (1 - lr * weight_decay) before the update"),
    ("global_t", "the step count t is shared by all parameters; each parameter has its own t, which does not "
                 "advance at a step where its .grad is None"),
    ("missing_as_zero", "a parameter whose .grad is None was updated as if its gradient were zero; skip it "
                        "(no decay, no moment update, its t does not advance)"),
]


def _trajectory_problem(out, inputs, expected_trajectory, mistakes=ADAMW_MISTAKES):
    trajectory = out["trajectory"]
    params, steps = inputs["params"], len(inputs["lrs"])
    for i, (t, p) in enumerate(zip(trajectory, params)):
        if problem := shape_problem(t, (steps, *p.shape), f"parameter {i}'s trajectory"):
            return problem
    if not all(out["requires_grad"]):
        return "a parameter no longer requires grad after step(): update its values in place, keep it a leaf"
    if all(torch.equal(t, p.unsqueeze(0).expand_as(t)) for t, p in zip(trajectory, params)):
        return ("the parameters never changed: update them in place (p.mul_, p.add_, p.addcdiv_, p.copy_ ...); "
                "assigning a new tensor to a name does not change the model's parameter")

    def same(a, b, atol=1e-10, rtol=1e-9):
        return all(matches(x, y, atol=atol, rtol=rtol) for x, y in zip(a, b))

    if same(trajectory, expected_trajectory):
        return None
    for name, why in mistakes:
        wrong = hand_adamw(params, inputs["grads"], inputs["lrs"], inputs["hyper"], mistake=name)
        if same(trajectory, wrong, 1e-9, 1e-7) and not same(wrong, expected_trajectory):
            return why
    for step in range(steps):
        for i, (t, e) in enumerate(zip(trajectory, expected_trajectory)):
            if problem := compare(t[step], e[step], f"parameter {i}", atol=1e-10, rtol=1e-9):
                return f"after step {step + 1} of {steps}, {problem}, compared with torch.optim.AdamW"
    return "the parameters do not follow torch.optim.AdamW"


def judge_adamw_matches_torch(out, inputs, expected):
    # hand_adamw with no mistake is torch.optim.AdamW step for step (tests/test_grader_oracles.py);
    # building a torch.optim.AdamW here would cost the grader ~1 s of start-up.
    oracle = hand_adamw(inputs["params"], inputs["grads"], inputs["lrs"], inputs["hyper"])
    return _trajectory_problem(out, inputs, oracle)


def _schedule(steps, lr, warmup):
    lrs = []
    for step in range(steps):
        if step < warmup:
            lrs.append(lr * (step + 1) / warmup)
        else:
            progress = (step - warmup) / max(1, steps - 1 - warmup)
            lrs.append(lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))))
    return lrs


def _adamw_inputs(g):
    """60 steps on three tensors whose gradients live at different scales (1e-3, 1, 10),
    with a changing learning rate."""
    shapes, scales, steps = [(3, 4), (5,), (2, 2, 2)], [1e-3, 1.0, 10.0], 60
    params = [torch.randn(*s, generator=g, dtype=F64) for s in shapes]
    grads = [[torch.randn(*s, generator=g, dtype=F64) * k + 0.3 * k for s, k in zip(shapes, scales)]
             for _ in range(steps)]
    return {"params": params, "grads": grads, "lrs": _schedule(steps, 1e-2, 5), "hyper": dict(HYPER)}


def _random_adamw_inputs(g):
    """Random shapes, scales and hyper-parameters; some parameters skip some steps."""
    count, steps = 4, 55
    shapes = [tuple(int(n) for n in torch.randint(1, 5, (int(torch.randint(1, 4, (1,), generator=g)),),
                                                  generator=g)) for _ in range(count)]
    scales = [10 ** float(torch.empty(1).uniform_(-3, 1, generator=g)) for _ in range(count)]
    params = [torch.randn(*s, generator=g, dtype=F64) for s in shapes]
    grads = []
    for step in range(steps):
        row = []
        for i, (s, k) in enumerate(zip(shapes, scales)):
            skip = (i == 1 and step % 3 != 0) or (i == 3 and step % 5 == 2)
            row.append(None if skip else torch.randn(*s, generator=g, dtype=F64) * k)
        grads.append(row)
    hyper = {"lr": 0.0, "betas": [float(torch.empty(1).uniform_(0.8, 0.95, generator=g)),
                                  float(torch.empty(1).uniform_(0.95, 0.999, generator=g))],
             "eps": 10 ** float(torch.empty(1).uniform_(-8, -5, generator=g)),
             "weight_decay": float(torch.empty(1).uniform_(0.05, 0.3, generator=g))}
    lr = 10 ** float(torch.empty(1).uniform_(-3, -1.5, generator=g))
    return {"params": params, "grads": grads, "lrs": _schedule(steps, lr, 4), "hyper": hyper}


def _skipping_inputs(g):
    """12 steps on two tensors; the second has no gradient (.grad is None) at steps 2, 3, 5, 8 and 9."""
    shapes, steps = [(3,), (2, 2)], 12
    skipped = {1, 2, 4, 7, 8}
    params = [torch.randn(*s, generator=g, dtype=F64) for s in shapes]
    grads = [[torch.randn(*shapes[0], generator=g, dtype=F64),
              None if step in skipped else torch.randn(*shapes[1], generator=g, dtype=F64) + 0.5]
             for step in range(steps)]
    return {"params": params, "grads": grads, "lrs": [0.05] * steps, "hyper": dict(HYPER, weight_decay=0.1)}


def _first_step_inputs(g):
    params = [torch.randn(4, 3, generator=g, dtype=F64), torch.randn(6, generator=g, dtype=F64)]
    grads = [[torch.randn(4, 3, generator=g, dtype=F64) * 0.01, torch.randn(6, generator=g, dtype=F64) * 5]]
    return {"params": params, "grads": grads, "lrs": [0.1],
            "hyper": {"lr": 0.1, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0}}


def judge_adamw_first_step(out, inputs, expected):
    """Step 1 from m = v = 0: m_hat = g, v_hat = g², so p moves by lr * g / (|g| + eps) ≈ lr * sign(g)."""
    lr, eps = inputs["lrs"][0], inputs["hyper"]["eps"]
    trajectory = out["trajectory"]
    for i, (p, g, t) in enumerate(zip(inputs["params"], inputs["grads"][0], trajectory)):
        if problem := shape_problem(t, (1, *p.shape), f"parameter {i}'s trajectory"):
            return problem
        right = p - lr * g / (g.abs() + eps)
        if matches(t[0], right, atol=1e-12, rtol=1e-10):
            continue
        moved = (t[0] - p).abs()
        if matches(t[0], p, atol=0, rtol=0):
            return ("the parameters did not move on the first step: update them in place (p.add_, p.addcdiv_, "
                    "p.copy_ ...)")
        no_correction = p - lr * (0.1 * g) / (torch.sqrt(0.001 * g * g) + eps)
        if matches(t[0], no_correction, atol=1e-9, rtol=1e-7):
            return ("the first step moves each entry by about 3.16 lr instead of lr: there is no bias correction "
                    "(m_hat = m / (1 - beta1^t), v_hat = v / (1 - beta2^t))")
        return (f"the first step from m = v = 0 should move every entry by lr * g / (|g| + eps), about lr = {lr} "
                f"in the direction of -g; parameter {i} moved by between {moved.min().item():.3g} and "
                f"{moved.max().item():.3g}")
    return None


def _decay_inputs(g):
    steps = 5
    params = [torch.randn(3, 3, generator=g, dtype=F64), torch.randn(4, generator=g, dtype=F64)]
    grads = [[torch.zeros(3, 3, dtype=F64), torch.zeros(4, dtype=F64)] for _ in range(steps)]
    return {"params": params, "grads": grads, "lrs": [0.1] * steps,
            "hyper": {"lr": 0.1, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.5}}


def judge_adamw_decay(out, inputs, expected):
    """With all-zero gradients the Adam part is 0 / (0 + eps) = 0: only the decay acts."""
    lr, wd = inputs["lrs"][0], inputs["hyper"]["weight_decay"]
    factor = 1 - lr * wd
    for i, (p, t) in enumerate(zip(inputs["params"], out["trajectory"])):
        steps = len(inputs["lrs"])
        if problem := shape_problem(t, (steps, *p.shape), f"parameter {i}'s trajectory"):
            return problem
        powers = torch.tensor([factor ** (k + 1) for k in range(steps)], dtype=F64).reshape(-1, *[1] * p.dim())
        if matches(t, p * powers, atol=1e-12, rtol=1e-10):
            continue
        if matches(t, p.expand_as(t), atol=0, rtol=0):
            return ("with zero gradients the parameters did not change: decoupled weight decay must still shrink p "
                    "by (1 - lr * weight_decay) at every step (update p in place, and treat a zero gradient as a "
                    "gradient, not as a missing one)")
        no_lr = torch.tensor([(1 - wd) ** (k + 1) for k in range(steps)], dtype=F64).reshape_as(powers)
        if matches(t, p * no_lr, atol=1e-12, rtol=1e-10):
            return "the weight decay is not scaled by the learning rate: p <- p * (1 - lr * weight_decay)"
        coupled = hand_adamw(inputs["params"], inputs["grads"], inputs["lrs"], inputs["hyper"], mistake="coupled")
        if matches(t, coupled[i], atol=1e-9, rtol=1e-7):
            return ("with zero gradients each entry moved by about lr toward 0: the weight decay went into the "
                    "gradient (Adam with L2, coupled). AdamW's decay is decoupled: p <- p * (1 - lr * "
                    "weight_decay), so zero gradients shrink p by exactly that factor per step")
        return (f"with all-zero gradients, lr = {lr} and weight_decay = {wd}, each step should only shrink p by "
                f"the factor 1 - lr * weight_decay = {factor}")
    return None


# --------------------------------------------------------------- AdamW.__init__


def _held(optimizer, originals):
    held = []
    for p in getattr(optimizer, "params", None) or []:
        held.append(next((j for j, q in enumerate(originals) if q is p), -1))
    return held


def _state_report(optimizer, originals):
    params = list(getattr(optimizer, "params", None) or [])
    report = {"held": _held(optimizer, originals), "count": len(params), "originals": len(originals),
              "has_params": isinstance(getattr(optimizer, "params", None), (list, tuple))}
    for key in ("exp_avg", "exp_avg_sq", "steps"):
        value = getattr(optimizer, key, None)
        report[f"has_{key}"] = value is not None
        report[key] = list(value) if isinstance(value, (list, tuple)) else None
    m, v = report["exp_avg"] or [], report["exp_avg_sq"] or []
    report["aliases"] = [bool(i < len(m) and i < len(v) and (
        m[i] is v[i] or m[i] is p or v[i] is p
        or (isinstance(m[i], torch.Tensor) and isinstance(v[i], torch.Tensor) and m[i].numel()
            and (m[i].data_ptr() == v[i].data_ptr() or m[i].data_ptr() == p.data_ptr()
                 or v[i].data_ptr() == p.data_ptr()))))
        for i, p in enumerate(params)]
    if report["steps"] is not None:
        report["steps"] = [int(s) if isinstance(s, (int, float)) or (isinstance(s, torch.Tensor) and s.numel() == 1)
                           else repr(s) for s in report["steps"]]
    return report


def probe_adamw_init(ns, shapes, order, as_generator):
    originals = [torch.randn(*s, dtype=F64).requires_grad_(True) for s in shapes]
    listed = [originals[i] for i in order]
    optimizer = ns.train.AdamW(iter(listed) if as_generator else listed, lr=1e-3)
    return _state_report(optimizer, originals)


def probe_adamw_init_model(ns, sizes):
    model = _model(ns, sizes)
    model.head.weight = model.token_embedding.weight  # tied: one tensor, two names
    originals = list(model.parameters())
    listed = (p for p in [*model.parameters(), model.head.weight, model.token_embedding.weight])
    optimizer = ns.train.AdamW(listed, lr=1e-3)
    return _state_report(optimizer, originals)


def _first_seen(order):
    seen = []
    for i in order:
        if i not in seen:
            seen.append(i)
    return seen


def judge_adamw_held_once(out, inputs, expected):
    wanted = _first_seen(inputs["order"]) if "order" in inputs else list(range(out["originals"]))
    held = out["held"]
    if not out["has_params"]:
        return "AdamW should keep its parameters in self.params, a list"
    if out["count"] == 0:
        return ("self.params is empty: AdamW must keep the parameters it was given (a generator such as "
                "model.parameters() can be read only once: read it into a list)")
    if -1 in held:
        return "self.params holds tensors that are not the parameters passed in: keep the parameter objects themselves"
    if len(held) > len(set(held)):
        return ("self.params holds a tensor more than once: a shared tensor listed twice must be kept once, "
                "or it is stepped twice per step (compare by identity, e.g. with id(p))")
    if sorted(held) != sorted(wanted):
        return f"self.params holds {len(held)} tensors; there are {len(wanted)} distinct parameters"
    if held != wanted:
        return "self.params should keep the parameters in first-seen order"
    return None


def judge_adamw_state(out, inputs, expected):
    if problem := judge_adamw_held_once(out, inputs, expected):
        return problem
    shapes = [tuple(inputs["shapes"][i]) for i in _first_seen(inputs["order"])]
    for key, what in (("exp_avg", "self.exp_avg (m)"), ("exp_avg_sq", "self.exp_avg_sq (v)")):
        values = out[key]
        if values is None:
            return f"{what} should be a list with one tensor per parameter"
        if len(values) != len(shapes):
            return f"{what} has {len(values)} entries, one per parameter means {len(shapes)}"
        for i, (value, shape) in enumerate(zip(values, shapes)):
            if problem := shape_problem(value, shape, f"{what}[{i}]"):
                return f"{problem}: zeros shaped like parameter {i}"
            if value.dtype != F64:
                return f"{what}[{i}] is {value.dtype}; it should have the parameter's dtype (torch.zeros_like(p))"
            if not torch.equal(value, torch.zeros_like(value)):
                return f"{what}[{i}] should start at zero"
    if any(out["aliases"]):
        return ("m and v (and the parameter) must be separate tensors: self.exp_avg[i], self.exp_avg_sq[i] each "
                "their own torch.zeros_like(p)")
    steps = out["steps"]
    if steps is None or list(steps) != [0] * len(shapes):
        return f"self.steps should be a list of {len(shapes)} zeros, one step count per parameter"
    return None


def judge_adamw_init_model(out, inputs, expected):
    return judge_adamw_held_once(out, inputs, expected)


def probe_adamw_rejects(ns):
    good = torch.zeros(2, dtype=F64, requires_grad=True)
    frozen = torch.zeros(3, dtype=F64)
    return {"frozen": try_call(lambda: ns.train.AdamW([good, frozen]) and None),
            "empty": try_call(lambda: ns.train.AdamW([]) and None),
            "fine": try_call(lambda: ns.train.AdamW([good]) and None)}


def judge_adamw_rejects(out, inputs, expected):
    if "raised" in out["fine"]:
        return f"AdamW([p]) with p requiring grad raised {exception_name(out['fine']['raised'])}: it must be accepted"
    frozen = out["frozen"]
    if "raised" not in frozen:
        return ("AdamW accepted a tensor that does not require grad: it could never receive a gradient, so "
                "raise a ValueError that says which parameter")
    if frozen["raised"]["type"] not in ("ValueError", "TypeError", "RuntimeError"):
        return (f"a parameter that does not require grad raised {exception_name(frozen['raised'])}; "
                f"raise a ValueError that says what is wrong")
    if not frozen["raised"]["message"].strip():
        return "the error for a parameter that does not require grad has no message: say what is wrong"
    empty = out["empty"]
    if "raised" not in empty:
        return "AdamW([]) was accepted: an empty parameter list is a mistake, raise a ValueError"
    if empty["raised"]["type"] not in ("ValueError", "TypeError", "RuntimeError") or not empty["raised"]["message"]:
        return f"AdamW([]) raised {exception_name(empty['raised'])}; raise a ValueError with a message"
    return None


def _random_init_inputs(g):
    count = 6
    shapes = [[int(n) for n in torch.randint(1, 5, (int(torch.randint(1, 4, (1,), generator=g)),), generator=g)]
              for _ in range(count)]
    order = torch.randperm(count, generator=g).tolist()
    order += torch.randint(0, count, (4,), generator=g).tolist()
    return {"shapes": shapes, "order": order, "as_generator": True}


# --------------------------------------------------------------- AdamW.zero_grad


def probe_zero_grad(ns, params, grads, fresh):
    leaves = _leaves(params)
    optimizer = ns.train.AdamW(leaves, lr=0.1, weight_decay=0.1)
    for p, g in zip(leaves, grads):
        p.grad = g.clone()
    optimizer.step()  # some state to keep
    for p, g in zip(leaves, grads):
        p.grad = g.clone()
    before = [p.detach().clone() for p in leaves]
    state = [(m.clone(), v.clone()) for m, v in zip(optimizer.exp_avg, optimizer.exp_avg_sq)]
    steps = list(optimizer.steps)
    optimizer.zero_grad()
    cleared = [None if p.grad is None else p.grad.detach().clone() for p in leaves]
    unchanged = all(torch.equal(b, p.detach()) for b, p in zip(before, leaves))
    kept = (all(torch.equal(m, m2) and torch.equal(v, v2)
                for (m, v), m2, v2 in zip(state, optimizer.exp_avg, optimizer.exp_avg_sq))
            and list(optimizer.steps) == steps)
    loss = sum((p * f).sum() for p, f in zip(leaves, fresh))
    loss.backward()
    return {"cleared": cleared, "params_unchanged": unchanged, "state_kept": kept,
            "after_backward": [None if p.grad is None else p.grad.detach().clone() for p in leaves]}


def judge_zero_grad(out, inputs, expected):
    for i, g in enumerate(out["cleared"]):
        if g is not None and not (isinstance(g, torch.Tensor) and torch.count_nonzero(g) == 0):
            return ("after zero_grad() a parameter still has its old gradient: set every p.grad to None "
                    "(for p in self.params)")
    if not out["params_unchanged"]:
        return "zero_grad() changed the parameters' values: it must only forget the gradients (p.grad = None)"
    if not out["state_kept"]:
        return "zero_grad() changed the optimizer's state (m, v or the step counts): it must only touch p.grad"
    for i, (g, f) in enumerate(zip(out["after_backward"], inputs["fresh"])):
        if matches(g, inputs["grads"][i] + f, atol=1e-12, rtol=1e-12):
            return ("the next backward() added to the old gradient: zero_grad must clear p.grad itself, not a "
                    "copy of it")
        if not matches(g, f, atol=1e-12, rtol=1e-12):
            return "after zero_grad() and backward() the gradient should be the new one only"
    return None


def judge_zero_grad_none(out, inputs, expected):
    for i, g in enumerate(out["cleared"]):
        if g is None:
            continue
        if isinstance(g, torch.Tensor) and torch.count_nonzero(g) == 0:
            return (f"after zero_grad() parameter {i}'s .grad is a tensor of zeros; set it to None, as the docstring "
                    f"and torch.optim.AdamW do: a zero gradient is still a gradient, so a parameter that gets no new "
                    f"gradient would go on being decayed and moved by step()")
        return f"after zero_grad() parameter {i} still has its old gradient: set every p.grad to None"
    return None


def probe_zero_grad_fresh(ns, shapes):
    leaves = [torch.randn(*s, dtype=F64).requires_grad_(True) for s in shapes]
    optimizer = ns.train.AdamW(leaves, lr=0.1)
    optimizer.zero_grad()
    return {"grads": [None if p.grad is None else p.grad.detach().clone() for p in leaves]}


def judge_zero_grad_fresh(out, inputs, expected):
    for g in out["grads"]:
        if g is not None and not (isinstance(g, torch.Tensor) and torch.count_nonzero(g) == 0):
            return "zero_grad() before any backward() should leave every .grad None (or zero)"
    return None


def _quadratic_loss(leaves, weights, centres):
    return sum((w * (p - c) ** 2).sum() / 2 + (p ** 3).sum() / 30 for p, w, c in zip(leaves, weights, centres))


def probe_zero_grad_loop(ns, params, weights, centres, lr):
    """The usual loop: zero_grad, backward, step, with the certified step."""
    leaves = _leaves(params)
    optimizer = ns.train.AdamW(leaves, lr=lr, weight_decay=0.1)
    trajectory = []
    for w, c in zip(weights, centres):
        optimizer.zero_grad()
        _quadratic_loss(leaves, w, c).backward()
        optimizer.step()
        trajectory.append([p.detach().clone() for p in leaves])
    return {"trajectory": trajectory}


def _adamw_loop(inputs, zero=True):
    """The zero_grad / backward / step loop with default AdamW (betas 0.9/0.999, eps
    1e-8, weight decay 0.1), written out as torch.optim.AdamW computes it; with
    zero=False the gradients pile up the way they do when zero_grad is forgotten."""
    beta1, beta2, eps, wd, lr = 0.9, 0.999, 1e-8, 0.1, inputs["lr"]
    params = [p.clone() for p in inputs["params"]]
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    piled = [torch.zeros_like(p) for p in params]
    trajectory = []
    for t, (w, c) in enumerate(zip(inputs["weights"], inputs["centres"]), start=1):
        leaves = [p.clone().requires_grad_(True) for p in params]
        grads = torch.autograd.grad(_quadratic_loss(leaves, w, c), leaves)
        piled = [a + g for a, g in zip(piled, grads)]
        for i, g in enumerate(grads if zero else piled):
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            step = lr * (m[i] / (1 - beta1**t)) / (torch.sqrt(v[i] / (1 - beta2**t)) + eps)
            params[i] = params[i] * (1 - lr * wd) - step
        trajectory.append([p.clone() for p in params])
    return trajectory


def judge_zero_grad_loop(out, inputs, expected):
    def same(a, b):
        return all(matches(x, y, atol=1e-10, rtol=1e-9) for row_a, row_b in zip(a, b) for x, y in zip(row_a, row_b))

    if len(out["trajectory"]) != len(inputs["weights"]):
        return "the loop did not run every step"
    if same(out["trajectory"], _adamw_loop(inputs)):
        return None
    if same(out["trajectory"], _adamw_loop(inputs, zero=False)):
        return "gradients accumulate across steps: zero_grad() must set every .grad to None"
    return "a zero_grad / backward / step loop does not follow torch.optim.AdamW's: zero_grad must only clear .grad"


def _zero_grad_inputs(g):
    shapes = [(3, 2), (4,)]
    return {"params": [torch.randn(*s, generator=g, dtype=F64) for s in shapes],
            "grads": [torch.randn(*s, generator=g, dtype=F64) for s in shapes],
            "fresh": [torch.randn(*s, generator=g, dtype=F64) for s in shapes]}


def _zero_grad_loop_inputs(g):
    shapes, steps = [(3, 2), (4,), (2, 2)], 6
    return {"params": [torch.randn(*s, generator=g, dtype=F64) for s in shapes],
            "weights": [[torch.rand(*s, generator=g, dtype=F64) + 0.5 for s in shapes] for _ in range(steps)],
            "centres": [[torch.randn(*s, generator=g, dtype=F64) for s in shapes] for _ in range(steps)],
            "lr": 0.05}


# ============================================================== clip_grad_norm


def probe_clip(ns, cases):
    results = []
    for case in cases:
        tensors = []
        for g in case["grads"]:
            shape = g.shape if g is not None else (3,)
            t = torch.zeros(shape, dtype=F64, requires_grad=True)
            t.grad = None if g is None else g.clone()
            tensors.append(t)
        listed = [tensors[i] for i in case["order"]]
        total = ns.train.clip_grad_norm(iter(listed) if case.get("as_generator") else listed, case["max_norm"])
        results.append({"total": total.detach().clone() if isinstance(total, torch.Tensor) else total,
                        "grads": [None if t.grad is None else t.grad.detach().clone() for t in tensors]})
    return results


def torch_clip(case):
    """torch.nn.utils.clip_grad_norm_ on the distinct tensors that have a gradient (the oracle)."""
    used = sorted(set(case["order"]))
    tensors = []
    for i in used:
        g = case["grads"][i]
        if g is not None:
            t = torch.zeros(g.shape, dtype=F64, requires_grad=True)
            t.grad = g.clone()
            tensors.append((i, t))
    total = torch.nn.utils.clip_grad_norm_([t for _, t in tensors], case["max_norm"])
    grads = [None if g is None else g.clone() for g in case["grads"]]
    for i, t in tensors:
        grads[i] = t.grad.clone()
    return total.detach(), grads


def _clip_mistakes(case):
    """(why, total it would return, grads it would leave) for the classic wrong clippings."""
    used = [i for i in sorted(set(case["order"])) if case["grads"][i] is not None]
    g = {i: case["grads"][i] for i in used}
    max_norm = case["max_norm"]
    norms = {i: torch.linalg.vector_norm(g[i]) for i in used}
    total = torch.sqrt(sum(n * n for n in norms.values())) if used else torch.tensor(0.0, dtype=F64)
    counted = [i for i in case["order"] if case["grads"][i] is not None]
    total_dup = torch.sqrt(sum(norms[i] ** 2 for i in counted)) if counted else total
    repeats = {i: case["order"].count(i) for i in used}

    def grads_with(scale_of):
        out = [None if x is None else x.clone() for x in case["grads"]]
        for i in used:
            out[i] = g[i] * scale_of(i)
        return out

    clamp = lambda s: torch.clamp(s, max=1.0)  # noqa: E731
    scale = clamp(max_norm / (total + CLIP_EPS))
    return [
        ("each tensor is clipped by its own norm; clip by the global norm of all gradients together "
         "(sqrt of the sum of every entry squared), one factor for all",
         total, grads_with(lambda i: clamp(max_norm / (norms[i] + CLIP_EPS)))),
        ("the gradients are scaled even though their norm is below max_norm: scale only when the norm exceeds it "
         "(factor min(1, max_norm / (norm + 1e-6)))",
         total, grads_with(lambda i: max_norm / (total + CLIP_EPS))),
        ("the returned value is the squared norm: return sqrt(sum of squares)", total * total,
         grads_with(lambda i: scale)),
        ("the returned norm is taken after clipping; return the norm before clipping",
         torch.minimum(total, total * scale), grads_with(lambda i: scale)),
        ("the factor is max_norm / norm; it is max_norm / (norm + 1e-6), as torch's clip_grad_norm_",
         total, grads_with(lambda i: clamp(max_norm / total))),
        ("a tensor listed twice (a shared weight) is counted twice in the norm; count each tensor once",
         total_dup, grads_with(lambda i: clamp(max_norm / (total_dup + CLIP_EPS)))),
        ("a tensor listed twice (a shared weight) is scaled twice; scale each tensor once",
         total, grads_with(lambda i: scale ** repeats[i])),
        ("each entry is clamped to [-max_norm, max_norm] (clipping by value); clip by the global L2 norm",
         total, [None if x is None else x.clamp(-max_norm, max_norm) for x in case["grads"]]),
    ]


def _grads_match(actual, wanted, atol=1e-12, rtol=1e-12):
    if not isinstance(actual, list) or len(actual) != len(wanted):
        return False
    for a, w in zip(actual, wanted):
        if w is None:
            if a is not None:
                return False
        elif not matches(a, w, atol=atol, rtol=rtol):
            return False
    return True


def _clip_problem(out, inputs, hidden=False):
    for number, (case, result) in enumerate(zip(inputs["cases"], out), start=1):
        total, grads = result["total"], result["grads"]
        right_total, right_grads = torch_clip(case)
        label = f"case {number}" + ("" if hidden else f" (max_norm {case['max_norm']})")
        if not isinstance(total, torch.Tensor):
            if _is_float(total) and _close(float(total), float(right_total), 1e-12):
                return (f"{label}: the norm is returned as a {type(total).__name__}; return it as a 0-d tensor, "
                        f"like torch.nn.utils.clip_grad_norm_")
            return f"{label}: clip_grad_norm should return the total norm as a 0-d tensor, got {type(total).__name__}"
        if total.dim() != 0:
            return f"{label}: the returned norm has shape {list(total.shape)}; it should be a 0-d tensor"
        total_ok = matches(total, right_total, atol=1e-12, rtol=1e-12)
        grads_ok = _grads_match(grads, right_grads)
        if total_ok and grads_ok:
            continue
        for why, wrong_total, wrong_grads in _clip_mistakes(case):
            if (matches(total, wrong_total, atol=1e-12, rtol=1e-10) and _grads_match(grads, wrong_grads, 1e-12, 1e-10)
                    and not (matches(wrong_total, right_total, atol=1e-12, rtol=1e-12)
                             and _grads_match(wrong_grads, right_grads))):
                return f"{label}: {why}"
        if not total_ok:
            return f"{label}: the returned norm differs from the global L2 norm of the gradients before clipping"
        if any(g is None for g, w in zip(grads, right_grads) if w is not None):
            return f"{label}: a gradient was removed; clipping must scale .grad in place"
        if _grads_match(grads, [None if g is None else g for g in case["grads"]]) and float(right_total) > case["max_norm"]:
            if case.get("as_generator"):
                return (f"{label}: with parameters given as a generator (like model.parameters()) nothing was "
                        f"clipped: a generator can be read only once, so make a list of it first")
            return f"{label}: the norm exceeds max_norm but the gradients were not scaled (scale p.grad in place)"
        return (f"{label}: the gradients after clipping differ from torch.nn.utils.clip_grad_norm_'s "
                f"(every gradient times min(1, max_norm / (norm + 1e-6)))")
    return None


def judge_clip(out, inputs, expected):
    return _clip_problem(out, inputs)


def judge_clip_hidden(out, inputs, expected):
    return _clip_problem(out, inputs, hidden=True)


def _clip_cases(g):
    def grads(scale):
        return [torch.randn(3, 4, generator=g, dtype=F64) * scale, torch.randn(4, generator=g, dtype=F64) * scale,
                torch.randn(2, 2, 2, generator=g, dtype=F64) * scale]

    return {"cases": [{"grads": grads(1.0), "order": [0, 1, 2], "max_norm": 0.5},
                      {"grads": grads(1.0), "order": [0, 1, 2], "max_norm": 1.0},
                      {"grads": grads(0.1), "order": [0, 1, 2], "max_norm": 100.0}]}


def _clip_global_inputs(g):
    # norms 3 and 4: global 5; with max_norm 1 each is scaled by 1/5, to 0.6 and 0.8
    return {"cases": [{"grads": [torch.tensor([3.0, 0.0], dtype=F64), torch.tensor([[0.0, 0.0], [4.0, 0.0]], dtype=F64)],
                       "order": [0, 1], "max_norm": 1.0}]}


def _clip_below_inputs(g):
    return {"cases": [{"grads": [torch.randn(5, generator=g, dtype=F64) * 0.1,
                                 torch.randn(2, 3, generator=g, dtype=F64) * 0.1], "order": [0, 1], "max_norm": 10.0}]}


def _clip_missing_shared_inputs(g):
    grads = [torch.randn(4, generator=g, dtype=F64) * 2, None, torch.randn(2, 3, generator=g, dtype=F64) * 2]
    return {"cases": [{"grads": grads, "order": [0, 1, 2, 0], "max_norm": 1.0},
                      {"grads": [x.clone() if x is not None else None for x in grads], "order": [2, 1, 0],
                       "max_norm": 1.0, "as_generator": True}]}


def _random_clip_inputs(g):
    cases = []
    for _ in range(4):
        count = int(torch.randint(2, 5, (1,), generator=g))
        grads = []
        for i in range(count):
            shape = [int(n) for n in torch.randint(1, 5, (int(torch.randint(1, 3, (1,), generator=g)),), generator=g)]
            grads.append(None if i == 1 and count > 2 else torch.randn(*shape, generator=g, dtype=F64)
                         * 10 ** float(torch.empty(1).uniform_(-1, 1, generator=g)))
        order = list(range(count)) + [count - 1]
        max_norm = 10 ** float(torch.empty(1).uniform_(-1, 1, generator=g))
        cases.append({"grads": grads, "order": order, "max_norm": max_norm})
    return {"cases": cases}


# ================================================================= make_batch


def _windows(ids, block_size):
    positions = min(block_size, len(ids) - 1)
    return list(ids[:positions]), list(ids[1:positions + 1])


def right_batch(documents, block_size, pad_id, front=False, no_shift=False, crop=True):
    rows = []
    for ids in documents:
        x, y = _windows(ids, block_size if crop else len(ids))
        if no_shift:
            y = list(x)
        rows.append((x, y))
    T = max(len(x) for x, _ in rows)
    inputs = torch.full((len(rows), T), pad_id, dtype=torch.long)
    targets = torch.full((len(rows), T), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), T), dtype=torch.bool)
    for b, (x, y) in enumerate(rows):
        span = slice(T - len(x), T) if front else slice(0, len(x))
        inputs[b, span] = torch.tensor(x)
        targets[b, span] = torch.tensor(y)
        mask[b, span] = True
    return inputs, targets, mask


def probe_make_batch(ns, documents, block_size, pad_id):
    out = ns.train.make_batch([list(d) for d in documents], block_size, pad_id)
    return {"out": list(out) if isinstance(out, (tuple, list)) else out}


def _batch_problem(out, inputs, show=True):
    documents, block_size, pad_id = inputs["documents"], inputs["block_size"], inputs["pad_id"]
    parts = out["out"]
    if not isinstance(parts, list) or len(parts) != 3:
        return "make_batch should return three tensors: (inputs, targets, mask)"
    got_inputs, got_targets, got_mask = parts
    want_inputs, want_targets, want_mask = right_batch(documents, block_size, pad_id)
    B, T = want_inputs.shape
    for tensor, what in ((got_inputs, "inputs"), (got_targets, "targets"), (got_mask, "mask")):
        if not isinstance(tensor, torch.Tensor):
            return f"{what} should be a tensor, got {type(tensor).__name__}"
        if tuple(tensor.shape) != (B, T):
            longest = max(len(d) for d in documents) - 1
            if tensor.dim() == 2 and tensor.shape[0] == B and tensor.shape[1] == block_size and T < block_size:
                return (f"{what} is [B, block_size]; T is the longest row's number of positions "
                        f"(min(block_size, len(ids) - 1)), here {T}" if show else
                        f"{what} is [B, block_size]; T is the longest row's number of positions")
            if tensor.dim() == 2 and tensor.shape[1] == longest and longest > block_size:
                return "the rows are not cut to block_size: positions = min(block_size, len(ids) - 1)"
            if show:
                return f"{what} has shape {list(tensor.shape)}, expected [B, T] = {[B, T]}"
            return f"{what} does not have the shape [B, T] (B documents, T the longest row's positions)"
    if got_inputs.dtype != torch.long or got_targets.dtype != torch.long:
        return "inputs and targets should be int64 (torch.long) ids"
    if got_mask.dtype != torch.bool:
        return f"mask should be a bool tensor (True on scored positions), got {got_mask.dtype}"
    if torch.equal(got_inputs, want_inputs) and torch.equal(got_targets, want_targets) and torch.equal(got_mask, want_mask):
        return None
    front = right_batch(documents, block_size, pad_id, front=True)
    if not torch.equal(front[2], want_mask) and (torch.equal(got_inputs, front[0]) or torch.equal(got_mask, front[2])):
        return "the padding is at the front; pad at the end, so no real position ever sees it"
    if torch.equal(got_inputs, want_inputs) and torch.equal(got_targets, want_inputs):
        return "the targets are the inputs: targets[p] is the next id, ids[p + 1] (shift by one)"
    if torch.equal(got_mask, torch.ones_like(want_mask)) and not want_mask.all():
        return "mask is True on padded positions too: padding must not be scored (mask False there)"
    if torch.equal(got_mask, ~want_mask):
        return "mask is inverted: True on the scored positions, False on the padding"
    bos = documents[0][0]
    if pad_id != bos and torch.equal(got_inputs, right_batch(documents, block_size, bos)[0]):
        return "the rows are padded with BOS; pad with the pad_id argument"
    if not torch.equal(got_mask, want_mask):
        return ("mask should be True exactly on each row's min(block_size, len(ids) - 1) scored positions, "
                "from position 0 on")
    if not torch.equal(got_inputs, want_inputs):
        return "inputs should hold each row's training_windows inputs from position 0 on, then pad_id"
    return "targets should hold each row's next-token targets (ids[p + 1]) from position 0 on, then pad_id"


def judge_make_batch(out, inputs, expected):
    return _batch_problem(out, inputs)


def judge_make_batch_hidden(out, inputs, expected):
    return _batch_problem(out, inputs, show=False)


def judge_make_batch_example(out, inputs, expected):
    if problem := _batch_problem(out, inputs):
        return f"the lesson's example (ana, li with BOS = 26 as pad_id): {problem}"
    return None


def _names_example(g):
    # 'ana' and 'li' in the names vocabulary: a=0, i=8, l=11, n=13, BOS=26
    return {"documents": [[26, 0, 13, 0, 26], [26, 11, 8, 26]], "block_size": 16, "pad_id": 26}


def _batch_inputs(g):
    # BOS = 9, pad_id 7 (any id): short rows padded, the long one cut to block_size
    return {"documents": [[9, 1, 2, 9], [9, 3, 4, 5, 6, 1, 2, 3, 4, 9], [9, 9], [9, 5, 0, 0, 2, 9]],
            "block_size": 6, "pad_id": 7}


def _random_batch_inputs(g):
    V = 12
    bos = V - 1
    documents = []
    for row in range(6):
        length = int(torch.randint(0, 3 if row == 2 else 12, (1,), generator=g))  # row 2 is short: padding
        documents.append([bos, *torch.randint(0, bos, (length,), generator=g).tolist(), bos])
    return {"documents": documents, "block_size": int(torch.randint(4, 9, (1,), generator=g)),
            "pad_id": int(torch.randint(0, V, (1,), generator=g))}


# ============================================================ the training step


def _masked_loss(ns, logits, targets, mask):
    return ns.train.masked_loss(logits, targets, mask)


def probe_train_steps(ns, sizes, state, batches, max_norms, lr, weight_decay):
    """Run the student's train_step on each batch; record, at the moment optimizer.step()
    runs, what the gradients are, and compute (on a copy) what this batch's gradient is."""
    model = _model(ns, sizes, state).train()
    params = list(model.parameters())
    names = [n for n, _ in model.named_parameters()]
    optimizer = ns.train.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay)
    at_step = []
    original_step = optimizer.step

    def recording_step(*args, **kwargs):
        at_step.append([None if p.grad is None else p.grad.detach().clone() for p in params])
        return original_step(*args, **kwargs)

    optimizer.step = recording_step
    calls = []
    for (inputs, targets, mask), max_norm in zip(batches, max_norms):
        before = [p.detach().clone() for p in params]
        twin = copy.deepcopy(model)
        for p in twin.parameters():
            p.grad = None
        loss = _masked_loss(ns, twin(inputs)[0], targets, mask)
        loss.backward()
        fresh = [torch.zeros_like(p) if p.grad is None else p.grad.detach().clone() for p in twin.parameters()]
        already = len(at_step)
        returned = ns.train.train_step(model, optimizer, inputs.clone(), targets.clone(), mask.clone(), max_norm)
        with torch.no_grad():
            loss_after = _masked_loss(ns, model(inputs)[0], targets, mask).item()
        calls.append({"returned": list(returned) if isinstance(returned, (tuple, list)) else returned,
                      "loss_before": loss.item(), "loss_after": loss_after, "fresh": fresh,
                      "at_step": at_step[already:], "changed": [not torch.equal(b, p.detach()) for b, p in zip(before, params)]})
    held = [next((j for j, q in enumerate(params) if q is p), -1) for p in optimizer.params]
    return {"names": names, "requires_grad": [bool(p.requires_grad) for p in params], "held": held,
            "calls": calls, "final": {n: p.detach().clone() for n, p in zip(names, params)}}


def _norm(grads):
    return math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads if g is not None))


def _clipped(grads, max_norm):
    if max_norm is None:
        return grads
    scale = min(1.0, max_norm / (_norm(grads) + CLIP_EPS))
    return [g * scale for g in grads]


def judge_every_parameter_trains(out, inputs, expected):
    names = out["names"]
    frozen = [n for n, r in zip(names, out["requires_grad"]) if not r]
    if frozen:
        return f"these parameters do not require grad after a step: {', '.join(frozen[:4])}"
    first = out["calls"][0]
    if not first["at_step"]:
        return "train_step never called optimizer.step()"
    grads = first["at_step"][0]
    missing = [n for n, g in zip(names, grads) if g is None or not bool(g.abs().sum() > 0)]
    if missing:
        return (f"when optimizer.step() ran, these parameters had no (or an all-zero) gradient: "
                f"{', '.join(missing[:4])}: call loss.backward() before optimizer.step()")
    held = out["held"]
    if sorted(held) != list(range(len(names))):
        return "the optimizer does not hold every model parameter exactly once"
    return None


def judge_returns_loss(out, inputs, expected):
    for number, (call, max_norm) in enumerate(zip(out["calls"], inputs["max_norms"]), start=1):
        returned = call["returned"]
        if not isinstance(returned, list) or len(returned) != 2:
            return "train_step should return a pair (loss, gradient norm)"
        loss, norm = returned
        if isinstance(loss, torch.Tensor) or isinstance(norm, torch.Tensor):
            return "train_step should return Python floats: loss.item() and float(norm), not tensors"
        if not (_is_float(loss) and _is_float(norm)):
            return f"train_step should return two floats, got {type(loss).__name__} and {type(norm).__name__}"
        if not _close(loss, call["loss_before"], 1e-10):
            if _close(loss, call["loss_after"], 1e-10):
                return f"call {number}: the returned loss is the loss after the update; return the loss the step was computed from"
            return f"call {number}: the returned loss is not masked_loss of the model's logits on this batch"
        right = _norm(call["fresh"])
        if _close(norm, right, 1e-9):
            continue
        previous = out["calls"][number - 2]["at_step"] if number > 1 else []
        if previous and previous[-1] and _close(norm, _norm([a + b for a, b in zip(previous[-1], call["fresh"])]), 1e-9):
            return (f"call {number}: the gradient norm includes the previous step's gradient: gradients accumulate "
                    f"because zero_grad() is not called before backward()")
        if max_norm is not None and _close(norm, min(right, max_norm), 1e-6):
            return f"call {number}: the returned norm is taken after clipping; return the norm before clipping"
        return f"call {number}: the returned gradient norm is not the global norm of this batch's gradients"
    return None


def judge_fresh_clipped_gradients(out, inputs, expected):
    names = out["names"]
    for number, (call, max_norm) in enumerate(zip(out["calls"], inputs["max_norms"]), start=1):
        if len(call["at_step"]) != 1:
            return f"call {number}: optimizer.step() ran {len(call['at_step'])} times; once per train_step"
        grads = call["at_step"][0]
        if not any(call["changed"]):
            return (f"call {number}: the parameters did not change: call optimizer.step() after loss.backward() "
                    f"(a step before backward sees no gradient)")
        wanted = _clipped(call["fresh"], max_norm)
        if all(g is not None and matches(g, w, atol=1e-12, rtol=1e-9) for g, w in zip(grads, wanted)):
            continue
        previous = out["calls"][number - 2]["at_step"] if number > 1 else []
        if previous and previous[-1]:
            piled = _clipped([a + b for a, b in zip(previous[-1], call["fresh"])], max_norm)
            if all(g is not None and matches(g, w, atol=1e-12, rtol=1e-9) for g, w in zip(grads, piled)):
                return (f"call {number}: the gradients accumulate from the previous call: call optimizer.zero_grad() "
                        f"before loss.backward()")
        if max_norm is not None and all(g is not None and matches(g, f, atol=1e-12, rtol=1e-9)
                                        for g, f in zip(grads, call["fresh"])):
            return (f"call {number}: the gradients were not clipped to max_norm before optimizer.step(): "
                    f"clip_grad_norm(optimizer.params, max_norm) goes between backward and step")
        bad = next((n for n, g, w in zip(names, grads, wanted) if g is None or not matches(g, w, atol=1e-12, rtol=1e-9)),
                   "?")
        return (f"call {number}: when optimizer.step() ran, {bad}'s gradient was not this batch's gradient of "
                f"masked_loss" + ("" if max_norm is None else " (clipped)"))
    return None


def probe_lowers_loss(ns, sizes, state, batch, steps, lr):
    model = _model(ns, sizes, state).train()
    optimizer = ns.train.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    inputs, targets, mask = batch
    with torch.no_grad():
        start = _masked_loss(ns, model(inputs)[0], targets, mask).item()
    returned = [ns.train.train_step(model, optimizer, inputs, targets, mask, 1.0) for _ in range(steps)]
    with torch.no_grad():
        end = _masked_loss(ns, model(inputs)[0], targets, mask).item()
    return {"start": start, "end": end, "returned": [list(r) if isinstance(r, (tuple, list)) else r for r in returned]}


def judge_lowers_loss(out, inputs, expected):
    if not (out["end"] < out["start"] - 0.05):
        return (f"{inputs['steps']} steps on one fixed batch should lower its loss (from {out['start']:.4f}); it "
                f"ended at {out['end']:.4f}")
    return None


def _batch_tensors(g, V, B, T, lengths=None):
    bos = V - 1
    lengths = lengths or [T] + torch.randint(1, T + 1, (B - 1,), generator=g).tolist()
    inputs = torch.randint(0, V, (B, T), generator=g)
    targets = torch.randint(0, V, (B, T), generator=g)
    mask = torch.zeros(B, T, dtype=torch.bool)
    for b, n in enumerate(lengths):
        mask[b, :n] = True
        inputs[b, n:] = bos
        targets[b, n:] = bos
    return [inputs, targets, mask]


def _train_inputs(g):
    sizes = dict(SIZES)
    state = random_lm_state(g, sizes, scale=0.5)
    V, T = sizes["vocab_size"], sizes["block_size"]
    batches = [_batch_tensors(g, V, 3, T) for _ in range(3)]
    return {"sizes": sizes, "state": state, "batches": batches, "max_norms": [0.05, 0.05, None],
            "lr": 1e-2, "weight_decay": 0.1}


def _lowers_inputs(g):
    sizes = dict(SIZES)
    return {"sizes": sizes, "state": random_lm_state(g, sizes, scale=0.5),
            "batch": _batch_tensors(g, sizes["vocab_size"], 4, sizes["block_size"]), "steps": 5, "lr": 2e-2}


HIDDEN_SIZES = dict(vocab_size=9, block_size=7, d_model=12, n_heads=3, n_layers=2, d_ff=20, dropout=0.0)


def _random_train_inputs(g):
    sizes = dict(HIDDEN_SIZES)
    state = random_lm_state(g, sizes, scale=0.5)
    batches = [_batch_tensors(g, sizes["vocab_size"], 4, sizes["block_size"]) for _ in range(4)]
    return {"sizes": sizes, "state": state, "batches": batches, "max_norms": [0.1, None, 0.1, 0.1],
            "lr": 10 ** float(torch.empty(1).uniform_(-2.5, -1.5, generator=g)), "weight_decay": 0.05}


def _expect_train(ref, inputs):
    """The reference's returns and final parameters, and those of the classic wrong loops."""

    def run(kind):
        model = _model(ref, inputs["sizes"], inputs["state"]).train()
        optimizer = ref.train.AdamW(model.parameters(), lr=inputs["lr"], betas=(0.9, 0.95),
                                    weight_decay=inputs["weight_decay"])
        returns = []
        for (x, y, mask), max_norm in zip(inputs["batches"], inputs["max_norms"]):
            if kind == "right":
                returns.append(ref.train.train_step(model, optimizer, x, y, mask, max_norm))
                continue
            if kind != "no_zero_grad":
                optimizer.zero_grad()
            loss = ref.train.masked_loss(model(x)[0], y, mask)
            loss.backward()
            norm = _norm([p.grad for p in optimizer.params])
            if max_norm is not None and kind != "no_clip":
                ref.train.clip_grad_norm(optimizer.params, max_norm)
            optimizer.step()
            returns.append((loss.item(), norm))
        return {"returns": returns, "final": {n: p.detach().clone() for n, p in model.named_parameters()}}

    return {"right": run("right"),
            "mistakes": [("the gradients accumulate from step to step: call optimizer.zero_grad() before backward()",
                          run("no_zero_grad")),
                         ("the gradients are never clipped: clip_grad_norm(optimizer.params, max_norm) between "
                          "backward() and step()", run("no_clip"))]}


def _run_matches(out, run, atol=1e-9):
    returns = [c["returned"] for c in out["calls"]]
    if len(returns) != len(run["returns"]):
        return False
    for got, want in zip(returns, run["returns"]):
        if not (isinstance(got, list) and len(got) == 2 and all(_is_float(v) for v in got)):
            return False
        if not (_close(got[0], want[0], atol) and _close(got[1], float(want[1]), atol)):
            return False
    return all(matches(out["final"].get(n), p, atol=atol, rtol=1e-7) for n, p in run["final"].items())


def judge_train_reference(out, inputs, expected):
    if _run_matches(out, expected["right"]):
        return None
    for why, run in expected["mistakes"]:
        if _run_matches(out, run, atol=1e-8):
            return why
    if problem := judge_returns_loss(out, inputs, expected):
        return problem
    if problem := judge_fresh_clipped_gradients(out, inputs, expected):
        return problem
    return "four train_step calls do not leave the parameters where the reference's do"


# ================================================================= evaluate

DOCS = ["ana", "bob", "christopher", "eve", "li", "kai", "zoe"]


def _vocab(docs):
    return sorted(set("".join(docs)))


def probe_evaluate(ns, docs, sizes, state, batch_size, dropout_free_state=None):
    tokenizer = ns.tokenizer.CharTokenizer(docs)
    model = _model(ns, {**sizes, "vocab_size": tokenizer.vocab_size}, state).train()
    value = ns.train.evaluate(model, docs, tokenizer, batch_size=batch_size)
    again = ns.train.evaluate(model, docs, tokenizer, batch_size=batch_size)
    after_train = model.training
    model.eval()
    in_eval = ns.train.evaluate(model, docs, tokenizer, batch_size=batch_size)
    after_eval = model.training
    plain = None
    if sizes.get("dropout", 0.0):
        quiet = _model(ns, {**sizes, "vocab_size": tokenizer.vocab_size, "dropout": 0.0}, state).eval()
        plain = ns.train.evaluate(quiet, docs, tokenizer, batch_size=batch_size)
    return {"value": value, "again": again, "in_eval": in_eval, "after_train": after_train,
            "after_eval": after_eval, "plain": plain}


def _constant_logit_state(g, docs, sizes):
    V = len(_vocab(docs)) + 1
    state = random_lm_state(g, {**sizes, "vocab_size": V})
    state["ln_final.weight"] = torch.zeros(sizes["d_model"], dtype=F64)  # logits = head(ln_final.bias) everywhere
    state["ln_final.bias"] = torch.randn(sizes["d_model"], generator=g, dtype=F64)
    state["head.weight"] = torch.randn(V, sizes["d_model"], generator=g, dtype=F64)
    return state


def _scored_targets(docs, block_size):
    chars = _vocab(docs)
    stoi = {c: i for i, c in enumerate(chars)}
    bos = len(chars)
    return [_windows([bos, *[stoi[c] for c in doc], bos], block_size)[1] for doc in docs], bos


def judge_evaluate_constant(out, inputs, expected):
    """With constant logits c at every position, the loss per scored character is the mean
    of -log softmax(c)[target] over every scored target: countable by hand."""
    value = out["value"]
    if not _is_float(value):
        return f"evaluate should return a Python float, got {type(value).__name__}"
    state, docs, bs = inputs["state"], inputs["docs"], inputs["batch_size"]
    nll = -torch.log_softmax(state["head.weight"] @ state["ln_final.bias"], dim=-1)
    targets, bos = _scored_targets(docs, inputs["sizes"]["block_size"])
    per_doc = [[float(nll[t]) for t in row] for row in targets]
    right = sum(map(sum, per_doc)) / sum(map(len, per_doc))
    if _close(value, right, 1e-9):
        return None
    batches = [per_doc[i:i + bs] for i in range(0, len(per_doc), bs)]
    batch_means = [sum(map(sum, b)) / sum(map(len, b)) for b in batches]

    def padded(batch):
        T = max(map(len, batch))
        return sum(sum(row) + (T - len(row)) * float(nll[bos]) for row in batch), T * len(batch)

    padded_batches = [padded(b) for b in batches]
    candidates = [
        (sum(batch_means) / len(batch_means),
         "this is the mean of the per-batch means, which over-weights the small last batch: sum each batch's "
         "loss times its number of scored positions, and divide by the total number of positions"),
        (sum(s for s, _ in padded_batches) / sum(n for _, n in padded_batches),
         "the padded positions are scored too: only mask-True positions count, in the sum and in the number"),
        (sum(sum(r) / len(r) for r in per_doc) / len(per_doc),
         "this is the mean of per-document means; the loss per character weights every scored position equally"),
        (sum(map(sum, per_doc)), "this is the summed loss; divide by the number of scored positions"),
    ]
    for wrong, why in candidates:
        if _close(value, wrong, 1e-9):
            return why
    return (f"with every position's logits the same vector c, the loss per scored character must be the mean of "
            f"-log softmax(c)[target] over all {sum(map(len, per_doc))} scored positions: {right:.6f}, got {value:.6f}")


def judge_evaluate_mode(out, inputs, expected):
    if not (_is_float(out["value"]) and _is_float(out["plain"])):
        return "evaluate should return a Python float"
    if not _close(out["value"], out["again"], 1e-12) or not _close(out["value"], out["plain"], 1e-9):
        return ("with dropout 0.5 the result changes from call to call: run the model in eval mode (model.eval()) "
                "while evaluating")
    if not out["after_train"]:
        return "a model in training mode came back in eval mode: restore the mode it had (model.train(was_training))"
    if out["after_eval"]:
        return "a model in eval mode came back in training mode: restore the mode it had, not always train()"
    return None


def _evaluate_constant_inputs(g):
    sizes = dict(SIZES, block_size=5)
    return {"docs": list(DOCS), "sizes": sizes, "state": _constant_logit_state(g, DOCS, sizes), "batch_size": 3}


def _evaluate_mode_inputs(g):
    sizes = dict(SIZES, dropout=0.5)
    V = len(_vocab(DOCS)) + 1
    return {"docs": list(DOCS), "sizes": sizes, "state": random_lm_state(g, {**sizes, "vocab_size": V}),
            "batch_size": 4}


def _random_docs(g, count, alphabet="abcdef"):
    docs = []
    for _ in range(count):
        length = int(torch.randint(1, 11, (1,), generator=g))
        docs.append("".join(alphabet[int(i)] for i in torch.randint(0, len(alphabet), (length,), generator=g)))
    if not set(alphabet) <= set("".join(docs)):
        docs.append(alphabet)
    return docs


def _random_evaluate_inputs(g):
    docs = _random_docs(g, 9)
    sizes = dict(SIZES, block_size=6)
    V = len(_vocab(docs)) + 1
    return {"docs": docs, "sizes": sizes, "state": random_lm_state(g, {**sizes, "vocab_size": V}), "batch_size": 4}


def _expect_evaluate(ref, inputs):
    docs, bs = inputs["docs"], inputs["batch_size"]
    tokenizer = ref.tokenizer.CharTokenizer(docs)
    model = _model(ref, {**inputs["sizes"], "vocab_size": tokenizer.vocab_size}, inputs["state"]).eval()
    right = ref.train.evaluate(model, docs, tokenizer, batch_size=bs)
    encoded = [tokenizer.encode_document(d) for d in docs]
    means, padded_sum, padded_count = [], 0.0, 0
    with torch.no_grad():
        for start in range(0, len(encoded), bs):
            x, y, mask = ref.train.make_batch(encoded[start:start + bs], model.cfg.block_size, tokenizer.bos_id)
            logits = model(x)[0]
            means.append(ref.train.masked_loss(logits, y, mask).item())
            everything = torch.ones_like(mask)
            padded_sum += ref.train.masked_loss(logits, y, everything).item() * mask.numel()
            padded_count += mask.numel()
    return {"right": right, "mistakes": [
        (sum(means) / len(means), "this is the mean of the per-batch means, which over-weights the small last batch"),
        (padded_sum / padded_count, "the padded positions are scored too: only mask-True positions count")]}


def judge_evaluate_reference(out, inputs, expected):
    value = out["value"]
    if not _is_float(value):
        return f"evaluate should return a Python float, got {type(value).__name__}"
    if _close(value, expected["right"], 1e-9):
        return judge_evaluate_mode_hidden(out)
    for wrong, why in expected["mistakes"]:
        if _close(value, wrong, 1e-9):
            return why
    return "the loss per scored character differs from the reference's"


def judge_evaluate_mode_hidden(out):
    if not out["after_train"] or out["after_eval"]:
        return "evaluate should restore the mode the model had (training or eval)"
    return None


# ============================================================ bigram_baseline


def hand_bigram(train_docs, val_docs, block_size=None, k=1.0, mistake=None):
    chars = sorted(set("".join(train_docs) + "".join(val_docs) if mistake != "vocab_train" else "".join(train_docs)))
    stoi = {c: i for i, c in enumerate(chars)}
    V, bos = len(chars) + 1, len(chars)

    def pairs(docs):
        for doc in docs:
            ids = [stoi[c] for c in doc]
            if mistake == "no_bos":
                ids = ids if len(ids) > 1 else ids + ids
            elif mistake == "leading_bos_only":
                ids = [bos, *ids]
            else:
                ids = [bos, *ids, bos]
            limit = len(ids) if block_size is None or mistake == "ignore_block" else block_size
            n = min(limit, len(ids) - 1)
            yield from zip(ids[:n], ids[1:n + 1])

    counts = [[0.0] * V for _ in range(V)]
    for a, b in pairs(train_docs):
        counts[a][b] += 1
    kk = 1.0 if mistake == "k_is_one" else k
    scored = list(pairs(val_docs))
    total = 0.0
    for a, b in scored:
        row = sum(counts[a])
        if mistake == "no_kv":
            p = (counts[a][b] + kk) / (row + kk)
        else:
            p = (counts[a][b] + kk) / (row + kk * V)
        total += -math.log2(p) if mistake == "bits" else -math.log(p)
    return total if mistake == "summed" else total / len(scored)


BIGRAM_MISTAKES = [
    ("no_kv", "the denominator lacks k·V: P(next | current) = (count + k) / (row total + k·V)"),
    ("bits", "the loss is in bits (log2); use nats (natural log), like the model's loss"),
    ("summed", "this is the summed negative log-likelihood; divide by the number of scored positions"),
    ("k_is_one", "the smoothing argument is ignored (k = 1 used always)"),
    ("ignore_block", "every pair is scored, ignoring block_size: count and score only the first "
                     "min(block_size, len(ids) - 1) positions of each document, as the model is scored"),
    ("no_bos", "the documents are not framed by BOS: encode_document gives [BOS, ..., BOS], and the pairs "
               "(BOS, first letter) and (last letter, BOS) count"),
    ("leading_bos_only", "the closing BOS is missing: the pair (last letter, BOS) counts too"),
]


def probe_bigram(ns, vocab_docs, calls):
    tokenizer = ns.tokenizer.CharTokenizer(vocab_docs)
    return [try_call(ns.train.bigram_baseline, call["train"], call["val"], tokenizer,
                     block_size=call["block_size"], smoothing=call["k"]) for call in calls]


def _bigram_problem(out, inputs, show=True):
    for number, (call, result) in enumerate(zip(inputs["calls"], out), start=1):
        label = (f"bigram_baseline({call['train']}, {call['val']}, block_size={call['block_size']}, "
                 f"smoothing={call['k']})" if show else f"call {number}")
        if "raised" in result:
            return f"{label} raised {exception_name(result['raised'])}"
        value = result["value"]
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = float(value)
        if not _is_float(value):
            return f"{label} should return a float, got {type(value).__name__}"
        right = hand_bigram(call["train"], call["val"], call["block_size"], call["k"])
        if _close(value, right, 1e-9):
            continue
        for name, why in BIGRAM_MISTAKES:
            wrong = hand_bigram(call["train"], call["val"], call["block_size"], call["k"], mistake=name)
            if not _close(wrong, right, 1e-9) and _close(value, wrong, 1e-9):
                return f"{label}: {why}"
        return f"{label} should be {right:.6f} nats per character, got {value:.6f}" if show else (
            f"{label}: the baseline differs from add-k counting over the scored (input, target) pairs")
    return None


def judge_bigram(out, inputs, expected):
    return _bigram_problem(out, inputs)


def judge_bigram_hidden(out, inputs, expected):
    if problem := _bigram_problem(out, inputs, show=False):
        return problem
    for number, (result, want) in enumerate(zip(out, expected), start=1):
        if not _close(float(result["value"]), want, 1e-9):
            return f"call {number}: the baseline differs from the reference's"
    return None


def _bigram_by_hand(g):
    # a=0, b=1, BOS=2, V=3; train pairs (BOS,a) (a,b) (b,BOS)
    return {"vocab_docs": ["ab"], "calls": [
        {"train": ["ab"], "val": ["b"], "block_size": None, "k": 1.0},  # (ln 4 + ln 2) / 2
        {"train": ["ab"], "val": ["b"], "block_size": None, "k": 0.5},  # -(ln 0.2 + ln 0.6) / 2
        {"train": ["ab"], "val": ["ab"], "block_size": 1, "k": 1.0},  # ln 2
    ]}


def _bigram_cropped(g):
    return {"vocab_docs": ["abc"], "calls": [
        {"train": ["abba", "ab", "cab"], "val": ["ba", "abcab", "c"], "block_size": 3, "k": 0.5},
        {"train": ["abba", "ab", "cab"], "val": ["ba", "abcab", "c"], "block_size": None, "k": 2.0},
    ]}


def _random_bigram_inputs(g):
    train, val = _random_docs(g, 12, "abcd"), _random_docs(g, 6, "abcd")
    calls = [{"train": train, "val": val, "block_size": int(torch.randint(2, 7, (1,), generator=g)),
              "k": float(torch.empty(1).uniform_(0.1, 2.0, generator=g))},
             {"train": train, "val": val, "block_size": None, "k": 1.0}]
    return {"vocab_docs": train + val, "calls": calls}


def _expect_bigram(ref, inputs):
    tokenizer = ref.tokenizer.CharTokenizer(inputs["vocab_docs"])
    return [ref.train.bigram_baseline(c["train"], c["val"], tokenizer, block_size=c["block_size"], smoothing=c["k"])
            for c in inputs["calls"]]


# ----------------------------------------------------------------------- checks

CHECKS = [
    # AdamW.__init__
    check("ch08.adamw_init.each_parameter_once", "adamw_init", 2,
          "a tensor listed twice (a shared weight) is held once, in first-seen order; m, v are zeros like each "
          "parameter and every step count starts at 0",
          probe_adamw_init, judge_adamw_state,
          inputs=lambda g: {"shapes": [[3, 2], [4], [2, 2, 2]], "order": [0, 1, 0, 2, 1], "as_generator": False}),
    check("ch08.adamw_init.tied_model_generator", "adamw_init", 1,
          "a model with a tied weight, passed as a generator with its shared tensors repeated, is held "
          "parameter by parameter, each once",
          probe_adamw_init_model, judge_adamw_init_model,
          inputs=lambda g: {"sizes": dict(SIZES)}),
    check("ch08.adamw_init.rejects_frozen_and_empty", "adamw_init", 1,
          "a parameter that does not require grad, or an empty list, is refused with a clear error",
          probe_adamw_rejects, judge_adamw_rejects),
    check("ch08.adamw_init.random_duplicates", "adamw_init", 1,
          "random tensors with random repeats, passed as a generator: each held once, in first-seen order",
          probe_adamw_init, judge_adamw_state, inputs=_random_init_inputs, hidden=True),
    # AdamW.step
    check("ch08.adamw_step.first_step", "adamw_step", 2,
          "the first step from m = v = 0 moves each entry by lr·g/(|g| + eps) ≈ lr·sign(g) (bias correction)",
          probe_adamw_trajectory, judge_adamw_first_step, inputs=_first_step_inputs),
    check("ch08.adamw_step.decoupled_decay", "adamw_step", 1,
          "with all-zero gradients each step only shrinks p by (1 − lr·weight_decay): decoupled decay",
          probe_adamw_trajectory, judge_adamw_decay, inputs=_decay_inputs),
    check("ch08.adamw_step.matches_torch", "adamw_step", 3,
          "60 steps with weight decay and a changing lr follow torch.optim.AdamW to 1e-10 (float64), gradients "
          "at scales 1e-3, 1 and 10",
          probe_adamw_trajectory, judge_adamw_matches_torch, inputs=_adamw_inputs),
    check("ch08.adamw_step.skipped_steps", "adamw_step", 1,
          "a parameter whose .grad is None at a step is left alone (no decay, no move) and its own step count t "
          "does not advance, as in torch.optim.AdamW",
          probe_adamw_trajectory, judge_adamw_matches_torch, inputs=_skipping_inputs),
    check("ch08.adamw_step.random_matches_torch", "adamw_step", 3,
          "random shapes, betas, eps, lr and weight decay, some parameters without a gradient at some steps: "
          "55 steps follow torch.optim.AdamW",
          probe_adamw_trajectory, judge_adamw_matches_torch, inputs=_random_adamw_inputs, hidden=True),
    # AdamW.zero_grad
    check("ch08.adamw_zero_grad.clears_gradients", "adamw_zero_grad", 2,
          "zero_grad() clears every .grad (and nothing else), so the next backward() gives the new gradient only",
          probe_zero_grad, judge_zero_grad, inputs=_zero_grad_inputs),
    check("ch08.adamw_zero_grad.sets_none", "adamw_zero_grad", 1,
          "zero_grad() sets every .grad to None (not a tensor of zeros), as torch.optim.AdamW does",
          probe_zero_grad, judge_zero_grad_none, inputs=_zero_grad_inputs),
    check("ch08.adamw_zero_grad.before_any_backward", "adamw_zero_grad", 1,
          "zero_grad() works on a fresh optimizer, before any gradient exists",
          probe_zero_grad_fresh, judge_zero_grad_fresh, inputs=lambda g: {"shapes": [[2, 3], [4]]}),
    check("ch08.adamw_zero_grad.training_loop", "adamw_zero_grad", 1,
          "six zero_grad / backward / step rounds follow torch.optim.AdamW's",
          probe_zero_grad_loop, judge_zero_grad_loop, inputs=_zero_grad_loop_inputs, hidden=True),
    # clip_grad_norm
    check("ch08.clip_grad_norm.matches_torch", "clip_grad_norm", 2,
          "max_norm 0.5, 1 and 100: the returned norm and the clipped gradients equal "
          "torch.nn.utils.clip_grad_norm_'s",
          probe_clip, judge_clip, inputs=_clip_cases),
    check("ch08.clip_grad_norm.global_norm", "clip_grad_norm", 1,
          "gradients with norms 3 and 4 (global 5) and max_norm 1 become norms 0.6 and 0.8: one factor for all",
          probe_clip, judge_clip, inputs=_clip_global_inputs),
    check("ch08.clip_grad_norm.below_limit_untouched", "clip_grad_norm", 1,
          "gradients whose norm is below max_norm are left exactly as they are",
          probe_clip, judge_clip, inputs=_clip_below_inputs),
    check("ch08.clip_grad_norm.missing_and_shared", "clip_grad_norm", 1,
          "a parameter without .grad is skipped, a tensor listed twice counts once, a generator works",
          probe_clip, judge_clip, inputs=_clip_missing_shared_inputs),
    check("ch08.clip_grad_norm.random_matches_torch", "clip_grad_norm", 2,
          "random shapes, scales and max_norm match torch.nn.utils.clip_grad_norm_",
          probe_clip, judge_clip_hidden, inputs=_random_clip_inputs, hidden=True),
    # make_batch
    check("ch08.make_batch.lesson_example", "make_batch", 2,
          "ana and li (BOS = pad_id = 26) give the lesson's inputs, targets and mask",
          probe_make_batch, judge_make_batch_example, inputs=_names_example),
    check("ch08.make_batch.padding_and_cropping", "make_batch", 2,
          "short rows padded at the end with pad_id (mask False), a long one cut to block_size, T the longest row",
          probe_make_batch, judge_make_batch, inputs=_batch_inputs),
    check("ch08.make_batch.random_documents", "make_batch", 2,
          "random documents, block sizes and pad ids give the right windows, padding and mask",
          probe_make_batch, judge_make_batch_hidden, inputs=_random_batch_inputs, hidden=True),
    # train_step
    check("ch08.train_loop.every_parameter_trains", "train_loop", 2,
          "every parameter requires grad, has a non-zero gradient when the optimizer steps, and is held by the "
          "optimizer exactly once",
          probe_train_steps, judge_every_parameter_trains, inputs=_train_inputs),
    check("ch08.train_loop.returns_loss_and_norm", "train_loop", 2,
          "train_step returns floats: the batch's loss before the update and the gradient norm before clipping",
          probe_train_steps, judge_returns_loss, inputs=_train_inputs),
    check("ch08.train_loop.fresh_clipped_gradients", "train_loop", 2,
          "each step uses this batch's gradient only (no accumulation across calls), clipped to max_norm, "
          "and the parameters change",
          probe_train_steps, judge_fresh_clipped_gradients, inputs=_train_inputs),
    check("ch08.train_loop.lowers_loss", "train_loop", 1,
          "five steps on one fixed batch lower its loss",
          probe_lowers_loss, judge_lowers_loss, inputs=_lowers_inputs),
    check("ch08.train_loop.matches_reference", "train_loop", 3,
          "four steps (with and without clipping) on a 2-layer model return and leave what the reference's do",
          probe_train_steps, judge_train_reference, inputs=_random_train_inputs, expect=_expect_train,
          hidden=True),
    # evaluate
    check("ch08.evaluate.per_scored_character", "evaluate", 2,
          "with the same logits at every position, 7 names in batches of 3 give the mean loss over all scored "
          "positions (not the mean of batch means)",
          probe_evaluate, judge_evaluate_constant, inputs=_evaluate_constant_inputs),
    check("ch08.evaluate.eval_mode_restored", "evaluate", 1,
          "with dropout 0.5 the value is that of eval mode, and the model's mode (train or eval) is restored",
          probe_evaluate, judge_evaluate_mode, inputs=_evaluate_mode_inputs),
    check("ch08.evaluate.matches_reference", "evaluate", 2,
          "random names and weights give the reference's loss per scored character",
          probe_evaluate, judge_evaluate_reference, inputs=_random_evaluate_inputs, expect=_expect_evaluate,
          hidden=True),
    # bigram_baseline
    check("ch08.bigram_baseline.by_hand", "bigram_baseline", 2,
          "train 'ab', val 'b': (ln 4 + ln 2)/2 with add-one, −(ln 0.2 + ln 0.6)/2 with k = 0.5; block_size 1 "
          "on 'ab' gives ln 2",
          probe_bigram, judge_bigram, inputs=_bigram_by_hand),
    check("ch08.bigram_baseline.cropped_and_smoothed", "bigram_baseline", 1,
          "a small corpus with block_size 3 and k = 0.5, and with every position and k = 2",
          probe_bigram, judge_bigram, inputs=_bigram_cropped),
    check("ch08.bigram_baseline.random_corpora", "bigram_baseline", 2,
          "random corpora, block sizes and k match the reference",
          probe_bigram, judge_bigram_hidden, inputs=_random_bigram_inputs, expect=_expect_bigram, hidden=True),
]
