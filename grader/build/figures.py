"""The lessons' figures, drawn from the reference with matplotlib.

    python -m grader.build.figures            write assignments/chNN_*/figures/*.svg
    python -m grader.build.figures --check    exit 1 when a committed figure differs from a fresh one

Every figure is computed from solutions/hero_transformer (imported under a private
name, never the student copy) and saved as SVG with fixed fonts, metadata and hash
salt, under a fixed seed on one thread, so a rerun writes the same bytes. The trained
model of chapters 04, 08 and 09 comes from one short seeded run (SHORT_RUN), not from
`make train`: a few seconds instead of a minute.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import io
import math
import random
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

from grader import KIT_ROOT

REPO_ROOT = KIT_ROOT
ASSIGNMENTS = REPO_ROOT / "assignments"
REFERENCE_PACKAGE = REPO_ROOT / "solutions" / "hero_transformer"
FIGURE_DIR = "figures"

# SVG that does not depend on the clock, the matplotlib build's hash seed or the fonts
# installed where it is viewed: text stays text, laid out with matplotlib's own DejaVu.
STYLE = {
    "svg.hashsalt": "hero_transformer",
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.dpi": 100,
}
METADATA = {"Date": None, "Creator": None}

# The short training run behind every "trained model" figure.
SHORT_RUN = dict(d_model=64, n_heads=4, n_layers=2, d_ff=256, block_size=16,
                 steps=300, batch_size=32, lr=3e-3, eval_every=50, seed=1337)
MICRO_STEPS = 200  # chapter 00's model, trained on this many names for its walk-through

BLUE, ORANGE, GREEN, RED, GREY = "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#7f7f7f"


# ------------------------------------------------------------------ the reference


@lru_cache(maxsize=1)
def reference() -> SimpleNamespace:
    """solutions/hero_transformer as a package of its own name, so neither the student
    copy at the repository root nor an already imported `hero_transformer` is used."""
    name = "_figures_hero_transformer"
    spec = importlib.util.spec_from_file_location(name, REFERENCE_PACKAGE / "__init__.py",
                                                  submodule_search_locations=[str(REFERENCE_PACKAGE)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    parts = ("model", "micro", "tokenizer", "train", "sample", "backward", "data")
    return SimpleNamespace(**{part: importlib.import_module(f"{name}.{part}") for part in parts})


@lru_cache(maxsize=1)
def names():
    ref = reference()
    every = ref.data.load_names()
    train, validation = ref.data.train_validation_split(every)
    return every, train, validation, ref.tokenizer.CharTokenizer(every)


@lru_cache(maxsize=1)
def short_run():
    """(model, tokenizer, history, bigram baseline) of SHORT_RUN on the names."""
    import torch

    ref = reference()
    _, train, validation, tokenizer = names()
    settings = SHORT_RUN
    torch.manual_seed(settings["seed"])
    cfg = ref.model.Config(vocab_size=tokenizer.vocab_size, block_size=settings["block_size"],
                           d_model=settings["d_model"], n_heads=settings["n_heads"],
                           n_layers=settings["n_layers"], d_ff=settings["d_ff"])
    model = ref.model.TransformerLM(cfg)
    history = ref.train.train(model, train, validation, tokenizer, steps=settings["steps"],
                              batch_size=settings["batch_size"], lr=settings["lr"],
                              eval_every=settings["eval_every"], seed=settings["seed"])
    model.eval()
    baseline = ref.train.bigram_baseline(train, validation, tokenizer, block_size=cfg.block_size)
    return model, tokenizer, history, baseline


def _label(tokenizer, i: int) -> str:
    return "BOS" if i == tokenizer.bos_id else tokenizer.decode([i])


# --------------------------------------------------------------- drawing helpers


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _box(ax, x, y, text, width=1.0, height=0.5, face="#eef3fb", edge=BLUE, size=9, weight="normal"):
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=face, edgecolor=edge, linewidth=1.2))
    ax.text(x, y, text, ha="center", va="center", fontsize=size, weight=weight)


def _arrow(ax, start, end, color="black", text=None, offset=(0.0, 0.12), style="-|>", size=8, rad=0.0, at=0.5):
    ax.annotate("", xy=end, xytext=start,
                arrowprops=dict(arrowstyle=style, color=color, lw=1.2, shrinkA=0, shrinkB=0,
                                connectionstyle=f"arc3,rad={rad}"))
    if text:
        ax.text(start[0] + at * (end[0] - start[0]) + offset[0], start[1] + at * (end[1] - start[1]) + offset[1],
                text, ha="center", va="center", fontsize=size, color=color,
                bbox=dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none"))


def _heatmap(ax, weights, rows, cols, title=None, vmax=1.0, masked_above=None, fmt="{:.2f}", size=7, hatch="///"):
    """Weights as coloured cells with their values; cells where masked_above says so
    are hatched grey (a masked score, weight exactly 0)."""
    import numpy as np

    data = np.asarray(weights, dtype=float)
    ax.pcolormesh(np.arange(data.shape[1] + 1), np.arange(data.shape[0] + 1), data, cmap="Blues",
                  vmin=0.0, vmax=vmax, edgecolors="white", linewidth=0.8)
    for r in range(data.shape[0]):
        for c in range(data.shape[1]):
            if masked_above is not None and masked_above(r, c):
                ax.add_patch(_plt().Rectangle((c, r), 1, 1, facecolor="#dddddd", hatch=hatch, edgecolor="white"))
                continue
            value = data[r, c]
            ax.text(c + 0.5, r + 0.5, fmt.format(value), ha="center", va="center", fontsize=size,
                    color="white" if value > 0.6 * vmax else "black")
    _grid_frame(ax, data.shape, rows, cols, title)


def _grid_frame(ax, shape, rows, cols, title):
    """The frame every grid of cells shares: labels at cell centres, row 0 on top,
    square cells, no ticks or spines."""
    import numpy as np

    ax.set_xticks(np.arange(shape[1]) + 0.5, cols, fontsize=8)
    ax.set_yticks(np.arange(shape[0]) + 0.5, rows, fontsize=8)
    ax.invert_yaxis()
    ax.set_aspect("equal")
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    if title:
        ax.set_title(title, fontsize=9)


def _blank(ax):
    ax.set_axis_off()


# --------------------------------------------------------------------- chapter 00


def micro_graph():
    """L = (a·b + a)² at a = 2, b = −3: every node's value and gradient, every edge's
    local derivative; a is used twice and its two contributions add."""
    micro = reference().micro
    a, b = micro.Value(2.0), micro.Value(-3.0)
    c = a * b
    d = c + a
    loss = d**2
    loss.backward()

    plt = _plt()
    fig, ax = plt.subplots(figsize=(8.4, 3.6))
    nodes = {"a": (0.0, 1.2, a), "b": (0.0, -0.9, b), "c = a·b": (3.0, -0.9, c), "d = c + a": (5.2, 0.3, d),
             "L = d²": (8.0, 0.3, loss)}
    for name, (x, y, v) in nodes.items():
        leaf = name in ("a", "b")
        _box(ax, x, y, f"{name}\ndata {v.data:g}\ngrad {v.grad:g}", width=1.5, height=0.95,
             face="#fff4e6" if leaf else "#eef3fb", edge=ORANGE if leaf else BLUE)
    edges = [("a", "c = a·b", f"∂c/∂a = b = {c._local_grads[0]:g}", 0.35, 0.0),
             ("b", "c = a·b", f"∂c/∂b = a = {c._local_grads[1]:g}", 0.5, 0.25),
             ("c = a·b", "d = c + a", f"∂d/∂c = {d._local_grads[0]:g}", 0.5, 0.0),
             ("a", "d = c + a", f"∂d/∂a = {d._local_grads[1]:g}", 0.5, 0.0),
             ("d = c + a", "L = d²", f"∂L/∂d = 2d = {loss._local_grads[0]:g}", 0.5, 0.25)]
    for src, dst, text, at, lift in edges:
        x0, y0, _ = nodes[src]
        x1, y1, _ = nodes[dst]
        _arrow(ax, (x0 + 0.75, y0), (x1 - 0.75, y1), text=text, offset=(0.0, lift), at=at)
    ax.text(3.8, -1.85, f"a.grad = (∂c/∂a)·c.grad + (∂d/∂a)·d.grad = ({b.data:g})·({c.grad:g}) + 1·({d.grad:g}) "
            f"= {a.grad:g}:  two paths, two contributions, added", ha="center", fontsize=9, color=RED)
    ax.text(3.8, 2.05, "forward: data flows left to right.  backward: grad flows right to left, "
            "child.grad += local × node.grad", ha="center", fontsize=9)
    ax.set_xlim(-0.9, 8.9)
    ax.set_ylim(-2.1, 2.3)
    _blank(ax)
    return fig


def micro_attention():
    """The four heads of chapter 00's model, trained on MICRO_STEPS names, on 'ana':
    each query position's weights over the keys it may see."""
    micro = reference().micro
    _, train, _, tokenizer = names()
    was_enabled = gc.isenabled()
    gc.disable()  # the Value graphs hold no cycles; collecting only slows training down
    try:
        model = micro.MicroGPT(tokenizer.vocab_size, seed=42)
        optimizer = micro.Adam(model.params, lr=0.01, total_steps=MICRO_STEPS)
        for step in range(MICRO_STEPS):
            micro.train_step(model, optimizer, tokenizer.encode_document(train[step]))
        ids = tokenizer.encode_document("ana")
        rows = [[] for _ in range(model.n_head)]
        model.start_sequence()
        for pos in range(len(ids) - 1):
            model.forward(ids[pos], pos)
            for head in range(model.n_head):
                rows[head].append(model.last_attention[0][head] + [0.0] * (len(ids) - 2 - pos))
        model.finish_sequence()
    finally:
        if was_enabled:
            gc.enable()

    plt = _plt()
    labels = [f"{p} {_label(tokenizer, i)}" for p, i in enumerate(ids[:-1])]
    fig, axes = plt.subplots(1, model.n_head, figsize=(9.6, 2.9))
    for head, ax in enumerate(axes):
        _heatmap(ax, rows[head], labels if head == 0 else [""] * len(labels), labels, title=f"head {head}",
                 masked_above=lambda r, c: c > r)
    axes[0].set_ylabel("query position")
    fig.supxlabel("key position (what the query looks at)", fontsize=9)
    fig.suptitle(f"'ana' after {MICRO_STEPS} training steps: each row sums to 1; keys after the query are never seen",
                 fontsize=10)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------- chapter 01


