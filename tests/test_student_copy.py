"""The student copy hero_transformer/: generated from solutions/, in sync, importable,
and every graded part raises NotImplementedError with its task id; nor does a part it
keeps (backward.py's forward passes) earn a graded task's points."""

from __future__ import annotations

import ast
import importlib
import sys
import types
from pathlib import Path

import pytest
import torch

from grader.generate import student_copy
from grader.regions import STUDENT_HEADER, all_regions, package_sources
from tests.hostile import assert_no_points, grade_one, hostile_sources

REPO_ROOT = Path(__file__).resolve().parent.parent
REFERENCE_PACKAGE = REPO_ROOT / "solutions" / "hero_transformer"
STUDENT_PACKAGE = REPO_ROOT / "hero_transformer"
STUDENT_MODULE_NAME = "student_hero_transformer"  # the name conftest's fixture uses

# ------------------------------------------------------------------ helpers


def _module_name(rel: str) -> str:
    return rel[: -len(".py")].replace("/", ".")


def _functions_with_qualnames(tree: ast.AST):
    """(qualname, node) of every function, nested ones as Outer.inner."""
    found = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    found.append((name, child))
                visit(child, name + ".")

    visit(tree, "")
    return found


def _stub_task(node: ast.AST) -> str | None:
    """The task of a `raise NotImplementedError("<task>")` statement, else None."""
    if not isinstance(node, ast.Raise) or not isinstance(node.exc, ast.Call):
        return None
    call = node.exc
    if not (isinstance(call.func, ast.Name) and call.func.id == "NotImplementedError"):
        return None
    if len(call.args) != 1 or call.keywords or not isinstance(call.args[0], ast.Constant):
        return None
    return call.args[0].value if isinstance(call.args[0].value, str) else None


def _direct_statements(function: ast.AST):
    """Statements of a function, not descending into nested functions or classes."""
    stack = list(function.body)
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                stack.append(child)


def student_stubs(root: Path = STUDENT_PACKAGE) -> dict[str, tuple[str, str]]:
    """task -> (relative path, qualname) of every stub in the student copy."""
    stubs = {}
    for rel, source in package_sources(root).items():
        for qualname, function in _functions_with_qualnames(ast.parse(source)):
            for node in _direct_statements(function):
                task = _stub_task(node)
                if task is not None:
                    assert task not in stubs, f"task {task!r} is stubbed twice"
                    stubs[task] = (rel, qualname)
    return stubs


STUBS = student_stubs()

# The tasks of chapters 01-07. More may be added; none of these may disappear.
KNOWN_TASKS = {
    "build_vocab", "encode", "decode", "windows",
    "embedding", "positions",
    "attention_init", "split_heads", "merge_heads", "attention",
    "layer_norm", "gelu", "feedforward", "block",
    "cross_entropy", "parameter_count", "lm_init", "lm_forward",
    "layer_norm_backward", "gelu_backward", "linear_backward", "residual_backward",
}  # fmt: skip


