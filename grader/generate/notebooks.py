"""nbgrader notebooks, one per chapter, generated from the lessons and the catalogue.

    python -m grader.generate.notebooks            write assignments/chNN_*/chNN_*.ipynb
    python -m grader.generate.notebooks --check    exit 1 when a notebook is out of date

Each notebook is an nbgrader *source* notebook: the lesson as read-only markdown
cells, one per section (its figures attached, so the notebook needs no files beside
it), with read-only experiment cells between them that run the student's own package
(never graded, skipped by autograding), then a read-only set-up cell, and per task one
read-only "autograder tests" cell worth the task's points. That cell calls `score_task`, which grades the student's
hero_transformer/ package with the same sandboxed engine as `make grade` and prints
the report; its value (the points earned) is what nbgrader records as partial credit.
Students write their code in hero_transformer/, not in the notebook.
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader.generate.lesson_tables import ASSIGNMENTS, CHAPTER_FOLDERS
from grader.checks import catalogue

SETUP = '''\
# Imports the grader from the course folder (the one holding grader/). `nbgrader autograde`
# in a course made by `python -m grader nbgrader-course` sets HERO_TRANSFORMER_COURSE to
# that folder's absolute path; autograding without it is an error, never a grade. Outside
# autograding the folders above this notebook's are searched (never the notebook's own
# folder, which is the submission) and the scores are advisory only.
import os
import sys
from pathlib import Path


class HeroTransformerSetupError(RuntimeError):
    \"\"\"The grading set-up is broken: nothing below is a grade.\"\"\"


def _hero_transformer_course():
    named = os.environ.get("HERO_TRANSFORMER_COURSE", "")
    if named:
        if not Path(named).is_absolute() or not (Path(named) / "grader" / "run" / "engine.py").is_file():
            raise HeroTransformerSetupError(
                f"HERO_TRANSFORMER_COURSE={named!r} is not the absolute path of a folder holding grader/")
        return Path(named).resolve()
    if os.environ.get("NBGRADER_EXECUTION") == "autograde":
        raise HeroTransformerSetupError(
            "HERO_TRANSFORMER_COURSE is not set: autograde in a course made by "
            "`python -m grader nbgrader-course`, or set it to the course folder's absolute path")
    found = next((p for p in Path.cwd().resolve().parents if (p / "grader" / "run" / "engine.py").is_file()), None)
    if found is None:
        raise HeroTransformerSetupError(
            "no grader/ above this notebook's folder: set HERO_TRANSFORMER_COURSE to the course folder")
    print(f"WARNING: HERO_TRANSFORMER_COURSE is not set, so the grader found in {found} is used: "
          "the scores below are advisory, not grades.")
    return found


def _hero_transformer_import(course):
    # Only the course's grader: nothing of the same name from the notebook's own folder.
    here, saved = Path.cwd().resolve(), list(sys.path)
    for name in [m for m in sys.modules if m == "grader" or m.startswith("grader.")]:
        del sys.modules[name]
    sys.path[:] = [str(course)] + [p for p in saved if Path(p or ".").resolve() != here]
    try:
        import grader.lms.notebook_cell
    finally:
        sys.path[:] = saved
    if Path(grader.lms.notebook_cell.__file__).resolve().parent != (course / "grader" / "lms").resolve():
        raise HeroTransformerSetupError(f"grader was imported from {grader.lms.notebook_cell.__file__}, not from {course}")
    return grader.lms.notebook_cell.score_task


score_task = _hero_transformer_import(_hero_transformer_course())'''


TRY_SETUP = '''\
# Experiments: each cell below runs YOUR package, the hero_transformer/ folder beside
# this notebook, imported afresh every time, so save your file and rerun the cell to see
# a change. They are not graded (the graded cells come after the lesson), and autograding
# skips them.
import importlib
import os
import sys
from pathlib import Path


def mine(module):
    """hero_transformer.<module> from this notebook's folder, re-imported from disk."""
    here = str(Path.cwd().resolve())
    for name in [m for m in sys.modules if m == "hero_transformer" or m.startswith("hero_transformer.")]:
        del sys.modules[name]
    sys.path.insert(0, here)
    try:
        return importlib.import_module(f"hero_transformer.{module}")
    finally:
        sys.path.remove(here)


