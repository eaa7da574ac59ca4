"""The lessons' figures: `make figures` redraws the committed SVGs byte for byte, and
every figure a lesson shows exists (and every drawn figure is shown)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from grader.generate import lesson_tables as assignments
from grader.generate import figures

ROOT = Path(__file__).resolve().parent.parent
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def _lesson(folder: str) -> str:
    return (assignments.ASSIGNMENTS / folder / "README.md").read_text(encoding="utf-8")


def test_make_figures_redraws_the_committed_figures_exactly():
    # A fresh process, as `make figures` runs: no torch or matplotlib state from other tests.
    done = subprocess.run([sys.executable, "-m", "grader.generate.figures", "--check"], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)  # a bound on a hang, not a speed target: a busy machine draws slower
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("folder", assignments.CHAPTER_FOLDERS)
def test_every_figure_a_lesson_names_exists(folder):
    named = IMAGE.findall(assignments.outside_block(_lesson(folder)))
    assert named, f"{folder}: the lesson shows no figure"
    for link in named:
        assert link.startswith(f"{figures.FIGURE_DIR}/") and link.endswith(".svg"), f"{folder}: {link}"
        assert (assignments.ASSIGNMENTS / folder / link).is_file(), f"{folder}: {link} is missing: run `make figures`"


def test_every_drawn_figure_is_shown_and_nothing_else_lies_in_the_figure_folders():
    drawn = {figure.path for figure in figures.FIGURES}
    for figure in figures.FIGURES:
        assert f"]({figures.FIGURE_DIR}/{figure.name})" in _lesson(figure.folder), (
            f"{figure.folder}/README.md does not show {figure.name}")
    on_disk = set(assignments.ASSIGNMENTS.glob(f"ch*/{figures.FIGURE_DIR}/*"))
    assert on_disk == drawn, f"stray or missing files: {sorted(map(str, on_disk ^ drawn))}"


def test_svg_carries_no_date_or_creator():
    for figure in figures.FIGURES:
        text = figure.path.read_text(encoding="utf-8")
        assert "<dc:date>" not in text and "Matplotlib v" not in text, figure.name


def test_a_drawing_is_the_same_within_a_hundredth_of_a_pixel_and_no_further():
    drawn = b'<path d="M 71.22 114.584372 L 86.491642 57.434575 z" style="fill: #1f77b4"/>'
    assert figures.same_drawing(drawn, drawn.replace(b"57.434575", b"57.43454"))  # another CPU's last bit
    assert not figures.same_drawing(drawn, drawn.replace(b"57.434575", b"57.5"))  # a visible change
    assert not figures.same_drawing(drawn, drawn.replace(b"#1f77b4", b"#ff7f0e"))  # another colour
    assert not figures.same_drawing(drawn, drawn.replace(b" z", b" Z"))
