"""Chapter 00's float oracles, the kit's own: what a right (or a known wrong)
implementation of each task gives, recomputed with `math` on floats, and the model's
layer and forward as a torch float64 twin. The hidden checks judge with them on random
inputs; on the public checks' fixed inputs the kit writes what they give into
facts.json (grader/generate/facts.py), so the release carries the numbers, not this code.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from grader.checks._slots import constant
from grader.checks.course import EPS
from grader.checks.facts import significant
from grader.checks.ch00_micro.micro_block import BLOCK_PARTS, FLAW_PARTS
from grader.checks.ch00_micro.micro_forward import FORWARD_FLAWS


# ------------------------------------------------------------ floats, by hand


def rms_of(xs, eps=EPS, stat="mean_square", eps_outside=False, centred=False):
    n = len(xs)
    if centred:
        mean = sum(xs) / n
        xs = [x - mean for x in xs]
    s = {"mean_square": sum(x * x for x in xs) / n, "sum_square": sum(x * x for x in xs),
         "mean": sum(xs) / n, "mean_abs": sum(abs(x) for x in xs) / n}[stat]
    scale = 1.0 / (math.sqrt(s) + eps) if eps_outside else (s + eps) ** -0.5 if s + eps > 0 else math.nan
    return [x * scale for x in xs]


def softmax_of(ls):
    m = max(ls)
    e = [math.exp(v - m) for v in ls]
    total = sum(e)
    return [v / total for v in e]


def attention_of(q, keys, values, scale="sqrt", use="values"):
    d = len(q)
    factor = {"sqrt": 1 / math.sqrt(d), "none": 1.0, "d": 1 / d, "times_sqrt": math.sqrt(d)}[scale]
    weights = softmax_of([sum(a * b for a, b in zip(q, k)) * factor for k in keys])
    rows = values if use == "values" else keys
    return [sum(w * row[i] for w, row in zip(weights, rows)) for i in range(d)], weights


# ------------------------------------------------------------ the Value's ops


def op_truth(op, x, k):
    """(value, gradients) of the operation, by hand."""
    a = x[0]
    b = x[1] if len(x) > 1 else None
    return {
        "add": lambda: (a + b, [1.0, 1.0]), "add_const": lambda: (a + 2.5, [1.0]),
        "radd": lambda: (a + 2.5, [1.0]), "add_self": lambda: (2 * a, [2.0]),
        "mul": lambda: (a * b, [b, a]), "mul_const": lambda: (-3.0 * a, [-3.0]),
        "rmul": lambda: (-3.0 * a, [-3.0]), "square": lambda: (a * a, [2 * a]),
        "pow": lambda: (a**k, [k * a ** (k - 1)]), "exp": lambda: (math.exp(a), [math.exp(a)]),
        "log": lambda: (math.log(a), [1.0 / a]),
        "relu": lambda: (a if a > 0 else 0.0, [1.0 if a > 0 else 0.0]),
    }[op]()


def op_mistakes(op, x, k):
    """The gradients the classic mistakes give, with what to tell the student."""
    a = x[0]
    b = x[1] if len(x) > 1 else None
    one_input = ("only one input of a + b gets a gradient: list both self and other as children, "
                 "with local gradients (1, 1)")
    one_factor = ("only one factor gets a gradient: the term for the other factor is missing "
                  "(children (self, other), local gradients (other.data, self.data))")
    power = "the power rule: the local gradient of x ** k is k * x ** (k - 1)"
    if op == "add":
        return [(one_input, [1.0, 0.0]), (one_input, [0.0, 1.0]),
                ("these are the local gradients of a product (b, a); for a + b both are 1", [b, a]),
                ("no gradient reaches the inputs: the new Value needs its children (self, other) "
                 "and local gradients (1, 1)", [0.0, 0.0])]
    if op == "add_self":
        return [("a + a gives a gradient of 1, not 2: " + one_input, [1.0])]
    if op in ("add_const", "radd"):
        return [("no gradient reaches a: the new Value needs its children and local gradients (1, 1)", [0.0])]
    if op == "mul":
        return [("the local gradients are swapped: d(a*b)/da is b (the OTHER factor) and d(a*b)/db is a", [a, b]),
                (one_factor, [b, 0.0]), (one_factor, [0.0, a]),
                ("these are the local gradients of a + b (1, 1); for a * b they are (b, a)", [1.0, 1.0])]
    if op == "square":
        return [("a * a gives a gradient of a, not 2a: " + one_factor, [a]),
                ("a * a gives a gradient of a * a: the local gradients should be the factors, not the product",
                 [2 * a * a])]
    if op in ("mul_const", "rmul"):
        return [("a * c gives a the gradient a instead of c: the local gradients are swapped", [a]),
                ("no gradient reaches a: " + one_factor, [0.0])]
    if op == "pow":
        return [(f"{power}; this is k * x ** k (the exponent was not lowered by one)", [k * a**k]),
                (f"{power}; the factor k is missing", [a ** (k - 1)]),
                (f"{power}; this is x ** k * log(x), the derivative with respect to the exponent",
                 [a**k * math.log(a)] if a > 0 else [math.nan]),
                (f"{power}; this is (k - 1) * x ** (k - 2), one step too far", [(k - 1) * a ** (k - 2)])]
    if op == "exp":
        return [("the local gradient is the input x; d exp(x)/dx is exp(x), the result itself", [a]),
                ("the local gradient is 1; d exp(x)/dx is exp(x), the result itself", [1.0]),
                ("no gradient reaches x: the local gradient of exp(x) is exp(x)", [0.0])]
    if op == "log":
        return [("the local gradient is the input x; d log(x)/dx is 1/x", [a]),
                ("the local gradient is log(x) itself; d log(x)/dx is 1/x", [math.log(a)]),
                ("the local gradient is -1/x², the derivative of 1/x; d log(x)/dx is 1/x", [-1.0 / (a * a)]),
                ("the local gradient is 1/x², not 1/x", [1.0 / (a * a)]),
                ("the local gradient is 1; d log(x)/dx is 1/x", [1.0])]
    if op == "relu":
        if a > 0:
            return [("the local gradient is the input x; relu's local gradient is 1 where x > 0", [a]),
                    ("no gradient for a positive input: relu's local gradient is 1 where x > 0", [0.0])]
        if a < 0:
            return [("a negative input passes the gradient: relu's local gradient is 0 where x <= 0 "
                     "(the output does not depend on x there)", [1.0]),
                    ("a negative input passes the gradient: relu's local gradient is 0 where x <= 0", [a])]
        return [("at exactly x = 0 the local gradient is taken to be 0 (use x > 0, not x >= 0)", [1.0])]
    return []


def op_facts(cases):
    """Per case: the value and gradients by hand, and the classic mistakes' gradients."""
    said = []
    for case in cases:
        value, grads = op_truth(case["op"], case["x"], case.get("k"))
        said.append({"value": value, "grads": grads, "mistakes": op_mistakes(case["op"], case["x"], case.get("k"))})
    return said