def run(experiment):
    """Run one experiment; a task that is still a stub gets a note instead of a traceback."""
    if os.environ.get("NBGRADER_EXECUTION") == "autograde":
        print("(experiment skipped while autograding)")
        return None
    try:
        return experiment()
    except NotImplementedError as stub:
        task = stub.args[0] if stub.args else "?"
        print(f"Not yet: task `{task}` is still a stub in your hero_transformer/ (it raises "
              f"NotImplementedError). Fill it in, save the file and rerun this cell.")
        return None'''

# folder -> [(the heading after whose section the cell goes, code)]
EXPERIMENTS = {
    "ch00_micro": [
        ("## 1.", '''\
def graph():
    micro = mine("micro")
    a, b = micro.Value(2.0), micro.Value(-3.0)
    loss = (a * b + a) ** 2
    loss.backward()
    print(f"L = {loss.data:g}   a.grad = {a.grad:g} (the figure: 16)   b.grad = {b.grad:g} (the figure: -16)")


run(graph)'''),
        ("## 4.", '''\
def walk_through():
    micro = mine("micro")
    model = micro.MicroGPT(27)  # untrained: a..z are ids 0..25, BOS is 26
    ids = [26, 0, 13, 0, 26]  # [BOS a n a BOS]
    print(f"{len(model.params)} parameters")
    model.start_sequence()
    for pos in range(len(ids) - 1):
        logits = model.forward(ids[pos], pos)
        rows = ", ".join("[" + " ".join(f"{w:.2f}" for w in head) + "]" for head in model.last_attention[0])
        print(f"position {pos}: {len(logits)} logits; attention per head {rows}")
    model.finish_sequence()


run(walk_through)'''),
        ("## 5.", '''\
import math


def untrained_loss():
    micro = mine("micro")
    loss = micro.document_loss(micro.MicroGPT(27), [26, 0, 13, 0, 26])
    print(f"loss of 'ana' before training {loss.data:.4f}; a uniform guess scores ln 27 = {math.log(27):.4f}")


run(untrained_loss)'''),
    ],
    "ch01_tokens": [
        ("## 3.", '''\
def windows():
    tokenizer_module = mine("tokenizer")
    tokenizer = tokenizer_module.CharTokenizer(["ana", "olivia", "emma"])
    print("chars", tokenizer.chars, "BOS", tokenizer.bos_id)
    for text, block_size in (("ana", 16), ("olivia", 4)):
        ids = tokenizer.encode_document(text)
        inputs, targets = tokenizer_module.training_windows(ids, block_size)
        show = lambda i: "BOS" if i == tokenizer.bos_id else tokenizer.decode([i])
        pairs = "  ".join(f"{show(x)}->{show(y)}" for x, y in zip(inputs, targets))
        print(f"{text!r} block_size {block_size}: ids {ids}; {len(inputs)} scored pairs: {pairs}")


run(windows)'''),
    ],
    "ch02_embedding": [
        ("## What to implement", '''\
import torch


def lookup():
    model = mine("model")
    torch.manual_seed(0)
    embedding = model.TokenEmbedding(7, 5)
    ids = torch.tensor([[2, 0, 4], [6, 6, 1]])
    vectors = embedding(ids)
    one_hot = torch.nn.functional.one_hot(ids, 7).float()
    print("vectors", tuple(vectors.shape), "| equal to one-hot @ W:", torch.allclose(vectors, one_hot @ embedding.weight))
    for bad in (torch.tensor([[1, 7]]), torch.tensor([[-1, 2]])):
        try:
            embedding(bad)
            print(f"ids {bad.tolist()}: no error (there should be one)")
        except ValueError as error:
            print(f"ids {bad.tolist()}: ValueError: {error}")