def token_windows():
    """'ana' as ids and its four (input, target) pairs; 'olivia' cut to block_size 4."""
    _, _, _, tokenizer = names()
    windows = reference().tokenizer.training_windows
    plt = _plt()
    fig, axes = plt.subplots(2, 1, figsize=(8.0, 4.6))
    for ax, (text, block) in zip(axes, (("ana", 16), ("olivia", 4))):
        ids = tokenizer.encode_document(text)
        inputs, targets = windows(ids, block)
        for p, i in enumerate(ids):
            scored_in = p < len(inputs)
            _box(ax, p, 2.0, f"{_label(tokenizer, i)}\n{i}", width=0.8, height=0.7)
            if p < len(ids) - 1:
                color = BLUE if scored_in else GREY
                _box(ax, p, 0.55, f"{_label(tokenizer, i)}", width=0.7, height=0.45,
                     face="#eef3fb" if scored_in else "#f2f2f2", edge=color)
                nxt = ids[p + 1]
                _box(ax, p, -0.45, f"{_label(tokenizer, nxt)}", width=0.7, height=0.45,
                     face="#fff4e6" if scored_in else "#f2f2f2", edge=ORANGE if scored_in else GREY)
                _arrow(ax, (p, 0.3), (p, -0.2), color=color)
                ax.text(p, 1.05, f"pos {p}", ha="center", fontsize=7, color=color)
        ax.text(-0.9, 2.0, "ids", ha="right", va="center", fontsize=9)
        ax.text(-0.9, 0.55, "input", ha="right", va="center", fontsize=9, color=BLUE)
        ax.text(-0.9, -0.45, "target", ha="right", va="center", fontsize=9, color=ORANGE)
        dropped = len(ids) - 1 - len(inputs)
        note = (f"'{text}', block_size {block}: {len(ids)} ids, min({block}, {len(ids)} − 1) = {len(inputs)} "
                f"scored positions")
        if dropped:
            note += f"; the {dropped} grey pairs past the window are not scored"
        ax.set_title(note, fontsize=9)
        ax.set_xlim(-2.0, 8.0)
        ax.set_ylim(-0.9, 2.5)
        _blank(ax)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------- chapter 02


