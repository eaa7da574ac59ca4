"""What a grading worker may read of the kit's checks, by allow-list: the files of
grader/checks/ the students' bundle carries, and of the hidden checks' modules only what
their probes run (how each calls the student's code). Every other function of a hidden
module (its judges, what computes the facts, the kit's oracles) is left as a signature
whose body refuses, its data that no probe reads is left out, and the mutants, the
hidden checks' answer forms and everything else the bundle lacks are not there at all.

The Linux sandbox binds this folder where workers find grader/checks, so a worker that
walks its filesystem, or loads a module by a name it builds at run time, finds nothing the
student's own copy of the course does not hold but the probes themselves. The zygote
still refuses in memory what no probe reaches (run/inside/probes_only.py): the two agree.
"""

from __future__ import annotations

import ast
import atexit
import compileall
import hashlib
import shutil
import sys
import tempfile
import types
from functools import lru_cache
from pathlib import Path

from grader import KIT_ROOT

CHECKS_DIR = KIT_ROOT / "grader" / "checks"
REFUSED = "raise RuntimeError('the grader\\'s own code: not in the sandbox')"


def _check_modules() -> dict[str, types.ModuleType]:
    from grader.checks import catalogue
    from grader.run.inside.probes_only import CHECKS

    catalogue.all_checks()  # every check module imported, the hidden ones too
    return {name: module for name, module in list(sys.modules.items())
            if module is not None and (name == CHECKS or name.startswith(CHECKS + "."))
            and not name.endswith("." + catalogue.MUTANTS)}


def _module_name(path: Path) -> str:
    parts = path.relative_to(KIT_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def probes_only_source(source: str, module: types.ModuleType, reachable: set[int]) -> str:
    """A hidden module's source with only what its probes reach: each other function or
    class keeps its name (and a function its decorators and signature, which declare the
    checks) with a body that refuses; module data no kept code reads is dropped."""
    tree = ast.parse(source)
    # What the checks' declarations call as the module is imported (an inputs factory:
    # inputs=_random_inputs(0.5)) runs in the sandbox too, and stays whole.
    called = {call.func.id for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
              for decorator in node.decorator_list for call in ast.walk(decorator)
              if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)}
    written: dict[int, ast.stmt] = {}  # by position in the module: what stays, as it stays
    data: dict[int, ast.stmt] = {}
    for i, node in enumerate(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if id(getattr(module, node.name, None)) in reachable or node.name in called:
                written[i] = node
            elif isinstance(node, ast.ClassDef):
                written[i] = ast.parse(f"def {node.name}(*args, **kwargs):\n    {REFUSED}").body[0]
            else:
                node.body = ast.parse(REFUSED).body
                written[i] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            written[i] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            data[i] = node
        # A docstring or any other statement at module level says nothing a probe needs.
    # Data stays where kept code reads it, and so does data that data reads.
    needed = {n.id for node in written.values() for n in ast.walk(node) if isinstance(n, ast.Name)}
    changed = True
    while changed:
        changed = False
        for i, node in list(data.items()):
            targets = {n.id for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                       for n in ast.walk(t) if isinstance(n, ast.Name)}
            if targets & needed:
                written[i] = data.pop(i)
                needed |= {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)} if node.value else set()
                changed = True
    return ast.unparse(ast.Module(body=[written[i] for i in sorted(written)], type_ignores=[])) + "\n"


def write(target: Path) -> Path:
    """Write the worker's grader/checks into `target` (created): returns it. Only here are
    the checks imported (and so torch): a sandbox that finds the view written starts at once."""
    from grader.checks import catalogue
    from grader.run.inside.probes_only import reachable_from_probes

    modules = _check_modules()
    reachable = reachable_from_probes(modules)
    for path in sorted(CHECKS_DIR.rglob("*")):
        relative = path.relative_to(CHECKS_DIR)
        if path.is_dir() or "__pycache__" in relative.parts:
            continue
        in_chapter = catalogue.CHAPTER_PACKAGE.fullmatch(relative.parts[0]) and len(relative.parts) > 1
        kind = catalogue.kit_only(Path(*relative.parts[1:])) if in_chapter else None
        if kind == "mutants" or (kind == "hidden" and path.suffix != ".py"):
            continue
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        if kind == "hidden":
            module = modules.get(_module_name(path))
            if module is None:
                continue  # a hidden file no check imports is no probe
            destination.write_text(probes_only_source(path.read_text(encoding="utf-8"), module, reachable),
                                   encoding="utf-8")
        else:
            shutil.copy2(path, destination)
    for folder in [target, *(p for p in target.rglob("*") if p.is_dir())]:
        folder.chmod(0o755)
    for file in (p for p in target.rglob("*") if p.is_file()):
        file.chmod(0o644)
    return target


CACHE = KIT_ROOT / ".worker_view"


def _digest() -> str:
    """Of every file the view is made from, and of the code that makes it."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for path in sorted(CHECKS_DIR.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(CHECKS_DIR).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


# A view another grader may still be binding (a class's run that began before the checks
# changed) is left a day before it goes.
STALE_SECONDS = 24 * 3600


def _prune(cache: Path, key: str) -> None:
    import time

    for old in cache.iterdir():
        try:
            stale = time.time() - old.stat().st_mtime > STALE_SECONDS
        except OSError:
            continue
        if old.name != key and stale:
            shutil.rmtree(old, ignore_errors=True)


@lru_cache(maxsize=1)
def folder() -> Path:
    """The worker view of grader/checks as the kit is now: written once per change of the
    checks into .worker_view/ beside the kit (a temporary folder where the kit is
    read-only), and bound by every sandbox."""
    key = _digest()
    for cache in (CACHE, None):
        try:
            if cache is None:
                cache = Path(tempfile.mkdtemp(prefix="hero_transformer_checks_"))
                atexit.register(shutil.rmtree, cache, True)
            cache.mkdir(exist_ok=True)
            cache.chmod(0o755)  # the sandbox's user (nobody) reads it
            done = cache / key
            if not (done / "checks").is_dir():
                # Written aside and renamed into place: two graders starting at once agree.
                writing = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=cache))
                write(writing / "checks")
                # Compiled once per view: the sandbox binds it read-only, where no process
                # can write bytecode, and compiling every check module again took each
                # zygote's boot about a tenth of a second.
                compileall.compile_dir(writing / "checks", quiet=2)
                writing.chmod(0o755)
                try:
                    writing.rename(done)
                except OSError:
                    shutil.rmtree(writing, ignore_errors=True)  # the other one was first
                _prune(cache, key)
            return done / "checks"
        except OSError:
            continue
    raise OSError("no folder to write the sandbox's view of the checks into")