run(lookup)'''),
    ],
    "ch03_positions": [
        ("## Too long", '''\
import torch


def rows_used():
    model = mine("model")
    positions = model.PositionEmbedding(6, 6)
    with torch.no_grad():
        positions.weight.copy_(torch.eye(6))  # row p is the p-th unit vector, so argmax names the row
    for T, past in ((3, 0), (1, 3), (2, 4), (1, 6)):
        try:
            out = positions(torch.zeros(1, T, 6), past_length=past)
            print(f"T={T} after {past} cached: rows {out[0].argmax(dim=-1).tolist()}")
        except ValueError as error:
            print(f"T={T} after {past} cached: ValueError: {error}")


run(rows_used)'''),
    ],
    "ch04_attention": [
        ("## 3.", '''\
import torch


def shapes_and_cache():
    model = mine("model")
    torch.manual_seed(0)
    attention = model.CausalSelfAttention(model.Config(vocab_size=10, block_size=8, d_model=4, n_heads=2,
                                                       n_layers=1, d_ff=8))
    x = torch.randn(2, 3, 4)
    out, present = attention(x, use_cache=True)
    print("output", tuple(out.shape), "weights", tuple(attention.last_attention.shape),
          "cached keys", tuple(present[0].shape))
    print("weights of batch 0, head 0 (zero above the diagonal):")
    print(attention.last_attention[0, 0].detach().numpy().round(3))
    x = torch.randn(1, 6, 4)
    full, _ = attention(x)
    first, past = attention(x[:, :2], use_cache=True)
    second, past = attention(x[:, 2:3], past_key_value=past, use_cache=True)
    third, past = attention(x[:, 3:], past_key_value=past, use_cache=True)
    gap = (torch.cat([first, second, third], dim=1) - full).abs().max().item()
    print(f"calls of 2, 1, 3 tokens through the cache vs one call: largest difference {gap:.2e}")


run(shapes_and_cache)'''),
    ],
    "ch05_block": [
        ("## 1.", '''\
import torch


def layer_norm_figures():
    model = mine("model")
    norm = model.LayerNorm(2)
    for x in ([1.0, 3.0], [2.0, 2.0], [11.0, 13.0]):
        z = norm(torch.tensor(x)).detach()
        shown = ", ".join(f"{v:.6f}" for v in z.tolist())
        print(f"x = {x}: LN(x) = ({shown}), mean {z.mean().item():.6f}, variance {z.var(correction=0).item():.6f}")
    print(f"v / (v + eps) for v = 1: {1 / (1 + 1e-5):.6f}")


run(layer_norm_figures)'''),
        ("## 2.", '''\
import math

import torch


def gelu_curve():
    model = mine("model")
    a = torch.linspace(-4, 4, 401, dtype=torch.float64)
    g = model.gelu(a)
    tanh_form = 0.5 * a * (1 + torch.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a**3)))
    print(f"g(-1) = {model.gelu(torch.tensor(-1.0, dtype=torch.float64)).item():.7f} (lesson: -0.1586553)")
    print(f"largest |tanh form - yours| = {(tanh_form - g).abs().max().item():.2e} (the exact GELU gives 4.7e-04)")
    import matplotlib.pyplot as plt

    plt.figure(figsize=(5, 3))
    plt.plot(a, g, label="your gelu")
    plt.plot(a, a.clamp(min=0), "--", label="ReLU")
    plt.legend()
    plt.grid(alpha=0.3)
    plt.show()


run(gelu_curve)'''),
        ("## 4.", '''\
import torch