def embedding_lookup():
    """ids (2, 0, 4) as one-hot rows times the table W [V, d] give the same rows as the
    reference TokenEmbedding's lookup."""
    import torch

    embedding = reference().model.TokenEmbedding(6, 4)
    generator = torch.Generator().manual_seed(2)
    with torch.no_grad():
        embedding.weight.copy_(torch.randn(6, 4, generator=generator).round(decimals=1))
        ids = torch.tensor([[2, 0, 4]])
        looked_up = embedding(ids)[0]
    one_hot = torch.nn.functional.one_hot(ids[0], 6).double()
    product = one_hot @ embedding.weight.detach().double()
    assert torch.allclose(product, looked_up.double())
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(9.4, 3.0), gridspec_kw={"width_ratios": [6, 4, 4]})
    rows = [f"id {i}" for i in ids[0].tolist()]
    _heatmap(axes[0], one_hot.tolist(), rows, [str(v) for v in range(6)], title="one-hot rows [T=3, V=6]",
             fmt="{:.0f}")
    weight = embedding.weight.detach()
    scale = float(weight.abs().max())
    _signed_heatmap(axes[1], weight.tolist(), [f"row {v}" for v in range(6)], scale, "table W [V=6, d=4]",
                    highlight=ids[0].tolist())
    _signed_heatmap(axes[2], looked_up.tolist(), rows, scale, "lookup = one-hot · W  [3, 4]")
    fig.text(0.425, 0.47, "×", fontsize=16, ha="center", va="center")
    fig.text(0.70, 0.47, "=", fontsize=16, ha="center", va="center")
    fig.suptitle("a lookup is a product with one-hot rows, minus the V − 1 multiplications by zero per token",
                 fontsize=9)
    fig.tight_layout()
    return fig


def _signed_heatmap(ax, values, rows, scale, title, highlight=()):
    import numpy as np

    data = np.asarray(values, dtype=float)
    ax.pcolormesh(np.arange(data.shape[1] + 1), np.arange(data.shape[0] + 1), data, cmap="RdBu_r",
                  vmin=-scale, vmax=scale, edgecolors="white", linewidth=0.8)
    for r in range(data.shape[0]):
        for c in range(data.shape[1]):
            ax.text(c + 0.5, r + 0.5, f"{data[r, c]:.1f}", ha="center", va="center", fontsize=7,
                    color="white" if abs(data[r, c]) > 0.6 * scale else "black")
    for r in highlight:
        ax.add_patch(_plt().Rectangle((0, r), data.shape[1], 1, fill=False, edgecolor="black", linewidth=1.6))
    _grid_frame(ax, data.shape, rows, [str(c) for c in range(data.shape[1])], title)


# ----------------------------------------------------------------- chapters 03, 04


def _cache_calls():
    """Calls of 3, 1, 1, 1 tokens on the short-run model through the KV cache: per call
    the positions fed, and the time length of the cache it returns (the real tensors)."""
    import torch

    model, tokenizer, _, _ = short_run()
    ids = tokenizer.encode_document("olivia")[:6]
    calls, past, start = [], None, 0
    for length in (3, 1, 1, 1):
        chunk = torch.tensor([ids[start:start + length]])
        with torch.no_grad():
            _, _, past = model(chunk, past_key_values=past, use_cache=True)
        calls.append((list(range(start, start + length)), tuple(past[0][0].shape)))
        start += length
    return ids, calls, tokenizer