# ------------------------------------------------------------ RMSNorm and softmax


def rms_grads(xs, w, eps=EPS):
    """d/dx_j of sum_i w_i * rmsnorm(x)_i."""
    n = len(xs)
    m = sum(x * x for x in xs) / n + eps
    s = m**-0.5
    wx = sum(a * b for a, b in zip(w, xs))
    return [w[j] * s - wx * m**-1.5 * xs[j] / n for j in range(n)]


def _said_by_the_kit(mistakes: list) -> list:
    """Sentences written here, whole, with no value of an input in them: a published hidden
    check keeps their figures (grader/checks/_slots.py; the facts keep the plain words)."""
    return [(constant(text), values) for text, values in mistakes]


def rms_mistakes(xs):
    return _said_by_the_kit([
        ("eps is missing: it goes inside the square root, sqrt(mean(x²) + 1e-5)", rms_of(xs, eps=0.0)),
        ("eps is added outside the square root; it belongs inside: 1 / sqrt(mean(x²) + 1e-5)",
         rms_of(xs, eps_outside=True)),
        ("eps should be 1e-5 (this is 1e-6)", rms_of(xs, eps=1e-6)),
        ("eps should be 1e-5 (this is 1e-8)", rms_of(xs, eps=1e-8)),
        ("the scale uses the mean of x, not the mean of squares mean(x²)", rms_of(xs, stat="mean")),
        ("the scale uses the mean of |x|, not the mean of squares mean(x²)", rms_of(xs, stat="mean_abs")),
        ("the scale uses the sum of squares; RMSNorm divides by the root of their mean (sum / n)",
         rms_of(xs, stat="sum_square")),
        ("the mean is subtracted first: that is LayerNorm; RMSNorm only divides by sqrt(mean(x²) + eps)",
         rms_of(xs, centred=True)),
        ("the vector is multiplied by sqrt(mean(x²) + eps) instead of divided by it",
         [x * math.sqrt(sum(v * v for v in xs) / len(xs) + EPS) for x in xs]),
    ])


