"""The grader's structure, read from its source: no import circle among its modules,
no private name taken from another module, and no verdict recognised by its wording."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

GRADER = Path(__file__).resolve().parent.parent / "grader"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(GRADER.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in GRADER.rglob("*.py") if "release_template" not in p.parts}


def _resolve(name: str) -> str | None:
    """The grader module an import names (a package's __init__ for a package)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> list[tuple[str, str, int]]:
    """(imported module, name taken from it or '', line) for every import in the module,
    at any depth (inside functions and `if TYPE_CHECKING:` too)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("grader"):
                    found.append((alias.name, "", node.lineno))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if not base.startswith("grader"):
                continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in MODULES:  # `from grader.run import sandbox`: the module itself
                    found.append((submodule, "", node.lineno))
                else:
                    found.append((base, alias.name, node.lineno))
    return found


def _graph() -> dict[str, set[str]]:
    graph = {m: set() for m in MODULES}
    for module in MODULES:
        for imported, _, _ in _imports(module):
            target = _resolve(imported)
            if target and target != module:
                graph[module].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def _package_of(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def test_no_import_circle_among_grader_modules():
    # A package's __init__ naming its own submodules is how a package shows its face;
    # any other circle is two modules that cannot be read apart.
    graph = _graph()
    for module, targets in graph.items():
        graph[module] = {t for t in targets if not (MODULES[module].name == "__init__.py"
                                                      and t.startswith(module + "."))}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_private_name_is_imported_across_modules():
    crossing = []
    for module in MODULES:
        for imported, name, line in _imports(module):
            if name.startswith("_") and not name.startswith("__"):
                crossing.append(f"{module}:{line} takes {name} from {imported}")
    assert crossing == []


def test_no_private_name_is_reached_through_another_module():
    """`from grader.run import sandbox` then `sandbox._kill(...)`: the same crossing."""
    crossing = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bound = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("grader"):
                for alias in node.names:
                    if f"{node.module}.{alias.name}" in MODULES:
                        bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("grader") and alias.asname:
                        bound[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                crossing.append(f"{module}:{node.lineno} reaches {bound[node.value.id]}.{node.attr}")
    assert crossing == []


# What a verdict may not be read from: the words of a diagnosis, of an exception's
# message, or of a forbidden call, which a rewording would silently change.
_WORDING_MATCH = re.compile(
    r"(diagnosis|message|reason|called)\b[^\n]*\.(startswith|endswith)\(|"
    r"\.(match|fullmatch|search)\((diagnosis|message|reason|called)\b|"
    r"\"[^\"\n]{12,}\" in (r\.)?(diagnosis|message|reason|called)\b")


@pytest.mark.parametrize("part", ["run", "lms", "grade_class"])
def test_no_verdict_is_recognised_by_its_wording(part):
    found = []
    for path in sorted((GRADER / part).rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _WORDING_MATCH.search(line):
                found.append(f"{path.relative_to(GRADER)}:{number}: {line.strip()}")
    assert found == []


def test_the_wording_scan_sees_the_old_ways():
    for line in ('broken = [r for r in results if (r.diagnosis or "").startswith("the grader could not")]',
                 'if kind == "RuntimeError" and message.startswith("the code called sys.exit("):',
                 "missing = _MISSING_MODULE.fullmatch(message)",
                 'if called.startswith("a new thread"):'):
        assert _WORDING_MATCH.search(line), line


def test_what_the_cli_reads_before_the_runner_starts_does_not_import_torch():
    """The command line opens and starts the runner (whose zygote imports torch) before
    it imports torch itself, so the two imports overlap: the modules it needs for that
    must not import torch on their own."""
    import subprocess
    import sys

    code = ("import sys; import grader.__main__, grader.run.results, grader.run.reference, grader.run.runners, "
            "grader.run.processes, grader.run.portable, grader.run.sandbox; print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=GRADER.parent, capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


def test_only_the_command_line_imports_the_command_line():
    """A back end, a tool or the pytest entry starts a grading through grader.run.session,
    never through the command line's module."""
    reaching = [(module, line) for module in MODULES if module != "grader.__main__"
                for imported, _, line in _imports(module) if imported == "grader.__main__"]
    assert reaching == [], reaching


@pytest.mark.parametrize("importer, imported", [
    ("grader.generate.", "grader.qa"),  # what students and TAs receive is built without the kit's own proofs
    ("grader.qa.", "grader.generate.release"),  # the bench builds a release by the command course staff run
    ("grader.mutants", "grader.checks"),  # the task folders' mutants import it: it finds them by their files
    ("grader.regions", "grader.run"),  # the region markers sit below everything that reads them
    ("grader.checks", "grader.run"),  # the checks are declarations the grader reads, and the worker imports
])
def test_no_arrow_runs_back_up(importer, imported):
    reaching = [(module, name, line) for module in MODULES if module.startswith(importer)
                for name, _, line in _imports(module) if name == imported or name.startswith(imported + ".")]
    assert reaching == [], reaching