def position_rows():
    """Which position row each call adds: the reference PositionEmbedding with an
    identity table reports the rows it used; a call past block_size is refused."""
    import torch

    positions = reference().model.PositionEmbedding
    block = 6
    table = positions(block, block)
    with torch.no_grad():
        table.weight.copy_(torch.eye(block))
    plan = [(3, 0), (1, 3), (1, 4), (1, 5), (1, 6)]
    rows, refused = [], None
    for t, past in plan:
        try:
            out = table(torch.zeros(1, t, block), past_length=past)
            rows.append(out[0].argmax(dim=-1).tolist())
        except ValueError as error:
            rows.append(None)
            refused = str(error)

    plt = _plt()
    fig, ax = plt.subplots(figsize=(8.0, 3.2))
    for call, ((t, past), used) in enumerate(zip(plan, rows)):
        y = len(plan) - 1 - call
        for p in range(block + 1):
            if used is not None and p in used:
                _box(ax, p, y, f"row {p}", width=0.85, height=0.7, face="#cfe2f3", edge=BLUE, size=8)
            elif p < past:
                _box(ax, p, y, "earlier", width=0.85, height=0.7, face="#f2f2f2", edge=GREY, size=7)
            elif used is None and p == past:
                _box(ax, p, y, "no row", width=0.85, height=0.7, face="#fde0dd", edge=RED, size=8)
        label = f"call {call + 1}: T={t}, past_length={past}"
        ax.text(-0.7, y, label, ha="right", va="center", fontsize=8, color=RED if used is None else "black")
    ax.axvline(block - 0.5, color=RED, linestyle="--", linewidth=1)
    ax.text(block - 0.45, len(plan) - 0.45, f"block_size = {block}", color=RED, fontsize=8)
    ax.set_title("each call adds rows past_length … past_length + T − 1; the last call raises a ValueError",
                 fontsize=9)
    ax.set_xlim(-4.2, block + 0.8)
    ax.set_ylim(-0.6, len(plan) - 0.1)
    _blank(ax)
    assert refused is not None  # the plan ends with a call that must not fit
    return fig


def causal_mask():
    """The attention weights of one head of a small random CausalSelfAttention: six
    tokens in one call, then two new tokens after four cached ones."""
    import torch

    model = reference().model
    torch.manual_seed(0)
    attention = model.CausalSelfAttention(model.Config(vocab_size=8, block_size=8, d_model=8, n_heads=2,
                                                       n_layers=1, d_ff=8))
    x = torch.randn(1, 6, 8)
    with torch.no_grad():
        attention(x)
        full = attention.last_attention[0, 0].tolist()
        _, past = attention(x[:, :4], use_cache=True)
        attention(x[:, 4:], past_key_value=past, use_cache=True)
        cached = attention.last_attention[0, 0].tolist()

    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.6), gridspec_kw={"width_ratios": [6, 6]})
    keys = [str(k) for k in range(6)]
    _heatmap(axes[0], full, keys, keys, title="one call, T = 6: weights [6, 6]", masked_above=lambda r, c: c > r)
    _heatmap(axes[1], cached, ["4", "5"], keys, title="T = 2 after T_past = 4 cached: weights [2, 6]",
             masked_above=lambda r, c: c > r + 4)
    axes[0].set_ylabel("query position")
    axes[1].set_ylabel("query position")
    for ax in axes:
        ax.set_xlabel("key position")
    fig.suptitle("hatched: score −∞ before the softmax, weight exactly 0 (a later key).  "
                 "The diagonal is never masked.", fontsize=9)
    fig.tight_layout()
    return fig


def attention_heads():
    """Every head of both layers of the short-run model on 'olivia'."""
    import torch

    model, tokenizer, _, _ = short_run()
    ids = tokenizer.encode_document("olivia")[:-1]
    with torch.no_grad():
        model(torch.tensor([ids]))
    labels = [_label(tokenizer, i) for i in ids]
    plt = _plt()
    n_layers, n_heads = len(model.blocks), model.cfg.n_heads
    fig, axes = plt.subplots(n_layers, n_heads, figsize=(10.0, 5.6))
    for layer, block in enumerate(model.blocks):
        weights = block.attention.last_attention[0]
        for head in range(n_heads):
            ax = axes[layer][head]
            _heatmap(ax, weights[head].tolist(), labels if head == 0 else [""] * len(labels), labels,
                     title=f"layer {layer}, head {head}", masked_above=lambda r, c: c > r, fmt="{:.1f}", size=6,
                     hatch=None)
        axes[layer][0].set_ylabel("query (predicts the next letter)", fontsize=8)
    fig.suptitle(f"'olivia' through the model of a {SHORT_RUN['steps']}-step training run: "
                 "heads learn different patterns", fontsize=10)
    fig.tight_layout()
    return fig


def kv_cache():
    """What the cache holds after each call: the prompt once, then one token per call."""
    ids, calls, tokenizer = _cache_calls()
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8.6, 3.0))
    total = len(ids)
    for call, (fed, shape) in enumerate(calls):
        y = len(calls) - 1 - call
        for p in range(total):
            if p in fed:
                _box(ax, p, y, f"{_label(tokenizer, ids[p])}\nnew k, v", width=0.9, height=0.75, face="#cfe2f3",
                     edge=BLUE, size=7)
            elif p < fed[0]:
                _box(ax, p, y, f"{_label(tokenizer, ids[p])}\ncached", width=0.9, height=0.75, face="#f2f2f2",
                     edge=GREY, size=7)
        ax.text(-0.7, y, f"call {call + 1}: feeds {len(fed)} token{'s' if len(fed) > 1 else ''}", ha="right",
                va="center", fontsize=8)
        ax.text(total - 0.3, y, f"present keys {list(shape)}", ha="left", va="center", fontsize=8, color=BLUE)
    ax.set_title("[B, h, T_past + T, d_h]: keys and values of earlier positions are kept, never recomputed",
                 fontsize=9)
    ax.set_xlim(-3.6, total + 2.6)
    ax.set_ylim(-0.6, len(calls) - 0.3)
    _blank(ax)
    return fig


