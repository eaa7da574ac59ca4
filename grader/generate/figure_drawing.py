"""What every lesson figure draws with: the reference imported under a private name,
the names data and one short seeded training run, and the boxes, arrows and heatmaps
the figures are made of. Used by grader/generate/figures.py and its chapter modules."""

from __future__ import annotations

import importlib.util
import sys
from functools import lru_cache
from types import SimpleNamespace

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


def text_label(tokenizer, i: int) -> str:
    return "BOS" if i == tokenizer.bos_id else tokenizer.decode([i])


# --------------------------------------------------------------- drawing helpers


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def box(ax, x, y, text, width=1.0, height=0.5, face="#eef3fb", edge=BLUE, size=9, weight="normal"):
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=face, edgecolor=edge, linewidth=1.2))
    ax.text(x, y, text, ha="center", va="center", fontsize=size, weight=weight)


def arrow(ax, start, end, color="black", text=None, offset=(0.0, 0.12), style="-|>", size=8, rad=0.0, at=0.5):
    ax.annotate("", xy=end, xytext=start,
                arrowprops=dict(arrowstyle=style, color=color, lw=1.2, shrinkA=0, shrinkB=0,
                                connectionstyle=f"arc3,rad={rad}"))
    if text:
        ax.text(start[0] + at * (end[0] - start[0]) + offset[0], start[1] + at * (end[1] - start[1]) + offset[1],
                text, ha="center", va="center", fontsize=size, color=color,
                bbox=dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none"))


def heatmap(ax, weights, rows, cols, title=None, vmax=1.0, masked_above=None, fmt="{:.2f}", size=7, hatch="///"):
    """Weights as coloured cells with their values; cells where masked_above says so
    are hatched grey (a masked score, weight exactly 0)."""
    import numpy as np

    data = np.asarray(weights, dtype=float)
    ax.pcolormesh(np.arange(data.shape[1] + 1), np.arange(data.shape[0] + 1), data, cmap="Blues",
                  vmin=0.0, vmax=vmax, edgecolors="white", linewidth=0.8)
    for r in range(data.shape[0]):
        for c in range(data.shape[1]):
            if masked_above is not None and masked_above(r, c):
                ax.add_patch(pyplot().Rectangle((c, r), 1, 1, facecolor="#dddddd", hatch=hatch, edgecolor="white"))
                continue
            value = data[r, c]
            ax.text(c + 0.5, r + 0.5, fmt.format(value), ha="center", va="center", fontsize=size,
                    color="white" if value > 0.6 * vmax else "black")
    grid_frame(ax, data.shape, rows, cols, title)


def grid_frame(ax, shape, rows, cols, title):
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


def blank(ax):
    ax.set_axis_off()