def block_walk_through():
    model = mine("model")
    torch.manual_seed(0)
    cfg = model.Config(vocab_size=10, block_size=6, d_model=4, n_heads=2, n_layers=1, d_ff=8)
    block = model.TransformerBlock(cfg)
    x = torch.randn(2, 3, 4)
    y, present = block(x, use_cache=True)
    print("in", tuple(x.shape), "out", tuple(y.shape), "cached keys", tuple(present[0].shape))
    print("parameters", sum(p.numel() for p in block.parameters()), "ledger 4d² + 2df + f + 5d =",
          4 * 16 + 2 * 4 * 8 + 8 + 5 * 4)
    with torch.no_grad():
        block.attention.o_proj.weight.zero_()
        block.feedforward.fc2.weight.zero_()
        block.feedforward.fc2.bias.zero_()
    same = torch.equal(block(x)[0], x)
    print("both branches zero -> the block returns its input exactly:", same)


run(block_walk_through)'''),
    ],
    "ch06_backward": [
        ("## 3.", '''\
import torch


def layer_norm_gradients():
    backward = mine("backward")
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, dtype=torch.float64, requires_grad=True)
    gamma = torch.randn(5, dtype=torch.float64, requires_grad=True)
    beta = torch.randn(5, dtype=torch.float64, requires_grad=True)
    grad_out = torch.randn(2, 3, 5, dtype=torch.float64)
    centred = x - x.mean(-1, keepdim=True)
    y = centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + 1e-5) * gamma + beta
    y.backward(grad_out)
    dx = backward.layer_norm_backward(grad_out, x.detach(), gamma.detach())[0]
    print(f"dx: largest difference from autograd {(dx - x.grad).abs().max().item():.2e}")
    print(f"dx summed over the features, largest |sum| {dx.sum(-1).abs().max().item():.2e} (should be ~0)")


run(layer_norm_gradients)'''),
        ("## 4.", '''\
import torch


def skip_path():
    backward = mine("backward")
    torch.manual_seed(0)
    d, f = 4, 8
    x, grad_out = torch.randn(2, 3, d, dtype=torch.float64), torch.randn(2, 3, d, dtype=torch.float64)
    gamma, beta = torch.ones(d, dtype=torch.float64), torch.zeros(d, dtype=torch.float64)
    w1, b1 = torch.randn(f, d, dtype=torch.float64), torch.zeros(f, dtype=torch.float64)
    b2 = torch.zeros(d, dtype=torch.float64)
    for name, w2 in (("random fc2", torch.randn(d, f, dtype=torch.float64)), ("fc2 = 0", torch.zeros(d, f, dtype=torch.float64))):
        dx = backward.residual_feedforward_backward(grad_out, x, gamma, beta, w1, b1, w2, b2)[0]
        print(f"{name}: largest |dx - grad_out| = {(dx - grad_out).abs().max().item():.3f}")


run(skip_path)'''),
    ],
    "ch07_model": [
        ("## 2.", '''\
def ledger():
    model = mine("model")
    for sizes in (dict(vocab_size=32, block_size=64, d_model=64, n_heads=4, n_layers=2, d_ff=256),
                  dict(vocab_size=10, block_size=6, d_model=4, n_heads=2, n_layers=2, d_ff=8)):
        cfg = model.Config(**sizes)
        registered = sum(p.numel() for p in model.TransformerLM(cfg).parameters())
        print(f"{sizes}: formula {model.parameter_count(cfg):,}, registered {registered:,}")


run(ledger)'''),
        ("## 4.", '''\
import math

import torch


def first_loss():
    model = mine("model")
    torch.manual_seed(0)
    lm = model.TransformerLM(model.Config(vocab_size=27, block_size=16, d_model=64, n_heads=4, n_layers=2, d_ff=256))
    idx = torch.randint(0, 27, (4, 10))
    logits, loss, _ = lm(idx, targets=torch.randint(0, 27, (4, 10)))
    print(f"logits {tuple(logits.shape)}; loss at initialisation {loss.item():.4f} (ln 27 = {math.log(27):.4f})")


run(first_loss)'''),
    ],
    "ch08_training": [
        ("## 1.", '''\
import torch