# --------------------------------------------------------------------- chapter 05


def gelu_forms():
    """Exact GELU, its tanh form and ReLU; then tanh − exact, which is what the 1e-9
    comparison of the checks sees."""
    import torch

    gelu = reference().model.gelu
    x = torch.linspace(-4.0, 4.0, 401, dtype=torch.float64)
    exact = gelu(x)
    tanh_form = 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    relu = torch.clamp(x, min=0)
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.6))
    axes[0].plot(x, relu, color=GREY, linestyle="--", label="ReLU max(0, a)")
    axes[0].plot(x, tanh_form, color=ORANGE, linewidth=3, alpha=0.5, label="tanh form")
    axes[0].plot(x, exact, color=BLUE, label="exact a·Φ(a)")
    axes[0].plot([-1.0], [float(gelu(torch.tensor(-1.0, dtype=torch.float64)))], "o", color=BLUE)
    axes[0].annotate("g(−1) ≈ −0.1587", (-1.0, -0.1587), (-3.8, 1.2), fontsize=8,
                     arrowprops=dict(arrowstyle="->", color=BLUE))
    axes[0].set_title("GELU is ReLU with a soft knee, negative for a < 0")
    axes[0].set_xlabel("a")
    axes[0].legend(fontsize=8, loc="upper left")
    axes[0].grid(alpha=0.3)
    diff = tanh_form - exact
    worst = int(diff.abs().argmax())
    axes[1].plot(x, diff * 1e4, color=ORANGE)
    axes[1].axhline(0.0, color="black", linewidth=0.6)
    axes[1].plot([float(x[worst])], [float(diff[worst]) * 1e4], "o", color=RED)
    axes[1].annotate(f"{float(diff[worst]):.1e} at a ≈ ±{abs(float(x[worst])):.2f}",
                     (float(x[worst]), float(diff[worst]) * 1e4), (-1.0, float(diff[worst]) * 1e4 * 0.8),
                     fontsize=8, arrowprops=dict(arrowstyle="->", color=RED))
    axes[1].set_title("tanh form − exact, in units of 10⁻⁴")
    axes[1].set_xlabel("a")
    axes[1].grid(alpha=0.3)
    fig.tight_layout()
    return fig