def _grid(parts: dict) -> list[dict]:
    """Every combination of the parts' choices but the lesson's own ({part: (lesson's, *others)}),
    as {part: choice} of the parts that differ, one part's changes first."""
    combos = [{}]
    for part, choices in parts.items():
        combos = [{**c, part: choice} for c in combos for choice in choices]
    found = [{part: choice for part, choice in c.items() if choice != parts[part][0]} for c in combos]
    return sorted((f for f in found if f), key=len)


RMS_PARTS = {"centred": (False, True),
             "stat": ("mean_square", "mean", "mean_abs", "sum_square", "sample_mean_square", "square_of_mean"),
             "root": ("divide", "none", "times"), "eps": ("inside", "outside", "none", "1e-6", "1e-8")}


def rms_with(xs, centred=False, stat="mean_square", root="divide", eps="inside"):
    """RMSNorm with other choices for its parts (RMS_PARTS); None where that is no real number."""
    n = len(xs)
    if centred:
        xs = [x - sum(xs) / n for x in xs]
    s = {"mean_square": sum(x * x for x in xs) / n, "mean": sum(xs) / n, "mean_abs": sum(abs(x) for x in xs) / n,
         "sum_square": sum(x * x for x in xs), "sample_mean_square": sum(x * x for x in xs) / (n - 1) if n > 1 else None,
         "square_of_mean": (sum(xs) / n) ** 2}[stat]
    e = {"inside": EPS, "outside": EPS, "none": 0.0, "1e-6": 1e-6, "1e-8": 1e-8}[eps]
    if s is None or (root != "none" and s + (0.0 if eps == "outside" else e) < 0):
        return None
    try:
        if root == "none":
            scale = 1.0 / (s + e)
        elif root == "times":
            scale = math.sqrt(s) + e if eps == "outside" else math.sqrt(s + e)
        else:
            scale = 1.0 / (math.sqrt(s) + e) if eps == "outside" else 1.0 / math.sqrt(s + e)
    except ZeroDivisionError:
        return None
    return [x * scale for x in xs]


def rms_grid(xs):
    """[(parts, values)] for every RMSNorm built with other choices (rms_with)."""
    found = []
    for parts in _grid(RMS_PARTS):
        if parts.get("root") == "none" and parts.get("eps") == "outside":
            continue  # without a root, eps outside is eps inside
        values = rms_with(xs, **parts)
        if values is not None:
            found.append([parts, values])
    return found


SOFTMAX_PARTS = {"base": ("e", "2", "10"), "sign": ("as_is", "negated"), "total": ("divide", "none", "log")}


def softmax_with(logits, base="e", sign="as_is", total="divide"):
    ls = [-v for v in logits] if sign == "negated" else list(logits)
    m = max(ls)
    b = {"e": math.e, "2": 2.0, "10": 10.0}[base]
    powers = [b ** (v - m) for v in ls]
    t = sum(powers)
    if total == "none":
        return powers
    if total == "log":
        return [(v - m) * math.log(b) - math.log(t) for v in ls]
    return [q / t for q in powers]


def softmax_grid(logits):
    return [[parts, softmax_with(logits, **parts)] for parts in _grid(SOFTMAX_PARTS)]