def first_step():
    train = mine("train")
    p = torch.nn.Parameter(torch.tensor([1.0, 1.0, 1.0]))
    optimizer = train.AdamW([p], lr=0.1, weight_decay=0.0)
    p.grad = torch.tensor([1e-3, -50.0, 2.0])
    optimizer.step()
    moved = ", ".join(f"{v:+.5f}" for v in (p.detach() - 1).tolist())
    print(f"gradients (1e-3, -50, 2) move p by ({moved}): about -lr·sign(g), whatever the gradient's size")


run(first_step)'''),
        ("## 5.", '''\
import torch


def short_training():
    model, train, tokenizer, data = mine("model"), mine("train"), mine("tokenizer"), mine("data")
    names = data.load_names()
    train_docs, val_docs = data.train_validation_split(names)
    chars = tokenizer.CharTokenizer(names)
    torch.manual_seed(0)
    lm = model.TransformerLM(model.Config(vocab_size=chars.vocab_size, block_size=16, d_model=32, n_heads=4,
                                          n_layers=1, d_ff=64))
    history = train.train(lm, train_docs, val_docs[:500], chars, steps=60, batch_size=32, lr=3e-3, eval_every=20)
    baseline = train.bigram_baseline(train_docs, val_docs[:500], chars, block_size=16)
    print("validation", [round(v, 3) for v in history["val_loss"]], f"bigram baseline {baseline:.3f}")
    print("(60 steps of a small model barely reach the bigram; the lesson's figure trains 300 steps)")
    import matplotlib.pyplot as plt

    plt.figure(figsize=(5, 3))
    plt.plot(history["step"], history["train_loss"], label="train")
    plt.plot(history["val_step"], history["val_loss"], "o-", label="validation")
    plt.axhline(baseline, color="grey", linestyle="--", label="bigram")
    plt.legend()
    plt.show()


run(short_training)'''),
    ],
    "ch09_sampling": [
        ("## 1.", '''\
import torch


def temperature_table():
    sample = mine("sample")
    logits = torch.tensor([[2.0, 1.0, 0.0]]).repeat(4000, 1)
    for tau in (0.5, 1.0, 2.0):
        ids = sample.sample_next(logits, temperature=tau, generator=torch.Generator().manual_seed(0))
        shares = ", ".join(f"{v:.4f}" for v in (torch.bincount(ids, minlength=3) / len(ids)).tolist())
        print(f"temperature {tau}: frequencies ({shares}); compare the lesson's table")
    ids = sample.sample_next(logits, temperature=5.0, top_k=2, generator=torch.Generator().manual_seed(0))
    print("top_k = 2 at temperature 5 uses ids", sorted(set(ids.tolist())))


run(temperature_table)'''),
        ("## 2.", '''\
import torch


def cached_generation():
    model, sample = mine("model"), mine("sample")
    torch.manual_seed(0)
    lm = model.TransformerLM(model.Config(vocab_size=27, block_size=16, d_model=32, n_heads=4, n_layers=2, d_ff=64))
    prompt = torch.full((3, 1), 26)
    ids, logits = sample.generate(lm, prompt, max_new_tokens=8, generator=torch.Generator().manual_seed(1),
                                  return_logits=True)
    full = lm(ids[:, :-1])[0]
    print(f"ids {tuple(ids.shape)}; cached logits vs a full recompute: largest difference "
          f"{(full - logits).abs().max().item():.2e}")
    letters = "abcdefghijklmnopqrstuvwxyz"
    print("an untrained model's 'names':", ["".join(letters[i] for i in row[1:] if i != 26) for row in ids.tolist()])