def _triggers():
    """task -> function(get_module) that calls the student's stub the way a student's
    caller would (a stand-in `self` where the class's own __init__ is a stub too).
    Tasks of other chapters are covered by the ast check against grader.regions."""
    x = torch.zeros(2, 3, 4)
    heads = types.SimpleNamespace(n_heads=2, d_head=2)

    def cfg(m):
        return m.Config(vocab_size=10, block_size=8, d_model=4, n_heads=2, n_layers=1, d_ff=8)

    return {
        "block_init": lambda get: get("model").TransformerBlock(cfg(get("model"))),
        "build_vocab": lambda get: get("tokenizer").CharTokenizer(["ana"]),
        "encode": lambda get: get("tokenizer").CharTokenizer.encode(None, "ana"),
        "decode": lambda get: get("tokenizer").CharTokenizer.decode(None, [0, 1]),
        "windows": lambda get: get("tokenizer").training_windows([0, 1, 2], 4),
        "embedding": lambda get: get("model").TokenEmbedding(10, 4)(torch.tensor([[1, 2]])),
        "positions": lambda get: get("model").PositionEmbedding(8, 4)(x),
        "attention_init": lambda get: get("model").CausalSelfAttention(cfg(get("model"))),
        "split_heads": lambda get: get("model").CausalSelfAttention.split_heads(heads, x),
        "merge_heads": lambda get: get("model").CausalSelfAttention.merge_heads(heads, torch.zeros(2, 2, 3, 2)),
        "attention": lambda get: get("model").CausalSelfAttention.forward(heads, x),
        "layer_norm": lambda get: get("model").LayerNorm(4)(x),
        "gelu": lambda get: get("model").gelu(x),
        "feedforward": lambda get: get("model").FeedForward(cfg(get("model")))(x),
        "block": lambda get: get("model").TransformerBlock.forward(None, x),
        "cross_entropy": lambda get: get("model").cross_entropy(torch.zeros(2, 5), torch.tensor([0, 1])),
        "parameter_count": lambda get: get("model").parameter_count(cfg(get("model"))),
        "lm_init": lambda get: get("model").TransformerLM(cfg(get("model"))),
        "lm_forward": lambda get: get("model").TransformerLM.forward(None, torch.tensor([[1, 2]])),
        "layer_norm_backward": lambda get: get("backward").layer_norm_backward(x, x, torch.ones(4)),
        "gelu_backward": lambda get: get("backward").gelu_backward(x, x),
        "linear_backward": lambda get: get("backward").linear_backward(x, x, torch.zeros(4, 4)),
        "residual_backward": lambda get: get("backward").residual_feedforward_backward(
            x, x, torch.ones(4), torch.zeros(4), torch.zeros(8, 4), torch.zeros(8), torch.zeros(4, 8), torch.zeros(4)
        ),
    }


TRIGGERS = _triggers()


# -------------------------------------------------------------------- tests


def test_student_copy_is_in_sync_with_a_fresh_generation():
    assert student_copy.stale_files() == []


def test_student_copy_files_carry_the_header_and_no_markers():
    sources = package_sources(STUDENT_PACKAGE)
    assert set(sources) == set(package_sources(REFERENCE_PACKAGE))
    for rel, source in sources.items():
        assert source.startswith(STUDENT_HEADER), rel
        assert "BEGIN SOLUTION" not in source and "END SOLUTION" not in source, rel
        ast.parse(source)  # valid Python


def test_every_known_task_is_stubbed():
    missing = KNOWN_TASKS - set(STUBS)
    assert not missing, f"no NotImplementedError stub for {sorted(missing)}"


def test_every_region_of_the_reference_is_a_stub_in_the_same_function():
    regions = all_regions(REFERENCE_PACKAGE)
    assert set(regions) >= KNOWN_TASKS
    assert set(regions) == set(STUBS), "stubs and solution regions differ"
    for task, region in regions.items():
        assert STUBS[task] == (region.path, region.qualname), task


def test_reference_has_no_stubs():
    assert student_stubs(REFERENCE_PACKAGE) == {}


def test_student_copy_imports_cleanly_beside_the_reference(student_package, student_module):
    assert Path(student_package.__file__).resolve().parent == STUDENT_PACKAGE
    for rel in package_sources(STUDENT_PACKAGE):
        if rel == "__init__.py":
            continue
        module = student_module(_module_name(rel))
        assert Path(module.__file__).resolve() == STUDENT_PACKAGE / rel
        assert module.__name__ == f"{STUDENT_MODULE_NAME}.{_module_name(rel)}"
    # the reference is untouched and still the one `hero_transformer` names
    import hero_transformer.model

    assert Path(sys.modules["hero_transformer"].__file__).resolve().parent == REFERENCE_PACKAGE
    assert student_module("model").Config is not hero_transformer.model.Config
    assert importlib.import_module("hero_transformer.model") is hero_transformer.model