def layer_norm_batch():
    """Eight positions of a batch, each with its own mean and spread, before and after
    the reference LayerNorm; the last one is the constant vector (2, 2, …)."""
    import torch

    norm = reference().model.LayerNorm(12)
    generator = torch.Generator().manual_seed(5)
    centres = torch.tensor([-4.0, -1.5, 0.0, 1.0, 2.5, 4.0, 0.5, 2.0])
    spreads = torch.tensor([0.5, 2.0, 1.0, 3.0, 0.2, 1.5, 0.03, 0.0])
    x = centres[:, None] + spreads[:, None] * torch.randn(8, 12, generator=generator)
    with torch.no_grad():
        y = norm(x)
    variance = ((x - x.mean(-1, keepdim=True)) ** 2).mean(-1)
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.8), sharey=False)
    for ax, data, title in ((axes[0], x, "before: each position has its own mean and variance"),
                            (axes[1], y, "after LayerNorm (γ = 1, β = 0), over the last axis")):
        for p in range(8):
            ax.plot([p] * 12, data[p].tolist(), "o", color=BLUE, alpha=0.55, markersize=4)
            ax.plot([p - 0.3, p + 0.3], [float(data[p].mean())] * 2, color=RED, linewidth=1.5)
        ax.set_xticks(range(8), [f"pos {p}" for p in range(8)], fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    for p in range(8):
        v = float(variance[p])
        after = float((y[p] ** 2).mean())
        axes[1].text(p, 2.55 if p % 2 == 0 else 2.25, f"{after:.4f}" if v > 1e-3 else f"{after:.3f}",
                     ha="center", fontsize=6.5, color=GREEN)
    axes[1].text(3.5, 2.95, "variance after = v / (v + ε)", ha="center", fontsize=8, color=GREEN)
    axes[1].set_ylim(-2.8, 3.3)
    axes[0].set_ylabel("feature values (red: the position's mean)")
    fig.tight_layout()
    return fig


def block_diagram():
    """The pre-LN block as boxes, each labelled with the shape the reference block
    produces on the B=2, T=3, d=4, h=2, f=8 walk-through (recorded with hooks)."""
    import torch

    model = reference().model
    torch.manual_seed(0)
    block = model.TransformerBlock(model.Config(vocab_size=10, block_size=6, d_model=4, n_heads=2,
                                                n_layers=1, d_ff=8))
    shapes = {}

    def record(name):
        def hook(_module, _inputs, output):
            shapes[name] = list((output[0] if isinstance(output, tuple) else output).shape)
        return hook

    for name in ("ln_attention", "attention", "ln_feedforward", "feedforward"):
        getattr(block, name).register_forward_hook(record(name))
    block.feedforward.fc1.register_forward_hook(record("fc1"))
    x = torch.randn(2, 3, 4)
    with torch.no_grad():
        y, present = block(x, use_cache=True)
    weights = list(block.attention.last_attention.shape)

    plt = _plt()
    fig, ax = plt.subplots(figsize=(10.0, 3.4))
    s = lambda v: "[" + ", ".join(map(str, v)) + "]"  # noqa: E731
    _box(ax, 0.0, 0.0, f"X\n{s(list(x.shape))}", width=1.1, height=0.8, face="#f2f2f2", edge="black")
    _box(ax, 1.7, 1.3, f"LN₁\n{s(shapes['ln_attention'])}", width=1.2, height=0.8)
    _box(ax, 3.6, 1.3, f"A: attention\nQ, K, V {s(list(present[0].shape))}\nweights {s(weights)}\n→ {s(shapes['attention'])}",
         width=2.1, height=1.25)
    _box(ax, 5.2, 0.0, "+", width=0.5, height=0.5, face="white", edge="black", size=12)
    _box(ax, 6.1, 0.0, f"U\n{s(shapes['attention'])}", width=0.9, height=0.8, face="#f2f2f2", edge="black")
    _box(ax, 7.3, 1.3, f"LN₂\n{s(shapes['ln_feedforward'])}", width=1.2, height=0.8)
    _box(ax, 9.2, 1.3, f"F: fc1 → {s(shapes['fc1'])}\nGELU\nfc2 → {s(shapes['feedforward'])}", width=2.1, height=1.25)
    _box(ax, 10.6, 0.0, "+", width=0.5, height=0.5, face="white", edge="black", size=12)
    _box(ax, 11.6, 0.0, f"Y\n{s(list(y.shape))}", width=1.0, height=0.8, face="#f2f2f2", edge="black")
    _arrow(ax, (0.55, 0.0), (4.95, 0.0), color=GREY, text="skip: X unchanged", offset=(0.4, -0.25))
    _arrow(ax, (0.3, 0.4), (1.1, 1.3))
    _arrow(ax, (2.3, 1.3), (2.55, 1.3))
    _arrow(ax, (4.65, 1.0), (5.1, 0.25))
    _arrow(ax, (5.45, 0.0), (5.65, 0.0))
    _arrow(ax, (6.55, 0.0), (10.35, 0.0), color=GREY, text="skip: U unchanged", offset=(0.9, -0.25))
    _arrow(ax, (6.4, 0.4), (6.7, 1.3))
    _arrow(ax, (7.9, 1.3), (8.15, 1.3))
    _arrow(ax, (10.25, 1.0), (10.5, 0.25))
    _arrow(ax, (10.85, 0.0), (11.1, 0.0))
    ax.text(5.8, -0.95, "U = X + A(LN₁(X))        Y = U + F(LN₂(U))        "
            "LayerNorm only at the entrance of each branch; the output is not normalised",
            ha="center", fontsize=9)
    ax.set_xlim(-0.7, 12.3)
    ax.set_ylim(-1.2, 2.1)
    _blank(ax)
    return fig


# --------------------------------------------------------------------- chapter 06


def residual_gradient():
    """dx = grad_out (skip, I) + the branch's term (J_R), from the reference backward of
    y = x + fc2(gelu(fc1(LN(x)))) for one position; with fc2 = 0 only the skip is left."""
    import torch

    backward = reference().backward
    generator = torch.Generator().manual_seed(3)
    d, f = 6, 12
    rand = lambda *shape: torch.randn(*shape, generator=generator, dtype=torch.float64)  # noqa: E731
    x, g = rand(d), rand(d)
    gamma, beta = 1 + 0.1 * rand(d), 0.1 * rand(d)
    w1, b1, w2, b2 = 0.6 * rand(f, d), 0.1 * rand(f), 0.6 * rand(d, f), 0.1 * rand(d)
    dx = backward.residual_feedforward_backward(g, x, gamma, beta, w1, b1, w2, b2)[0]
    dead = backward.residual_feedforward_backward(g, x, gamma, beta, w1, b1, torch.zeros_like(w2), b2)[0]

    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10.0, 3.6), gridspec_kw={"width_ratios": [1.1, 1]})
    ax = axes[0]
    _box(ax, 0.0, 0.0, "x", width=0.6, height=0.5, face="#f2f2f2", edge="black")
    _box(ax, 2.2, 1.0, "R: LN → fc1 → GELU → fc2", width=2.6, height=0.55)
    _box(ax, 4.4, 0.0, "+", width=0.45, height=0.45, face="white", edge="black", size=12)
    _box(ax, 5.4, 0.0, "y", width=0.6, height=0.5, face="#f2f2f2", edge="black")
    _arrow(ax, (0.3, 0.05), (4.15, 0.05), color=GREY)
    _arrow(ax, (0.2, 0.25), (0.9, 0.8), color=GREY)
    _arrow(ax, (3.5, 0.8), (4.3, 0.25), color=GREY)
    _arrow(ax, (4.65, 0.0), (5.1, 0.0), color=GREY)
    _arrow(ax, (4.15, -0.15), (0.3, -0.15), color=GREEN, text="I · grad_out: straight through", offset=(0, -0.22))
    _arrow(ax, (4.4, 0.3), (0.0, 0.3), color=ORANGE, text="J_Rᵀ · grad_out: back through every layer of R",
           offset=(0, 1.25), rad=0.6)
    _arrow(ax, (5.1, -0.15), (4.65, -0.15), color="black")
    ax.text(2.6, -1.0, "∂y/∂x = I + J_R,   so   dx = grad_out + (the branch's dx)", ha="center", fontsize=9)
    ax.set_xlim(-0.5, 6.0)
    ax.set_ylim(-1.3, 2.3)
    _blank(ax)

    ax = axes[1]
    positions = torch.arange(d, dtype=torch.float64)
    width = 0.2
    ax.bar(positions - 1.5 * width, g, width, color=GREEN, label="skip: grad_out")
    ax.bar(positions - 0.5 * width, dx - g, width, color=ORANGE, label="branch: dx − grad_out")
    ax.bar(positions + 0.5 * width, dx, width, color=BLUE, label="dx (their sum)")
    ax.bar(positions + 1.5 * width, dead, width, color=GREY, label="dx with fc2 = 0")
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xticks(range(d), [f"x{i}" for i in range(d)])
    ax.set_title("one position, d = 6: the two terms add (and may cancel)", fontsize=9)
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------- chapter 07


