"""The student release carries no code that computes an answer, in whatever dialect.

The text scan (tests/test_release.py) finds the reference's own statements; this scan
runs the bundle's code (grader/generate/answer_scan.py): every function the bundle's
grader/checks define, called on each task's public inputs, must not give that task's
output, and no probe may compose it from the other parts. The old oracles, planted back
into a real bundle, are found.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

from grader.generate import answer_scan, release

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    folder, _, findings = release.build(tmp_path_factory.mktemp("release"))
    assert release.blocking(findings) == []
    return folder


def _source_of(path: Path, name: str) -> str:
    text = path.read_text()
    node = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == name)
    return ast.get_source_segment(text, node)


def _plant(target: Path, *functions: str):
    target.write_text(target.read_text() + "\n\n" + "\n\n\n".join(functions) + "\n")


def test_no_function_in_the_bundle_computes_an_answer(bundle):
    findings = answer_scan.scan(bundle)
    assert findings == [], "\n".join(map(str, findings))


# A probe as the public checks had one: the block's own parts composed as the lesson's
# formula, beside the block's output, so that the judge could compare them.
COMPOSING_PROBE = '''
def probe_block_formula(ns, x, sizes, state):
    block = block_of(ns, sizes, state)
    with torch.no_grad():
        y = block(x.clone())[0]
        u = x + block.attention(block.ln_attention(x))[0]
        return {"y": y, "composed": {"right": u + block.feedforward(block.ln_feedforward(u))}}
'''


def test_the_old_oracles_planted_back_are_found(bundle, tmp_path):
    planted = tmp_path / "planted"
    shutil.copytree(bundle, planted)
    checks = planted / "grader" / "checks"
    kit = ROOT / "grader" / "checks"
    # AdamW by hand (chapter 08's task) into AdamW.step's public module, renamed.
    adamw = _source_of(kit / "ch08_training" / "hidden" / "oracles.py", "hand_adamw").replace(
        "def hand_adamw(", "def reference_steps(")
    _plant(checks / "ch08_training" / "adamw_step" / "__init__.py", adamw)
    # make_batch from chapter 01's windows, into make_batch's module.
    hidden_batches = kit / "ch08_training" / "make_batch" / "hidden.py"
    _plant(checks / "ch08_training" / "make_batch" / "__init__.py",
           _source_of(kit / "ch08_training" / "hidden" / "common.py", "windows_of"),
           _source_of(hidden_batches, "_laid_out"), _source_of(hidden_batches, "right_batch"))
    # The LayerNorm written out, back where it was: the shared judging helpers.
    _plant(checks / "_api.py", "from grader.checks.course import EPS",
           _source_of(kit / "ch05_block" / "hidden" / "oracles.py", "layer_norm"))
    # A probe that composes the block from its parts.
    block = checks / "ch05_block" / "block" / "__init__.py"
    text = block.read_text()
    start = text.index("def probe_block_formula(")
    end = text.index("\n\n\n", start)
    block.write_text(text[:start] + COMPOSING_PROBE.strip() + text[end:])

    findings = answer_scan.scan(planted, chapters=["05", "08"])
    found = {(f.path, f.function, f.check.rsplit(".", 1)[0]) for f in findings}
    assert ("grader/checks/ch08_training/adamw_step/__init__.py", "reference_steps", "ch08.adamw_step") in found, findings
    assert ("grader/checks/ch08_training/make_batch/__init__.py", "right_batch", "ch08.make_batch") in found, findings
    assert ("grader/checks/_api.py", "layer_norm", "ch05.layer_norm") in found, findings
    assert ("grader/checks/ch05_block/block/__init__.py", "probe_block_formula", "ch05.block") in found, findings
    assert all(re.match(r"grader/checks/(_api\.py|(ch05_block/block|ch08_training/(adamw_step|make_batch))/__init__\.py)$",
                        f.path)
               for f in findings), findings

    # The release refuses such a bundle, naming the place.
    refused = release.blocking(release.answer_findings(planted, ["08"]))
    assert any(f.path == "grader/checks/ch08_training/adamw_step/__init__.py" and f.scope == "reference_steps" and f.line > 0
               for f in refused), refused


def test_an_allowed_formula_and_a_forbidden_operator_are_no_leak(bundle, tmp_path):
    """The allow-list's GELU formula computes gelu's answer and is allowed; torch's own
    layer_norm computes LayerNorm's, but the task forbids it: a student who copied it
    would score 'forbidden', so a judge may use it."""
    planted = tmp_path / "torch_oracle"
    shutil.copytree(bundle, planted)
    _plant(planted / "grader" / "checks" / "ch05_block" / "layer_norm" / "__init__.py",
           "def torch_layer_norm(x, gamma, beta):\n"
           "    return torch.nn.functional.layer_norm(x, x.shape[-1:], gamma, beta, eps=1e-5)")
    assert answer_scan.scan(planted, chapters=["05"]) == []
    assert answer_scan.scan(planted, allowed={}, chapters=["05"])[0].function == "exact_gelu"
