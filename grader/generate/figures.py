"""The lessons' figures, drawn from the reference with matplotlib.

    python -m grader.generate.figures            write assignments/chNN_*/figures/*.svg
    python -m grader.generate.figures --check    exit 1 when a committed figure differs from a fresh one

Every figure is computed from solutions/hero_transformer (imported under a private
name, never the student copy) and saved as SVG with fixed fonts, metadata and hash
salt, under a fixed seed on one thread, so a rerun writes the same bytes. The trained
model of chapters 04, 08 and 09 comes from one short seeded run (SHORT_RUN), not from
`make train`: a few seconds instead of a minute.
"""


from __future__ import annotations

import argparse
import io
import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from grader.generate.figure_drawing import (
    ASSIGNMENTS, FIGURE_DIR, METADATA, REPO_ROOT, STYLE, pyplot,
)
from grader.generate.figures_ch00_04 import (
    attention_heads, causal_mask, embedding_lookup, kv_cache, micro_attention, micro_graph,
    position_rows, token_windows,
)
from grader.generate.figures_ch05_09 import (
    block_diagram, gelu_forms, layer_norm_batch, loss_curve, lr_schedule, parameter_ledger,
    residual_gradient, sampled_names, temperature_topk,
)



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

    plt = pyplot()
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


# A figure's numbers are SVG coordinates. Machines with other vector units round the
# last float bit of a training run differently and move a point by 1e-4 of a pixel;
# a change anyone could see moves it by far more.
_NUMBER = re.compile(rb"-?\d+(?:\.\d*)?(?:e-?\d+)?")
SAME_WITHIN = 0.01  # SVG units (pixels at 72 dpi)


def same_drawing(one: bytes, other: bytes) -> bool:
    """The same SVG, but for coordinates that differ by less than SAME_WITHIN."""
    if one == other:
        return True
    if _NUMBER.split(one) != _NUMBER.split(other):
        return False
    numbers = zip(_NUMBER.findall(one), _NUMBER.findall(other))
    return all(abs(float(a) - float(b)) < SAME_WITHIN for a, b in numbers)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a figure is out of date")
    args = parser.parse_args(argv)
    fresh = render_all()
    changed = [path for path, data in fresh.items() if not path.is_file() or not same_drawing(path.read_bytes(), data)]
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