def parameter_ledger():
    """Where the 107,776 parameters of V=32, C=64, N=2, d=64, h=4, f=256 live, counted
    from the registered parameters of the reference TransformerLM."""
    model = reference().model
    cfg = model.Config(vocab_size=32, block_size=64, d_model=64, n_heads=4, n_layers=2, d_ff=256)
    lm = model.TransformerLM(cfg)
    groups: dict[str, int] = {}

    def part(name: str) -> str:
        if name.startswith("blocks."):
            i = name.split(".")[1]
            if ".attention." in name:
                return f"block {i}: attention Q, K, V, O"
            if ".feedforward." in name:
                return f"block {i}: feed-forward {'weights' if name.endswith('weight') else 'biases'}"
            return f"block {i}: two LayerNorms"
        return {"token_embedding.weight": "token embedding", "position_embedding.weight": "positions",
                "head.weight": "head (untied)"}.get(name, "final LayerNorm")

    for name, p in lm.named_parameters():
        groups[part(name)] = groups.get(part(name), 0) + p.numel()
    total = sum(groups.values())
    labels = list(groups)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8.6, 4.2))
    colours = [ORANGE if "block" in label else BLUE for label in labels]
    ax.barh(range(len(labels)), [groups[k] for k in labels], color=colours)
    for i, label in enumerate(labels):
        ax.text(groups[label] + 300, i, f"{groups[label]:,}  ({100 * groups[label] / total:.1f} %)", va="center",
                fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(groups.values()) * 1.3)
    ax.set_xlabel("parameters")
    ax.set_title(f"V=32, C=64, N=2, d=64, h=4, f=256: {total:,} parameters, "
                 f"{100 * sum(v for k, v in groups.items() if 'block' in k) / total:.0f} % in the blocks", fontsize=10)
    ax.grid(alpha=0.3, axis="x")
    assert total == model.parameter_count(cfg)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------- chapter 08


def loss_curve():
    """The short run's training and validation loss against the bigram baseline and
    the uniform guess ln 27."""
    import torch

    _, tokenizer, history, baseline = short_run()
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8.0, 4.0))
    losses = torch.tensor(history["train_loss"])
    window = 20
    smooth = losses.unfold(0, window, 1).mean(dim=1)
    ax.plot(history["step"], losses.tolist(), color=BLUE, alpha=0.25, linewidth=0.8, label="train (one batch)")
    ax.plot(history["step"][window - 1:], smooth.tolist(), color=BLUE, label=f"train (mean of {window} steps)")
    ax.plot(history["val_step"], history["val_loss"], "o-", color=ORANGE, label="validation")
    ax.axhline(baseline, color=GREY, linestyle="--", label=f"bigram baseline {baseline:.3f}")
    uniform = math.log(tokenizer.vocab_size)
    ax.axhline(uniform, color=RED, linestyle=":", label=f"uniform guess ln {tokenizer.vocab_size} = {uniform:.3f}")
    ax.set_ylim(1.9, 3.5)
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats per character)")
    ax.set_title(f"{SHORT_RUN['steps']} steps of {SHORT_RUN['batch_size']} names (seed {SHORT_RUN['seed']}): "
                 f"validation {history['val_loss'][-1]:.3f}", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def lr_schedule():
    """learning_rate over `make train`'s 3000 steps: warm-up, then cosine to 10 %."""
    train = reference().train
    steps, lr = train.DEFAULTS["steps"], train.DEFAULTS["lr"]
    warmup = max(1, steps // 20)
    values = [train.learning_rate(step, steps, lr, warmup) for step in range(steps)]
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8.0, 3.2))
    ax.plot(range(steps), values, color=BLUE)
    ax.axvline(warmup, color=GREY, linestyle="--", linewidth=0.8)
    ax.annotate(f"linear warm-up: {warmup} steps", (warmup, lr), (warmup + 200, lr * 0.98), fontsize=8, va="top",
                arrowprops=dict(arrowstyle="->", color=GREY))
    ax.annotate(f"last step: {values[-1]:.1e} = 10 % of lr", (steps - 1, values[-1]), (steps * 0.55, lr * 0.25),
                fontsize=8, arrowprops=dict(arrowstyle="->", color=GREY))
    ax.set_xlabel("step")
    ax.set_ylabel("learning rate")
    ax.set_title(f"make train: lr {lr:g}, {steps} steps, warm-up then cosine decay", fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------- chapter 09


def temperature_topk():
    """The short-run model's distribution of a name's first letter (after BOS) under
    three temperatures and under top-k = 5."""
    import torch

    model, tokenizer, _, _ = short_run()
    with torch.no_grad():
        logits = model(torch.tensor([[tokenizer.bos_id]]))[0][0, -1].double()
    labels = [_label(tokenizer, i) for i in range(tokenizer.vocab_size)]
    settings = [("τ = 0.5 (sharper)", 0.5, None), ("τ = 1 (the model's own)", 1.0, None),
                ("τ = 2 (flatter)", 2.0, None), ("τ = 1, top-k = 5", 1.0, 5)]
    plt = _plt()
    fig, axes = plt.subplots(4, 1, figsize=(8.6, 6.4), sharex=True)
    for ax, (title, tau, k) in zip(axes, settings):
        scaled = logits / tau
        if k is not None:
            kept = torch.topk(scaled, k).indices
            scaled = torch.full_like(scaled, float("-inf")).scatter(0, kept, scaled[kept])
        probs = torch.softmax(scaled, dim=-1)
        ax.bar(range(len(labels)), probs.tolist(), color=ORANGE if k else BLUE)
        ax.set_ylim(0, 0.42)
        ax.text(0.99, 0.85, title, transform=ax.transAxes, ha="right", fontsize=9)
        ax.set_ylabel("p", fontsize=8)
        ax.grid(alpha=0.3, axis="y")
    axes[-1].set_xticks(range(len(labels)), labels, fontsize=7)
    axes[0].set_title("the first letter of a name: softmax(logits / τ), and top-k keeping the 5 largest", fontsize=10)
    fig.tight_layout()
    return fig


def sampled_names():
    """Names the short-run model generates through the KV cache at four temperatures
    (seed 0); names not in the 2017 list are bold."""
    import torch

    model, tokenizer, _, _ = short_run()
    every = set(names()[0])
    generate = reference().sample.generate
    temperatures = (0.3, 0.7, 1.0, 1.5)
    per = 10
    columns = []
    for tau in temperatures:
        generator = torch.Generator().manual_seed(0)
        prompt = torch.full((per, 1), tokenizer.bos_id, dtype=torch.long)
        out = generate(model, prompt, max_new_tokens=model.cfg.block_size, temperature=tau,
                       generator=generator, stop_id=tokenizer.bos_id)
        columns.append([tokenizer.decode(row[1:]) for row in out.tolist()])
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8.0, 3.6))
    for c, (tau, column) in enumerate(zip(temperatures, columns)):
        ax.text(c, per + 0.3, f"τ = {tau}", ha="center", fontsize=10, weight="bold", color=BLUE)
        for r, name in enumerate(column):
            new = name not in every
            ax.text(c, per - 1 - r, name or "(empty)", ha="center", fontsize=9, weight="bold" if new else "normal",
                    color="black" if new else GREY)
    ax.set_xlim(-0.6, len(temperatures) - 0.4)
    ax.set_ylim(-0.8, per + 0.9)
    ax.set_title("grey: in the 2017 list; bold: made up.  One seed for every column: "
                 "low τ keeps to likely letters, high τ wanders to rare ones",
                 fontsize=9, pad=14)
    _blank(ax)
    return fig