def rmsnorm_facts(x, w):
    n = len(x)
    return {"want": rms_of(x), "mistakes": rms_mistakes(x), "grid": significant(rms_grid(x), 9) if any(x) else [],
            "grads": rms_grads(x, w) if w is not None else None,
            "constant_scale": [wi * (sum(v * v for v in x) / n + EPS) ** -0.5 for wi in w] if w is not None else None}


def softmax_facts(logits, w):
    want = softmax_of(logits)
    grid = significant(softmax_grid(logits), 9)
    if w is None:
        return {"want": want, "grads": None, "constant_total": None, "grid": grid}
    wp = sum(a * b for a, b in zip(w, want))
    return {"want": want, "grads": [p * (wi - wp) for p, wi in zip(want, w)],
            "constant_total": [p * wi for p, wi in zip(want, w)], "grid": grid}


# ------------------------------------------------------------ one attention head


def attention_mistakes(q, keys, values):
    return [
        ("the scores are not scaled: divide dot(query, key) by sqrt(d_head)", attention_of(q, keys, values, "none")),
        ("the scores are divided by d_head; divide by sqrt(d_head)", attention_of(q, keys, values, "d")),
        ("the scores are multiplied by sqrt(d_head); divide by it", attention_of(q, keys, values, "times_sqrt")),
        ("the output mixes the keys; it is the weighted sum of the values", attention_of(q, keys, values, use="keys")),
    ]


def attention_facts(q, keys, values):
    out, weights = attention_of(q, keys, values)
    return {"out": out, "weights": weights,
            "mistakes": [[text, wrong_out, wrong_w] for text, (wrong_out, wrong_w) in attention_mistakes(q, keys, values)]}


# ------------------------------------------------- the model: a torch float64 twin
#
# micro.py runs one position at a time and remembers the earlier positions' keys and
# values in a cache. The twin runs the lesson's equations on a whole sequence at once
# instead, as chapters 04-05 do: a [P, E] tensor per layer, with a causal mask standing
# in for the cache (position p attends to positions 0..p, exactly what the cache holds
# when p arrives). Both give the same numbers; the twin is torch, the model is scalars.


def _f64(rows) -> torch.Tensor:
    return torch.as_tensor(rows, dtype=torch.float64)


def _unit_rms(x: torch.Tensor) -> torch.Tensor:
    """RMSNorm without a gain, over the last dimension: x / sqrt(mean(x^2) + eps)."""
    return x * torch.rsqrt(x.square().mean(dim=-1, keepdim=True) + EPS)


def twin_block(tables, layer, x, n_head, flaw=None):
    """Layer `layer` on every position of a sequence at once: x is [P, E]; returns the
    layer's output [P, E] and each head's attention weights [H, P, P] (row p is zero past
    p). The lesson's pre-norm layer, or one with other choices for some of its parts:
    flaw is a name of BLOCK_FLAWS or a dict {part: choice} of BLOCK_PARTS."""
    parts = {part: default for part, (default, _) in BLOCK_PARTS.items()}
    parts.update(FLAW_PARTS[flaw] if isinstance(flaw, str) else flaw or {})
    weight = lambda name: _f64(tables[f"layer{layer}.{name}"])  # noqa: E731
    P, E = x.shape
    d = E // n_head
    normed = _unit_rms(x)

    def split(table, which):
        """[P, E] -> [H, P, d]: head i owns features i*d .. (i+1)*d - 1 (or i, i + H, ... interleaved)."""
        projected = F.linear(x if which in parts["raw"] else normed, weight(table))
        if parts["heads"] == "contiguous":
            return projected.reshape(P, n_head, d).permute(1, 0, 2)
        return projected.reshape(P, d, n_head).permute(2, 0, 1)

    queries, keys, vals = split("wq", "q"), split("wk", "k"), split("wv", "v")
    visible = torch.eye(P, dtype=torch.bool) if parts["cache"] == "self" else torch.ones(P, P, dtype=torch.bool).tril()
    logits = torch.einsum("hpd,htd->hpt", queries, keys) * d ** -0.5
    attention = logits.masked_fill(~visible, -math.inf).softmax(dim=-1)
    mixed = torch.einsum("hpt,htd->phd", attention, vals)  # [P, H, d]
    if parts["heads"] == "interleaved_back":
        mixed = mixed.permute(0, 2, 1)  # head h's output back to features h, h + H, ...
    after_attention = F.linear(mixed.reshape(P, E), weight("wo"))
    if parts["attention_residual"]:
        after_attention = after_attention + x
    mlp_input = x if parts["mlp_input"] == "layer_input" else after_attention
    if parts["mlp_norm"]:
        mlp_input = _unit_rms(mlp_input)
    expanded = F.linear(mlp_input, weight("fc1"))
    activated = {True: F.relu(expanded), False: expanded, "squared": F.relu(expanded).square()}[parts["relu"]]
    mlp = F.linear(activated, weight("fc2"))
    out = mlp + after_attention if parts["mlp_residual"] else mlp
    return (_unit_rms(out) if parts["output_norm"] else out), attention


