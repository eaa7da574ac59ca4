# Your copy of the course package. Fill in every part that raises
# NotImplementedError; `make check` tells you how each one is doing.
"""Chapter 08: training the chapter 07 model on the names.

Parts: an AdamW optimizer written by hand, gradient clipping by the global L2 norm,
padded batches of whole documents with a mask over the positions that are scored,
the training step, the validation loss per character, and a count-based bigram
baseline to beat.

Every document is framed by BOS on both sides and scored as in chapter 01:
positions = min(block_size, len(ids) - 1). A batch pads the shorter documents at the
end; a padded position is neither scored nor seen by a real position (attention is
causal and the padding comes last), so a batch scores exactly the same positions as
the documents one at a time.

    make train        (or python check.py train; options after it: --steps 300)
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Iterable, Sequence

import torch

from .model import Config, TransformerLM, cross_entropy
from .tokenizer import CharTokenizer, training_windows

# ------------------------------------------------------------------ the optimizer


class AdamW:
    """Adam with decoupled weight decay (Loshchilov & Hutter), the update of
    torch.optim.AdamW, one parameter tensor at a time.

    For a parameter p with gradient g, at its step t = 1, 2, ...:
        p <- p * (1 - lr * weight_decay)          decay first, from the current p
        m <- beta1 * m + (1 - beta1) * g           first moment
        v <- beta2 * v + (1 - beta2) * g * g       second moment
        p <- p - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)

    A parameter whose .grad is None at a step is skipped, and its t does not advance.
    The optimizer holds each parameter tensor exactly once (a tensor that is listed
    twice, as a shared weight is, would otherwise be stepped twice).
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
    ):
        if not lr >= 0.0:
            raise ValueError(f"AdamW: lr must be >= 0, got {lr!r}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"AdamW: betas must lie in [0, 1), got {betas!r}")
        if not eps >= 0.0:
            raise ValueError(f"AdamW: eps must be >= 0, got {eps!r}")
        if not weight_decay >= 0.0:
            raise ValueError(f"AdamW: weight_decay must be >= 0, got {weight_decay!r}")
        self.lr = lr
        self.betas = betas
        self.eps = eps
        self.weight_decay = weight_decay
        # self.params: each parameter once, in first-seen order; per parameter (same
        # index): self.exp_avg (m), self.exp_avg_sq (v), both zeros like the
        # parameter, and self.steps, the number of updates it has had (starts at 0).
        raise NotImplementedError("adamw_init")

    @torch.no_grad()
    def step(self) -> None:
        """One update of every parameter that has a gradient, in place."""
        raise NotImplementedError("adamw_step")

    def zero_grad(self) -> None:
        """Forget every parameter's gradient (set .grad to None), so the next
        backward() starts from nothing instead of adding to the old gradient."""
        raise NotImplementedError("adamw_zero_grad")


def clip_grad_norm(parameters: Iterable[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale every gradient by the same factor so that their global L2 norm, the norm
    of all gradient entries taken together, is at most max_norm. Returns the norm
    before clipping (a 0-d tensor), as torch.nn.utils.clip_grad_norm_ does.
    Parameters without a gradient are ignored; a shared tensor counts once."""
    raise NotImplementedError("clip_grad_norm")


# ----------------------------------------------------------------------- batches


def make_batch(
    documents: Sequence[Sequence[int]], block_size: int, pad_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Documents (each one BOS-framed ids, like encode_document gives) to one padded
    batch: (inputs [B,T], targets [B,T], mask [B,T]).

    Row b holds training_windows(documents[b], block_size) from position 0 on; T is
    the longest row's number of positions. Positions past a row's end are padded with
    pad_id in inputs and targets, and mask is False there (True on scored positions).
    """
    raise NotImplementedError("make_batch")


def masked_loss(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the scored (mask True) positions only: padding counts
    neither in the sum nor in the number of positions."""
    return cross_entropy(logits[mask], targets[mask])


# -------------------------------------------------------------------- the loop


def train_step(
    model: TransformerLM,
    optimizer: AdamW,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    mask: torch.Tensor,
    max_norm: float | None = 1.0,
) -> tuple[float, float]:
    """One update on one batch: forget the old gradients, score the batch
    (masked_loss of the model's logits), backpropagate, clip the gradients to
    max_norm (None: no clipping) and step the optimizer.
    Returns (loss before the update, gradient norm before clipping) as floats."""
    raise NotImplementedError("train_loop")


def learning_rate(step: int, steps: int, lr: float, warmup: int, final_fraction: float = 0.1) -> float:
    """Linear warm-up over `warmup` steps, then a cosine decay to final_fraction * lr
    at the last step (step counts from 0)."""
    if step < warmup:
        return lr * (step + 1) / warmup
    span = max(1, steps - 1 - warmup)
    progress = min(1.0, (step - warmup) / span)
    return lr * (final_fraction + (1.0 - final_fraction) * 0.5 * (1.0 + math.cos(math.pi * progress)))


def encode_documents(documents: Iterable[str], tokenizer: CharTokenizer) -> list[list[int]]:
    return [tokenizer.encode_document(doc) for doc in documents]


def train(
    model: TransformerLM,
    train_docs: Sequence[str],
    val_docs: Sequence[str] | None,
    tokenizer: CharTokenizer,
    steps: int,
    batch_size: int,
    lr: float,
    *,
    weight_decay: float = 0.01,
    betas: tuple[float, float] = (0.9, 0.99),
    warmup: int | None = None,
    max_norm: float | None = 1.0,
    eval_every: int | None = None,
    seed: int = 0,
    progress: bool = False,
    max_seconds: float | None = None,
    on_step: Callable[[int, float, float], None] | None = None,
) -> dict:
    """Train `model` in place for `steps` updates of `batch_size` documents each
    (shuffled every pass over train_docs, seeded) with AdamW and a warm-up + cosine
    learning rate. Returns the history: {"step", "train_loss", "lr", "grad_norm",
    "val_step", "val_loss", "seconds", "stopped_early"}; validation runs every
    eval_every steps and after the last one when val_docs are given. With
    max_seconds, training stops after the step that crosses that wall-clock budget
    (the learning-rate schedule is not shortened) and says so in "stopped_early"."""
    if steps <= 0 or batch_size <= 0:
        raise ValueError(f"steps and batch_size must be positive, got {steps} and {batch_size}")
    block_size = model.cfg.block_size
    encoded = encode_documents(train_docs, tokenizer)
    if not encoded:
        raise ValueError("train_docs is empty")
    warmup = max(1, steps // 20) if warmup is None else warmup
    optimizer = AdamW(model.parameters(), lr=lr, betas=betas, weight_decay=weight_decay)
    generator = torch.Generator().manual_seed(seed)
    history = {"step": [], "train_loss": [], "lr": [], "grad_norm": [], "val_step": [], "val_loss": []}
    order, cursor = torch.randperm(len(encoded), generator=generator).tolist(), 0
    started = time.perf_counter()

    bar = task = None
    if progress:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(
            TextColumn("[bold]training"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]:.4f}  val {task.fields[val]}  lr {task.fields[lr]:.2e}"),
            TimeElapsedColumn(),
        )
        bar.start()
        task = bar.add_task("train", total=steps, loss=float("nan"), val="-", lr=0.0)

    model.train()
    try:
        for step in range(steps):
            if cursor + batch_size > len(order):
                order, cursor = torch.randperm(len(encoded), generator=generator).tolist(), 0
            chosen = [encoded[i] for i in order[cursor : cursor + batch_size]]
            cursor += batch_size
            inputs, targets, mask = make_batch(chosen, block_size, tokenizer.bos_id)
            optimizer.lr = learning_rate(step, steps, lr, warmup)
            loss, norm = train_step(model, optimizer, inputs, targets, mask, max_norm)
            history["step"].append(step)
            history["train_loss"].append(loss)
            history["lr"].append(optimizer.lr)
            history["grad_norm"].append(norm)
            out_of_time = max_seconds is not None and time.perf_counter() - started > max_seconds
            last = step == steps - 1 or out_of_time
            if val_docs and ((eval_every and (step + 1) % eval_every == 0) or last):
                history["val_step"].append(step)
                history["val_loss"].append(evaluate(model, val_docs, tokenizer))
            if on_step is not None:
                on_step(step, loss, optimizer.lr)
            if bar is not None:
                val = f"{history['val_loss'][-1]:.4f}" if history["val_loss"] else "-"
                bar.update(task, advance=1, loss=loss, val=val, lr=optimizer.lr)
            if out_of_time:
                break
    finally:
        if bar is not None:
            bar.stop()
    history["seconds"] = time.perf_counter() - started
    history["stopped_early"] = len(history["step"]) < steps
    return history


@torch.no_grad()
def evaluate(model: TransformerLM, docs: Sequence[str], tokenizer: CharTokenizer, batch_size: int = 512) -> float:
    """The mean loss per scored character over all of docs, in nats: the summed
    negative log-likelihood of every scored position divided by their number (not
    the mean of per-batch means, which over-weights a small last batch). Runs in
    eval mode and restores the model's mode afterwards."""
    raise NotImplementedError("evaluate")


def bigram_baseline(
    train_docs: Sequence[str],
    val_docs: Sequence[str],
    tokenizer: CharTokenizer,
    block_size: int | None = None,
    smoothing: float = 1.0,
) -> float:
    """A count-based bigram model: P(next | current) = (count + k) / (row total + k V)
    with add-k smoothing (k = smoothing), counted over the scored (input, target)
    pairs of train_docs and scored, in nats per character, on the same positions of
    val_docs that the transformer is scored on (block_size None: every position)."""
    raise NotImplementedError("bigram_baseline")


# ----------------------------------------------------------------- checkpoints

DEFAULT_RUN_DIR = Path("runs")
CHECKPOINT_NAME = "names_gpt.pt"
CURVE_NAME = "loss_curve.png"


def save_checkpoint(path: Path, model: TransformerLM, tokenizer: CharTokenizer, **extra) -> None:
    """torch.save of the weights, the Config (as a dict) and the vocabulary."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {"state_dict": model.state_dict(), "config": asdict(model.cfg), "vocab": list(tokenizer.chars), **extra},
        path,
    )


def load_checkpoint(path: Path) -> tuple[TransformerLM, CharTokenizer, dict]:
    """The model (in eval mode), its tokenizer and the whole saved dict."""
    saved = torch.load(Path(path), map_location="cpu", weights_only=True)
    tokenizer = CharTokenizer(["".join(saved["vocab"])])
    if tokenizer.chars != list(saved["vocab"]):
        raise ValueError(f"{path}: the saved vocabulary is not a sorted set of characters")
    model = TransformerLM(Config(**saved["config"]))
    model.load_state_dict(saved["state_dict"])
    model.eval()
    return model, tokenizer, saved


def plot_history(history: dict, path: Path, baseline: float | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    losses = history["train_loss"]
    ax.plot(history["step"], losses, color="tab:blue", alpha=0.25, linewidth=0.8, label="train (batch)")
    window = max(1, len(losses) // 50)
    if window > 1:
        kernel = torch.ones(window) / window
        smooth = torch.nn.functional.conv1d(torch.tensor(losses).view(1, 1, -1), kernel.view(1, 1, -1)).view(-1)
        ax.plot(history["step"][window - 1 :], smooth.tolist(), color="tab:blue", label=f"train (mean of {window})")
    if history["val_loss"]:
        ax.plot(history["val_step"], history["val_loss"], "o-", color="tab:orange", label="validation")
    if baseline is not None:
        ax.axhline(baseline, color="tab:gray", linestyle="--", label=f"bigram baseline {baseline:.3f}")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats per character)")
    ax.set_title("TransformerLM on the names")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ------------------------------------------------------------------------ main

DEFAULTS = dict(
    d_model=64, n_heads=4, n_layers=2, d_ff=256, block_size=16,
    steps=3000, batch_size=64, lr=3e-3, weight_decay=0.01, seed=1337,
)
# About a minute on two CPU cores; the budget only matters on a much slower or busy
# machine, where training stops early (and says so) instead of running on.
MAX_SECONDS = 110.0


def main(argv=None) -> int:
    from rich.console import Console

    from .data import load_names, train_validation_split

    parser = argparse.ArgumentParser(description="Train the chapter 07 TransformerLM on the names.")
    for name, value in DEFAULTS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    parser.add_argument("--eval-every", type=int, default=500)
    # One thread: this model's matrices are small, and torch's helper threads wait for one
    # another by spinning, so beside other busy programs two threads ran eight times slower.
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-seconds", type=float, default=MAX_SECONDS, help="wall-clock budget for training")
    parser.add_argument("--out", type=Path, default=DEFAULT_RUN_DIR, help="folder for the checkpoint and the plot")
    args = parser.parse_args(argv)

    console = Console()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    wall_start = time.perf_counter()

    names = load_names()
    train_docs, val_docs = train_validation_split(names)
    tokenizer = CharTokenizer(names)
    cfg = Config(
        vocab_size=tokenizer.vocab_size, block_size=args.block_size, d_model=args.d_model,
        n_heads=args.n_heads, n_layers=args.n_layers, d_ff=args.d_ff,
    )
    model = TransformerLM(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    console.print(
        f"{len(train_docs)} training names, {len(val_docs)} validation names, vocabulary {cfg.vocab_size}; "
        f"model d={cfg.d_model} h={cfg.n_heads} N={cfg.n_layers} f={cfg.d_ff} C={cfg.block_size}: "
        f"{n_params:,} parameters"
    )
    baseline = bigram_baseline(train_docs, val_docs, tokenizer, block_size=cfg.block_size)
    history = train(
        model, train_docs, val_docs, tokenizer, steps=args.steps, batch_size=args.batch_size, lr=args.lr,
        weight_decay=args.weight_decay, eval_every=args.eval_every, seed=args.seed, progress=True,
        max_seconds=args.max_seconds,
    )
    if history["stopped_early"]:
        console.print(
            f"[yellow]stopped after {len(history['step'])} of {args.steps} steps: the "
            f"{args.max_seconds:.0f} s budget ran out (a busy or slow machine)[/yellow]"
        )
    val_loss = history["val_loss"][-1]

    checkpoint = args.out / CHECKPOINT_NAME
    curve = args.out / CURVE_NAME
    save_checkpoint(
        checkpoint, model, tokenizer,
        val_loss=val_loss, bigram_baseline=baseline, steps=len(history["step"]), seconds=history["seconds"],
    )
    plot_history(history, curve, baseline)
    wall = time.perf_counter() - wall_start

    gap = baseline - val_loss
    console.print(f"validation loss  {val_loss:.4f} nats/char")
    console.print(f"bigram baseline  {baseline:.4f} nats/char (add-one, same positions)")
    style = "green" if gap > 0 else "red"
    console.print(f"[{style}]the model is {gap:+.4f} nats/char better than the bigram[/{style}]")
    console.print(f"training {history['seconds']:.1f} s, total {wall:.1f} s; wrote {checkpoint} and {curve}")
    console.print("next: `make sample` prints names from this checkpoint")
    return 0


if __name__ == "__main__":
    from . import run_program

    raise SystemExit(run_program(main))
