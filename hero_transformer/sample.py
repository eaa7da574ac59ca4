# Your copy of the course package. Fill in every part that raises
# NotImplementedError; `make check` tells you how each one is doing.
"""Chapter 09: sampling from the trained model with the KV cache.

sample_next turns one step's logits into ids (temperature, top-k, a seeded
torch.Generator); generate feeds the prompt once and then one new token at a time,
reusing every earlier key and value from the cache instead of recomputing them.

    make sample       (or python check.py sample; options after it: --temperature 0.8)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from .model import TransformerLM


def sample_next(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Draw one id per row from logits [B, V] (any leading shape [..., V] works) and
    return the ids [B] (int64).

    temperature: the logits are divided by it before the softmax; 0 means greedy
    (the argmax, no randomness), and a temperature close to 0 approaches greedy.
    top_k: keep only the k largest logits of each row (exactly k, even with ties);
    None keeps all. Draws use torch.multinomial with `generator`, so a generator
    seeded the same way gives the same ids."""
    raise NotImplementedError("sample_next")


@torch.no_grad()
def generate(
    model: TransformerLM,
    prompt_ids,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
    stop_id: int | None = None,
    return_logits: bool = False,
    stop_at_block_size: bool = False,
):
    """Continue prompt_ids ([T] or [B, T] ids, or a list) by up to max_new_tokens ids.

    The prompt goes through the model once (use_cache=True); after that each new id
    is fed alone, with past_key_values, so step i costs one position, not i.
    Each new id is sample_next of the last position's logits.

    stop_id: a row stops once it has produced this id (BOS ends a name); it is kept
    in the output, and a finished row is padded with stop_id while the others go on.
    Generation ends when every row has stopped.

    The context: every id that is fed needs a position, so prompt length plus
    max_new_tokens may be at most block_size + 1 (the last new id is predicted, never
    fed). Asking for more raises a ValueError, unless stop_at_block_size=True, which
    asks to stop at that limit instead.

    Returns the ids, prompt included ([B, T + n] or [T + n] like the prompt); with
    return_logits=True also the logits each new id was drawn from, [B, n, V] (or
    [n, V]). Runs in eval mode and restores the model's mode afterwards."""
    raise NotImplementedError("generate")


# ------------------------------------------------------------------------ main


def main(argv=None) -> int:
    from rich.console import Console

    from .train import CHECKPOINT_NAME, DEFAULT_RUN_DIR, load_checkpoint

    parser = argparse.ArgumentParser(description="Print names sampled from the model `make train` saved.")
    parser.add_argument("--checkpoint", type=Path, default=DEFAULT_RUN_DIR / CHECKPOINT_NAME)
    parser.add_argument("-n", "--num", type=int, default=20, help="how many names")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # one name at a time is small work: extra threads only spin beside busy programs

    console = Console()
    if not args.checkpoint.exists():
        console.print(f"[red]no checkpoint at {args.checkpoint}[/red]: run `make train` first (about a minute)")
        return 1
    model, tokenizer, saved = load_checkpoint(args.checkpoint)
    generator = torch.Generator().manual_seed(args.seed)
    bos = tokenizer.bos_id
    prompt = torch.full((args.num, 1), bos, dtype=torch.long)
    out = generate(
        model, prompt, max_new_tokens=model.cfg.block_size, temperature=args.temperature,
        top_k=args.top_k, generator=generator, stop_id=bos,
    )
    try:
        from .data import load_names

        known = set(load_names())
    except Exception:  # the corpus is only needed to mark names the model made up
        known = None
    val = saved.get("val_loss")
    console.print(
        f"{args.num} names from {args.checkpoint}"
        + (f" (validation loss {val:.4f} nats/char)" if val is not None else "")
        + f", temperature {args.temperature}, top-k {args.top_k}, seed {args.seed}:"
    )
    novel = 0
    for row in out.tolist():
        body = row[1:]
        ended = bos in body
        name = tokenizer.decode(body[: body.index(bos)] if ended else body)
        tags = []
        if known is not None and name not in known:
            novel += 1
            tags.append("[cyan]new[/cyan]")
        if not ended:
            tags.append("[yellow]reached block_size[/yellow]")
        console.print(f"  {name or '(empty)'}  {' '.join(tags)}".rstrip())
    if known is not None:
        console.print(f"{novel} of {args.num} are not in the 2017 names list")
    return 0


if __name__ == "__main__":
    from . import run_program

    raise SystemExit(run_program(main))