def twin_logits(tables, sizes, ids, flaw=None):
    """The logits [P][V] of a whole sequence of ids: RMSNorm(WTE[ids] + WPE[0..P-1]),
    every layer, the LM head (or one known flaw of that)."""
    x = _f64(tables["wte"])[list(ids)]
    if flaw != "no_position":
        x = x + _f64(tables["wpe"])[: len(ids)]
    if flaw != "no_embedding_norm":
        x = _unit_rms(x)
    for layer in range(1 if flaw == "first_layer_only" else sizes["n_layer"]):
        x, _ = twin_block(tables, layer, x, sizes["n_head"])
    if flaw == "final_norm":
        x = _unit_rms(x)
    return F.linear(x, _f64(tables["wte" if flaw == "tied_head" else "lm_head"])).tolist()


def block_twin(tables, sizes, xs, flaw=None):
    """Layer 0 on the positions xs in order: the outputs [P][E], and per position the
    attention rows that position has, [P][H][p + 1]."""
    y, attention = twin_block(tables, 0, _f64(xs), sizes["n_head"], flaw)
    rows = [[attention[head, p, : p + 1].tolist() for head in range(sizes["n_head"])] for p in range(len(xs))]
    return y.tolist(), rows


def block_alternatives(rows_only=False):
    """Every layer that differs from the lesson's in one part or in two, as {part: choice},
    one part's first; with rows_only, the parts that change the attention weights, each
    combination of those once."""
    axes = [(part, choices) for part, (_, choices) in BLOCK_PARTS.items()
            if not rows_only or part in ("raw", "heads", "cache")]
    if rows_only:
        axes = [(part, tuple(c for c in dict.fromkeys(_row_choice(part, c) for c in choices) if c is not None))
                for part, choices in axes]
    singles = [{part: choice} for part, choices in axes for choice in choices]
    pairs = [{a: x, b: y} for i, (a, xs) in enumerate(axes) for b, ys in axes[i + 1:] for x in xs for y in ys]
    return singles + pairs


def _row_choice(part, choice):
    """The attention weights see only whether q and k read x, and which features a head takes."""
    if part == "raw":
        return "".join(c for c in choice if c in "qk") or None
    if part == "heads":
        return "interleaved"
    return choice


def block_facts(tables, sizes, xs):
    """Layer 0 on xs: the outputs and attention rows, and the outputs of every layer with
    one or two parts otherwise (block_alternatives), and the attention rows of every
    layer whose weights are otherwise."""
    y, rows = block_twin(tables, sizes, xs)
    return {"y": y, "rows": rows,
            "alternatives": [[parts, significant(block_twin(tables, sizes, xs, parts)[0], 9)]
                             for parts in block_alternatives()],
            "row_alternatives": [[parts, significant(block_twin(tables, sizes, xs, parts)[1], 9)]
                                 for parts in block_alternatives(rows_only=True)]}


def forward_facts(tables, sizes, ids):
    """The logits of ids, and each known flaw's logits."""
    return {"logits": twin_logits(tables, sizes, ids),
            "flaws": {flaw: twin_logits(tables, sizes, ids, flaw) for flaw in FORWARD_FLAWS}}