@pytest.mark.parametrize("task", sorted(set(TRIGGERS) & set(STUBS)))
def test_every_stub_raises_not_implemented_with_its_task(student_module, task):
    trigger = TRIGGERS[task]
    with pytest.raises(NotImplementedError) as info:
        trigger(student_module)
    assert info.value.args == (task,)


def test_student_non_graded_parts_still_work(student_module):
    model = student_module("model")
    cfg = model.Config(vocab_size=5, block_size=4, d_model=4, n_heads=2, n_layers=1, d_ff=8)
    assert cfg.d_head == 2
    with pytest.raises(ValueError):
        model.Config(vocab_size=5, block_size=4, d_model=4, n_heads=3, n_layers=1, d_ff=8)
    ln = model.LayerNorm(4)
    assert torch.equal(ln.weight.detach(), torch.ones(4))
    assert student_module("data").SPLIT_SEED == importlib.import_module("hero_transformer.data").SPLIT_SEED


def test_stub_propagates_through_the_autograd_function(student_module):
    backward = student_module("backward")
    x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    y = backward.LinearFunction.apply(x, weight, torch.zeros(4, dtype=torch.float64))
    with pytest.raises(NotImplementedError, match="linear_backward"):
        y.sum().backward()


def test_the_autograd_functions_forward_through_chapter_05s_own_code(student_module):
    # The plumbing does not restate gelu or LayerNorm (that would hand out chapter 05's
    # answers): in the student copy their forwards are the student's, stubs included.
    backward = student_module("backward")
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    with pytest.raises(NotImplementedError, match="^gelu$"):
        backward.GELUFunction.apply(x)
    gamma, beta = torch.ones(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
    with pytest.raises(NotImplementedError, match="^layer_norm$"):
        backward.LayerNormFunction.apply(x, gamma, beta)


# ---------------------------------------------------- the generator itself


def test_generate_is_deterministic_and_strips_every_region():
    first = student_copy.generate()
    assert first == student_copy.generate()
    assert set(first) == set(package_sources(REFERENCE_PACKAGE))
    for rel, text in first.items():
        assert text.startswith(STUDENT_HEADER)
        assert "SOLUTION" not in text.replace("solutions/", ""), rel


def test_stale_files_detects_edits_extra_and_missing_files(tmp_path):
    copy = tmp_path / "hero_transformer"
    expected = student_copy.generate()
    assert student_copy.stale_files(copy) == sorted(expected)  # nothing there yet
    assert student_copy.write(copy) == sorted(expected)
    assert student_copy.stale_files(copy) == []
    assert package_sources(copy) == expected
    (copy / "model.py").write_text((copy / "model.py").read_text() + "\n# edited\n")
    (copy / "extra.py").write_text("x = 1\n")
    (copy / "tokenizer.py").unlink()
    assert student_copy.stale_files(copy) == ["extra.py", "model.py", "tokenizer.py"]
    assert student_copy.write(copy) == ["extra.py", "model.py", "tokenizer.py"]
    assert student_copy.stale_files(copy) == []
    assert not (copy / "extra.py").exists()


def test_check_command_agrees_with_stale_files(capsys):
    stale = student_copy.stale_files()
    code = student_copy.main(["--check"])
    out = capsys.readouterr().out
    if stale:
        assert code == 1 and all(rel in out for rel in stale)
    else:
        assert code == 0 and "in sync" in out


# ------------------------------------------------------ no graded answer in the copy


@pytest.mark.parametrize("task_name, body", [
    pytest.param("gelu", "from .backward import _gelu_forward\nreturn _gelu_forward(x)", id="gelu"),
    pytest.param("layer_norm", "from .backward import _layer_norm_forward\n"
                               "return _layer_norm_forward(x, self.weight, self.bias, self.eps)", id="layer_norm"),
])
def test_the_student_copy_does_not_ship_graded_answers(reference, sandbox, task_name, body):
    sources = hostile_sources(reference, {task_name: body})
    sources["backward.py"] = (REPO_ROOT / "hero_transformer" / "backward.py").read_text()  # as released to students
    results = grade_one(reference, sandbox, task_name, sources)
    assert_no_points(results)
