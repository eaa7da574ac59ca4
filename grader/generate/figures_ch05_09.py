"""Figures of chapters 05 to 09: GELU, LayerNorm, the pre-LN block, the residual
gradient, the parameter ledger, training curves and sampling."""

from __future__ import annotations

import math

from grader.generate.figure_drawing import (
    BLUE, GREEN, GREY, ORANGE, RED, SHORT_RUN, arrow, blank, box, text_label, pyplot, names, reference, short_run,
)


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
    plt = pyplot()
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
    plt = pyplot()
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

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10.0, 3.4))
    s = lambda v: "[" + ", ".join(map(str, v)) + "]"  # noqa: E731
    box(ax, 0.0, 0.0, f"X\n{s(list(x.shape))}", width=1.1, height=0.8, face="#f2f2f2", edge="black")
    box(ax, 1.7, 1.3, f"LN₁\n{s(shapes['ln_attention'])}", width=1.2, height=0.8)
    box(ax, 3.6, 1.3, f"A: attention\nQ, K, V {s(list(present[0].shape))}\nweights {s(weights)}\n→ {s(shapes['attention'])}",
         width=2.1, height=1.25)
    box(ax, 5.2, 0.0, "+", width=0.5, height=0.5, face="white", edge="black", size=12)
    box(ax, 6.1, 0.0, f"U\n{s(shapes['attention'])}", width=0.9, height=0.8, face="#f2f2f2", edge="black")
    box(ax, 7.3, 1.3, f"LN₂\n{s(shapes['ln_feedforward'])}", width=1.2, height=0.8)
    box(ax, 9.2, 1.3, f"F: fc1 → {s(shapes['fc1'])}\nGELU\nfc2 → {s(shapes['feedforward'])}", width=2.1, height=1.25)
    box(ax, 10.6, 0.0, "+", width=0.5, height=0.5, face="white", edge="black", size=12)
    box(ax, 11.6, 0.0, f"Y\n{s(list(y.shape))}", width=1.0, height=0.8, face="#f2f2f2", edge="black")
    arrow(ax, (0.55, 0.0), (4.95, 0.0), color=GREY, text="skip: X unchanged", offset=(0.4, -0.25))
    arrow(ax, (0.3, 0.4), (1.1, 1.3))
    arrow(ax, (2.3, 1.3), (2.55, 1.3))
    arrow(ax, (4.65, 1.0), (5.1, 0.25))
    arrow(ax, (5.45, 0.0), (5.65, 0.0))
    arrow(ax, (6.55, 0.0), (10.35, 0.0), color=GREY, text="skip: U unchanged", offset=(0.9, -0.25))
    arrow(ax, (6.4, 0.4), (6.7, 1.3))
    arrow(ax, (7.9, 1.3), (8.15, 1.3))
    arrow(ax, (10.25, 1.0), (10.5, 0.25))
    arrow(ax, (10.85, 0.0), (11.1, 0.0))
    ax.text(5.8, -0.95, "U = X + A(LN₁(X))        Y = U + F(LN₂(U))        "
            "LayerNorm only at the entrance of each branch; the output is not normalised",
            ha="center", fontsize=9)
    ax.set_xlim(-0.7, 12.3)
    ax.set_ylim(-1.2, 2.1)
    blank(ax)
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

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10.0, 3.6), gridspec_kw={"width_ratios": [1.1, 1]})
    ax = axes[0]
    box(ax, 0.0, 0.0, "x", width=0.6, height=0.5, face="#f2f2f2", edge="black")
    box(ax, 2.2, 1.0, "R: LN → fc1 → GELU → fc2", width=2.6, height=0.55)
    box(ax, 4.4, 0.0, "+", width=0.45, height=0.45, face="white", edge="black", size=12)
    box(ax, 5.4, 0.0, "y", width=0.6, height=0.5, face="#f2f2f2", edge="black")
    arrow(ax, (0.3, 0.05), (4.15, 0.05), color=GREY)
    arrow(ax, (0.2, 0.25), (0.9, 0.8), color=GREY)
    arrow(ax, (3.5, 0.8), (4.3, 0.25), color=GREY)
    arrow(ax, (4.65, 0.0), (5.1, 0.0), color=GREY)
    arrow(ax, (4.15, -0.15), (0.3, -0.15), color=GREEN, text="I · grad_out: straight through", offset=(0, -0.22))
    arrow(ax, (4.4, 0.3), (0.0, 0.3), color=ORANGE, text="J_Rᵀ · grad_out: back through every layer of R",
           offset=(0, 1.25), rad=0.6)
    arrow(ax, (5.1, -0.15), (4.65, -0.15), color="black")
    ax.text(2.6, -1.0, "∂y/∂x = I + J_R,   so   dx = grad_out + (the branch's dx)", ha="center", fontsize=9)
    ax.set_xlim(-0.5, 6.0)
    ax.set_ylim(-1.3, 2.3)
    blank(ax)

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
    plt = pyplot()
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
    plt = pyplot()
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
    plt = pyplot()
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
    labels = [text_label(tokenizer, i) for i in range(tokenizer.vocab_size)]
    settings = [("τ = 0.5 (sharper)", 0.5, None), ("τ = 1 (the model's own)", 1.0, None),
                ("τ = 2 (flatter)", 2.0, None), ("τ = 1, top-k = 5", 1.0, 5)]
    plt = pyplot()
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
    plt = pyplot()
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
    blank(ax)
    return fig