run(cached_generation)'''),
    ],
}


FIGURE_LINK = re.compile(r"\]\(figures/([A-Za-z0-9_.-]+\.svg)\)")


def _sections(lesson: str) -> list[tuple[str, str]]:
    """The lesson cut before every level-2 heading: (heading line, text) pairs; the
    text before the first heading comes first, with an empty heading."""
    sections, heading, lines = [], "", []
    for line in lesson.splitlines(keepends=True):
        if line.startswith("## ") and lines:
            sections.append((heading, "".join(lines)))
            heading, lines = line.strip(), []
        elif line.startswith("## "):
            heading = line.strip()
        lines.append(line)
    sections.append((heading, "".join(lines)))
    return sections


def _lesson_cell(text: str, folder: str, grade_id: str) -> nbformat.NotebookNode:
    """One section as markdown, its figures attached (base64, as Jupyter reads them)."""
    attachments = {}
    for name in FIGURE_LINK.findall(text):
        svg = (ASSIGNMENTS / folder / "figures" / name).read_bytes()
        attachments[name] = {"image/svg+xml": base64.b64encode(svg).decode("ascii")}
    cell = new_markdown_cell(FIGURE_LINK.sub(r"](attachment:\1)", text.rstrip("\n")), metadata=_locked(grade_id))
    if attachments:
        cell["attachments"] = attachments
    return cell


def _locked(grade_id: str, points: float | None = None) -> dict:
    meta = {"grade_id": grade_id, "locked": True, "schema_version": 3, "solution": False, "task": False,
            "grade": points is not None}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def build(folder: str) -> nbformat.NotebookNode:
    number = folder[2:4]
    chapter = next(c for c in catalogue.chapters() if c.number == number)
    lesson = (ASSIGNMENTS / folder / "README.md").read_text(encoding="utf-8")
    experiments = EXPERIMENTS.get(folder, [])
    cells = []
    for i, (heading, text) in enumerate(_sections(lesson)):
        cells.append(_lesson_cell(text, folder, f"ch{number}-lesson-{i}"))
        for j, (after, code) in enumerate(experiments):
            if heading.startswith(after):
                if not any(c.metadata["nbgrader"]["grade_id"] == f"ch{number}-try-setup" for c in cells):
                    cells.append(new_code_cell(TRY_SETUP, metadata=_locked(f"ch{number}-try-setup")))
                cells.append(new_code_cell(code, metadata=_locked(f"ch{number}-try-{j}")))
    placed = sum(c.metadata["nbgrader"]["grade_id"].startswith(f"ch{number}-try-") for c in cells) - bool(experiments)
    if placed != len(experiments):
        raise ValueError(f"{folder}: an experiment names a section heading the lesson does not have")
    cells.append(new_code_cell(SETUP, metadata=_locked(f"ch{number}-setup")))
    for task in chapter.tasks:
        points = sum(c.points for c in chapter.checks if c.task == task.name)
        cells.append(new_markdown_cell(
            f"### Task `{task.name}` — {task.title}\n\nFill in `{task.qualname}` in "
            f"`hero_transformer/{task.module}.py`, then run the cell below ({points:g} points).",
            metadata=_locked(f"ch{number}-{task.name}-about")))
        cells.append(new_code_cell(f'score_task("{task.name}")', metadata=_locked(f"ch{number}-{task.name}", points)))
    for cell in cells:
        cell["id"] = cell.metadata["nbgrader"]["grade_id"]  # stable ids: regenerating changes nothing
    notebook = new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"}})
    nbformat.validate(notebook)
    return notebook


def path_of(folder: str) -> Path:
    return ASSIGNMENTS / folder / f"{folder}.ipynb"


def render(folder: str) -> str:
    return nbformat.writes(build(folder)) + "\n"


def stale() -> list[str]:
    known = {c.number for c in catalogue.chapters()}
    return [folder for folder in CHAPTER_FOLDERS if folder[2:4] in known
            and (not path_of(folder).exists() or path_of(folder).read_text(encoding="utf-8") != render(folder))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    out_of_date = stale()
    if args.check:
        for folder in out_of_date:
            print(f"{path_of(folder).relative_to(ASSIGNMENTS.parent)} is out of date: run `make student`")
        return 1 if out_of_date else 0
    for folder in out_of_date:
        path_of(folder).write_text(render(folder), encoding="utf-8")
    print(f"wrote {len(out_of_date)} notebook(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