# ------------------------------------------------------------ the document loss


def _nll(logits, target):
    m = max(logits)
    return math.log(sum(math.exp(v - m) for v in logits)) + m - logits[target]


def _loss_candidates(logits, ids, reveal=True):
    n = len(logits)
    nll = [_nll(row, ids[p + 1]) for p, row in enumerate(logits)]
    mean = sum(nll) / n
    count, length = (f" {n}", f" = {len(ids)}") if reveal else ("", "")
    return mean, [
        (f"the loss is the SUM of the{count} position losses; document_loss is their mean "
         f"(divide by the number of scored positions)", sum(nll)),
        (f"the loss is divided by len(ids){length}; " + constant("the scored positions are min(T, len(ids) - 1)")
         + (f" = {n}" if reveal else ""), sum(nll) / len(ids)),
        ("the loss is log p(target), not -log p(target): the negative log-likelihood has a minus sign", -mean),
        (constant("each position scores its own input id, not the next one: the target of position p is ids[p + 1]"),
         sum(_nll(row, ids[p]) for p, row in enumerate(logits)) / n),
        ("the loss uses -logit[target] without the softmax: the NLL is -log softmax(logits)[target]",
         sum(-row[ids[p + 1]] for p, row in enumerate(logits)) / n),
    ]


def loss_facts(logits, ids, reveal):
    mean, wrong = _loss_candidates(logits, ids, reveal)
    return {"mean": mean, "wrong": [[text, value] for text, value in wrong]}


# ------------------------------------------------------------------ Adam


def adam(start, grads, lr, beta1, beta2, eps, total_steps, bias=True, decay="t", eps_inside=False,
         counter=True, moments_kept=True):
    p, n = list(start), len(start)
    m, v, trajectory = [0.0] * n, [0.0] * n, []
    for step, gs in enumerate(grads):
        t = step if counter else 0
        if not moments_kept:
            m, v = [0.0] * n, [0.0] * n
        lr_t = {"t": lr * (1 - t / total_steps), "t+1": lr * (1 - (t + 1) / total_steps), None: lr,
                "cosine": lr * 0.5 * (1 + math.cos(math.pi * t / total_steps))}[decay]
        for i, g in enumerate(gs):
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            m_hat = m[i] / (1 - beta1 ** (t + 1)) if bias else m[i]
            v_hat = v[i] / (1 - beta2 ** (t + 1)) if bias else v[i]
            p[i] -= lr_t * m_hat / (math.sqrt(v_hat + eps) if eps_inside else math.sqrt(v_hat) + eps)
        trajectory.append(list(p))
    return trajectory


def adam_mistakes(start, grads, settings):
    return _said_by_the_kit([
        ("there is no bias correction: divide m by 1 - beta1^(t+1) and v by 1 - beta2^(t+1)",
         adam(start, grads, **settings, bias=False)),
        ("the learning rate does not decay: step t uses lr * (1 - t / total_steps)",
         adam(start, grads, **settings, decay=None)),
        ("the learning rate decays one step early: step t (counting from 0) uses lr * (1 - t / total_steps)",
         adam(start, grads, **settings, decay="t+1")),
        ("the learning rate decays on a cosine; the lesson's schedule is linear: step t uses lr * (1 - t / "
         "total_steps)", adam(start, grads, **settings, decay="cosine")),
        ("eps is added inside the square root; Adam divides by sqrt(v_hat) + eps",
         adam(start, grads, **settings, eps_inside=True)),
        ("every step is computed as the first (t = 0): the bias correction and the learning rate of step t read "
         "the step counter, which is not advanced; add 1 to self.t at the end of step()",
         adam(start, grads, **settings, counter=False)),
        ("the moments start from 0 at every step: m and v are the optimizer's running averages, kept in self.m "
         "and self.v from one step to the next",
         adam(start, grads, **settings, moments_kept=False)),
    ])


def adam_facts(start, grads, settings):
    return {"want": adam(start, grads, **settings),
            "mistakes": [[text, wrong] for text, wrong in adam_mistakes(start, grads, settings)]}