# ----------------------------------------------------------------------- the list


@dataclass(frozen=True)
class Figure:
    folder: str  # the chapter folder under assignments/
    name: str  # file name, .svg
    draw: Callable  # () -> matplotlib Figure

    @property
    def path(self) -> Path:
        return ASSIGNMENTS / self.folder / FIGURE_DIR / self.name


FIGURES = (
    Figure("ch00_micro", "computation_graph.svg", micro_graph),
    Figure("ch00_micro", "ana_attention.svg", micro_attention),
    Figure("ch01_tokens", "windows.svg", token_windows),
    Figure("ch02_embedding", "lookup.svg", embedding_lookup),
    Figure("ch03_positions", "position_rows.svg", position_rows),
    Figure("ch04_attention", "causal_mask.svg", causal_mask),
    Figure("ch04_attention", "attention_heads.svg", attention_heads),
    Figure("ch04_attention", "kv_cache.svg", kv_cache),
    Figure("ch05_block", "gelu.svg", gelu_forms),
    Figure("ch05_block", "layer_norm.svg", layer_norm_batch),
    Figure("ch05_block", "pre_ln_block.svg", block_diagram),
    Figure("ch06_backward", "residual_gradient.svg", residual_gradient),
    Figure("ch07_model", "parameter_ledger.svg", parameter_ledger),
    Figure("ch08_training", "loss_curve.svg", loss_curve),
    Figure("ch08_training", "lr_schedule.svg", lr_schedule),
    Figure("ch09_sampling", "temperature_top_k.svg", temperature_topk),
    Figure("ch09_sampling", "sampled_names.svg", sampled_names),
)


def render(figure: Figure) -> bytes:
    """The SVG bytes of one figure, drawn under the fixed style, seed and thread count."""
    import matplotlib
    import torch

    plt = _plt()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # reductions split across threads may round differently
    torch.manual_seed(0)
    random.seed(0)
    try:
        with matplotlib.rc_context(STYLE):
            fig = figure.draw()
            buffer = io.BytesIO()
            fig.savefig(buffer, format="svg", metadata=METADATA)
            plt.close(fig)
    finally:
        torch.set_num_threads(threads)
    return buffer.getvalue()


def render_all() -> dict[Path, bytes]:
    return {figure.path: render(figure) for figure in FIGURES}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a figure is out of date")
    args = parser.parse_args(argv)
    fresh = render_all()
    changed = [path for path, data in fresh.items() if not path.is_file() or path.read_bytes() != data]
    if args.check:
        for path in changed:
            print(f"{path.relative_to(REPO_ROOT)} differs from a fresh drawing: run `make figures`")
        return 1 if changed else 0
    for path in changed:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(fresh[path])
    print(f"wrote {len(changed)} of {len(fresh)} figure(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
