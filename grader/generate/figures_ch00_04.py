"""Figures of chapters 00 to 04: the scalar graph, token windows, the embedding lookup,
position rows, the causal mask, attention heads and the KV cache."""

from __future__ import annotations

import gc

from grader.generate.figure_drawing import (
    BLUE, GREY, ORANGE, RED, MICRO_STEPS, SHORT_RUN, arrow, blank, box, grid_frame, heatmap, text_label, pyplot, names,
    reference, short_run,
)


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

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8.4, 3.6))
    nodes = {"a": (0.0, 1.2, a), "b": (0.0, -0.9, b), "c = a·b": (3.0, -0.9, c), "d = c + a": (5.2, 0.3, d),
             "L = d²": (8.0, 0.3, loss)}
    for name, (x, y, v) in nodes.items():
        leaf = name in ("a", "b")
        box(ax, x, y, f"{name}\ndata {v.data:g}\ngrad {v.grad:g}", width=1.5, height=0.95,
             face="#fff4e6" if leaf else "#eef3fb", edge=ORANGE if leaf else BLUE)
    edges = [("a", "c = a·b", f"∂c/∂a = b = {c._local_grads[0]:g}", 0.35, 0.0),
             ("b", "c = a·b", f"∂c/∂b = a = {c._local_grads[1]:g}", 0.5, 0.25),
             ("c = a·b", "d = c + a", f"∂d/∂c = {d._local_grads[0]:g}", 0.5, 0.0),
             ("a", "d = c + a", f"∂d/∂a = {d._local_grads[1]:g}", 0.5, 0.0),
             ("d = c + a", "L = d²", f"∂L/∂d = 2d = {loss._local_grads[0]:g}", 0.5, 0.25)]
    for src, dst, text, at, lift in edges:
        x0, y0, _ = nodes[src]
        x1, y1, _ = nodes[dst]
        arrow(ax, (x0 + 0.75, y0), (x1 - 0.75, y1), text=text, offset=(0.0, lift), at=at)
    ax.text(3.8, -1.85, f"a.grad = (∂c/∂a)·c.grad + (∂d/∂a)·d.grad = ({b.data:g})·({c.grad:g}) + 1·({d.grad:g}) "
            f"= {a.grad:g}:  two paths, two contributions, added", ha="center", fontsize=9, color=RED)
    ax.text(3.8, 2.05, "forward: data flows left to right.  backward: grad flows right to left, "
            "child.grad += local × node.grad", ha="center", fontsize=9)
    ax.set_xlim(-0.9, 8.9)
    ax.set_ylim(-2.1, 2.3)
    blank(ax)
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

    plt = pyplot()
    labels = [f"{p} {text_label(tokenizer, i)}" for p, i in enumerate(ids[:-1])]
    fig, axes = plt.subplots(1, model.n_head, figsize=(9.6, 2.9))
    for head, ax in enumerate(axes):
        heatmap(ax, rows[head], labels if head == 0 else [""] * len(labels), labels, title=f"head {head}",
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
    plt = pyplot()
    fig, axes = plt.subplots(2, 1, figsize=(8.0, 4.6))
    for ax, (text, block) in zip(axes, (("ana", 16), ("olivia", 4))):
        ids = tokenizer.encode_document(text)
        inputs, targets = windows(ids, block)
        for p, i in enumerate(ids):
            scored_in = p < len(inputs)
            box(ax, p, 2.0, f"{text_label(tokenizer, i)}\n{i}", width=0.8, height=0.7)
            if p < len(ids) - 1:
                color = BLUE if scored_in else GREY
                box(ax, p, 0.55, f"{text_label(tokenizer, i)}", width=0.7, height=0.45,
                     face="#eef3fb" if scored_in else "#f2f2f2", edge=color)
                nxt = ids[p + 1]
                box(ax, p, -0.45, f"{text_label(tokenizer, nxt)}", width=0.7, height=0.45,
                     face="#fff4e6" if scored_in else "#f2f2f2", edge=ORANGE if scored_in else GREY)
                arrow(ax, (p, 0.3), (p, -0.2), color=color)
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
        blank(ax)
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
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(9.4, 3.0), gridspec_kw={"width_ratios": [6, 4, 4]})
    rows = [f"id {i}" for i in ids[0].tolist()]
    heatmap(axes[0], one_hot.tolist(), rows, [str(v) for v in range(6)], title="one-hot rows [T=3, V=6]",
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
        ax.add_patch(pyplot().Rectangle((0, r), data.shape[1], 1, fill=False, edgecolor="black", linewidth=1.6))
    grid_frame(ax, data.shape, rows, [str(c) for c in range(data.shape[1])], title)


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

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8.0, 3.2))
    for call, ((t, past), used) in enumerate(zip(plan, rows)):
        y = len(plan) - 1 - call
        for p in range(block + 1):
            if used is not None and p in used:
                box(ax, p, y, f"row {p}", width=0.85, height=0.7, face="#cfe2f3", edge=BLUE, size=8)
            elif p < past:
                box(ax, p, y, "earlier", width=0.85, height=0.7, face="#f2f2f2", edge=GREY, size=7)
            elif used is None and p == past:
                box(ax, p, y, "no row", width=0.85, height=0.7, face="#fde0dd", edge=RED, size=8)
        label = f"call {call + 1}: T={t}, past_length={past}"
        ax.text(-0.7, y, label, ha="right", va="center", fontsize=8, color=RED if used is None else "black")
    ax.axvline(block - 0.5, color=RED, linestyle="--", linewidth=1)
    ax.text(block - 0.45, len(plan) - 0.45, f"block_size = {block}", color=RED, fontsize=8)
    ax.set_title("each call adds rows past_length … past_length + T − 1; the last call raises a ValueError",
                 fontsize=9)
    ax.set_xlim(-4.2, block + 0.8)
    ax.set_ylim(-0.6, len(plan) - 0.1)
    blank(ax)
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

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.6), gridspec_kw={"width_ratios": [6, 6]})
    keys = [str(k) for k in range(6)]
    heatmap(axes[0], full, keys, keys, title="one call, T = 6: weights [6, 6]", masked_above=lambda r, c: c > r)
    heatmap(axes[1], cached, ["4", "5"], keys, title="T = 2 after T_past = 4 cached: weights [2, 6]",
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
    labels = [text_label(tokenizer, i) for i in ids]
    plt = pyplot()
    n_layers, n_heads = len(model.blocks), model.cfg.n_heads
    fig, axes = plt.subplots(n_layers, n_heads, figsize=(10.0, 5.6))
    for layer, block in enumerate(model.blocks):
        weights = block.attention.last_attention[0]
        for head in range(n_heads):
            ax = axes[layer][head]
            heatmap(ax, weights[head].tolist(), labels if head == 0 else [""] * len(labels), labels,
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
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8.6, 3.0))
    total = len(ids)
    for call, (fed, shape) in enumerate(calls):
        y = len(calls) - 1 - call
        for p in range(total):
            if p in fed:
                box(ax, p, y, f"{text_label(tokenizer, ids[p])}\nnew k, v", width=0.9, height=0.75, face="#cfe2f3",
                     edge=BLUE, size=7)
            elif p < fed[0]:
                box(ax, p, y, f"{text_label(tokenizer, ids[p])}\ncached", width=0.9, height=0.75, face="#f2f2f2",
                     edge=GREY, size=7)
        ax.text(-0.7, y, f"call {call + 1}: feeds {len(fed)} token{'s' if len(fed) > 1 else ''}", ha="right",
                va="center", fontsize=8)
        ax.text(total - 0.3, y, f"present keys {list(shape)}", ha="left", va="center", fontsize=8, color=BLUE)
    ax.set_title("[B, h, T_past + T, d_h]: keys and values of earlier positions are kept, never recomputed",
                 fontsize=9)
    ax.set_xlim(-3.6, total + 2.6)
    ax.set_ylim(-0.6, len(calls) - 0.3)
    blank(ax)
    return fig


