"""Shared set-up for the kit's own tests.

`import hero_transformer` must give the REFERENCE (solutions/hero_transformer), never the
student copy that sits at the repository root, so solutions/ goes first on sys.path.
The repository root is on sys.path too, for `import grader`. The student copy is loaded
on demand by the `student_package` fixture under its own module name, so both can live
in sys.modules at the same time.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS_ROOT = REPO_ROOT / "solutions"
REFERENCE_PACKAGE = SOLUTIONS_ROOT / "hero_transformer"
STUDENT_PACKAGE = REPO_ROOT / "hero_transformer"
STUDENT_MODULE_NAME = "student_hero_transformer"


def _put_first(path: Path) -> None:
    text = str(path)
    while text in sys.path:
        sys.path.remove(text)
    sys.path.insert(0, text)


# Root first, then solutions in front of it: `python -m pytest` also puts the working
# directory (the root, which holds the student copy) at the head of sys.path.
_put_first(REPO_ROOT)
_put_first(SOLUTIONS_ROOT)

# If anything imported the student copy as `hero_transformer` before us, forget it.
_loaded = sys.modules.get("hero_transformer")
if _loaded is not None and Path(_loaded.__file__).resolve().parent != REFERENCE_PACKAGE:
    for _name in [n for n in sys.modules if n == "hero_transformer" or n.startswith("hero_transformer.")]:
        del sys.modules[_name]

import hero_transformer  # noqa: E402

assert Path(hero_transformer.__file__).resolve().parent == REFERENCE_PACKAGE, (
    f"`import hero_transformer` resolved to {hero_transformer.__file__}, not the reference"
)


def load_student_package(name: str = STUDENT_MODULE_NAME, root: Path = STUDENT_PACKAGE):
    """Import the package folder `root` as top-level module `name` (no sys.path change)."""
    spec = importlib.util.spec_from_file_location(
        name, root / "__init__.py", submodule_search_locations=[str(root)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def unload(name: str) -> None:
    for loaded in [n for n in sys.modules if n == name or n.startswith(name + ".")]:
        del sys.modules[loaded]


@pytest.fixture(scope="session")
def student_package():
    """The student copy hero_transformer/ imported as `student_hero_transformer`."""
    unload(STUDENT_MODULE_NAME)
    package = load_student_package()
    yield package
    unload(STUDENT_MODULE_NAME)


@pytest.fixture(scope="session")
def student_module(student_package):
    """student_module("model") -> the student copy's hero_transformer/model.py."""

    def get(submodule: str):
        return importlib.import_module(f"{STUDENT_MODULE_NAME}.{submodule}")

    return get


@pytest.fixture
def f64():
    """Run a test with float64 as torch's default dtype and a fixed seed."""
    import torch

    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(0)
    try:
        yield torch.float64
    finally:
        torch.set_default_dtype(previous)


@pytest.fixture(scope="session")
def reference():
    """The reference package as the grader loads it (solutions/)."""
    from grader.run.reference import Reference

    return Reference()


@pytest.fixture(scope="module")
def sandbox():
    """A real sandbox with short limits, for grading submissions that misbehave."""
    from grader.run.processes import Limits
    from grader.run.sandbox import Sandbox
    from tests.timing import limit

    # 3 s on an idle machine, more on a busy one (see tests/timing.py).
    with Sandbox(Limits(check_seconds=limit(3.0), memory_bytes=3 * 1024**3)) as box:
        yield box


@pytest.fixture(scope="session")
def release_05(tmp_path_factory):
    """The students' bundle of chapter 05 as a student unpacks it, built once for the whole
    run: the test processes (pytest -n) share one build behind a lock."""
    import subprocess
    import zipfile

    from filelock import FileLock

    from grader.generate import release

    shared = tmp_path_factory.getbasetemp().parent  # one folder for every test process of a run
    unpacked = shared / "release_05"
    with FileLock(str(shared / "release_05.lock")):
        if not (unpacked / "done").is_file():
            built = subprocess.run([sys.executable, "-m", "grader", "release", "--out", str(shared / "release_05_out"),
                                    "--chapters", "05"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
            assert built.returncode == 0, built.stdout + built.stderr
            with zipfile.ZipFile(shared / "release_05_out" / f"{release.BUNDLE_NAME}.zip") as handle:
                handle.extractall(unpacked)
            (unpacked / "done").write_text("built", encoding="utf-8")
    return unpacked / release.BUNDLE_NAME
