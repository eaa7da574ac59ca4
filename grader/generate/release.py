"""The student release: what students are handed, and a scan proving it holds no answer.

    python -m grader release --out DIR [--chapters 00,01,05]

writes DIR/hero_transformer-student/ and DIR/hero_transformer-student.zip: the stub
package, the lessons and their figures, the public checks with the engine that runs
them, and a Makefile, pyproject.toml, README.md and GitHub Classroom workflow of their
own. Each chapter's check package is copied without its hidden/ folder, which holds the
hidden checks with their code and inputs, and the finished folder is scanned before it
is zipped.

The scan compares statements, not text: every statement of the reference's solution
regions and of the accuracy mutants and variants is normalised (comments, docstrings,
layout and local names gone; attributes, keywords and constants kept), and so is every
statement of the bundle's Python and of the code in its other text files. A match of
two consecutive statements, or of one statement long enough to say something on its
own, fails the release with the file and line. Hidden check names and the statements of
the hidden/ modules (beyond what the public checks spell out too) are looked for the
same way.

A second scan (answer_scan.py) runs the code instead of reading it: every function of
the bundle's checks is called on each task's public inputs, and one that computes the
task's answer (in whatever dialect) fails the release too. What the public judges need
to know about the right answer ships as data the kit computed (facts.json), never as
code that computes it.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import json
import re
import shutil
import sys
import textwrap
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from grader import KIT_ROOT
from grader.checks import catalogue
from grader.generate.allowed import ALLOW_LIST, read_allow_list
from grader.regions import find_regions, package_sources
from grader.run import dependencies

ROOT = KIT_ROOT
TEMPLATE = Path(__file__).resolve().parent / "release_template"
BUNDLE_NAME = "hero_transformer-student"

# The engine a student's `make check` runs, and nothing that reads solutions/ or serves TAs.
STUDENT_GRADER = ("__init__.py", "__main__.py", "archives.py", "console.py", "edition.py", "files.py", "profile.py",
                  "parsing.py", "pytest_plugin.py", "regions.py", "lms/__init__.py",
                  "lms/github_classroom.py")  # and run/, and checks/ without what only the kit has (KIT_ONLY)

# A single statement this long (normalised) is specific enough to be a leak on its own;
# anything shorter (`return x`, `B, T = x.shape`) must come with a neighbour.
SINGLE_CHARS = 40
TRIVIAL_CHARS = 15

_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")


# ------------------------------------------------------------ the check packages


def _check_packages(chapters: list[str] | None = None) -> list[Path]:
    """The chapters' check packages (all without a list), grader/checks/chNN_*/."""
    return [ROOT / "grader" / "checks" / name for name in catalogue.chapter_packages()
            if not chapters or name[2:4] in chapters]


def _check_modules(hidden: bool) -> list[Path]:
    """The modules of the chapters' check packages: the public ones, which the bundle
    carries, or the hidden ones, which it never does (nor the mutants, read apart)."""
    wanted = "hidden" if hidden else None
    return [path for package in _check_packages() for path in sorted(package.rglob("*.py"))
            if "__pycache__" not in path.parts and catalogue.kit_only(path.relative_to(package)) == wanted]


def _copy_check_package(package: Path, target: Path):
    """A chapter's check package without what only the kit has."""
    def ignored(folder, names):
        skipped = set(_IGNORED(folder, names))
        return skipped | {n for n in names if catalogue.kit_only((Path(folder) / n).relative_to(package))}

    shutil.copytree(package, target, ignore=ignored)


# ---------------------------------------------------------------- normalising

_KEPT_NAMES = frozenset(dir(builtins)) | {"torch", "math", "nn", "F", "self", "random", "np"}


class _Renamer(ast.NodeTransformer):
    """Local names become v0, v1, ... in order of first appearance: a copy with its
    variables renamed normalises to the same text."""

    def __init__(self):
        self.names: dict[str, str] = {}

    def _name(self, name: str) -> str:
        if name in _KEPT_NAMES:
            return name
        return self.names.setdefault(name, f"v{len(self.names)}")

    def visit_Name(self, node):
        return ast.copy_location(ast.Name(id=self._name(node.id), ctx=node.ctx), node)

    def visit_arg(self, node):
        node.arg = self._name(node.arg)
        node.annotation = None
        return node

    def visit_FunctionDef(self, node):
        node.name = self._name(node.name)
        node.returns = None
        node.decorator_list = []
        node.body = [s for s in node.body if not _is_docstring(s)] or [ast.Pass()]
        self.generic_visit(node)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def normalise(*statements: ast.stmt) -> str:
    renamer = _Renamer()
    parts = []
    for statement in statements:
        copy = ast.parse(ast.unparse(statement)).body  # a private copy to rename
        parts.extend(ast.unparse(renamer.visit(s)) for s in copy)
    return re.sub(r"\s+", "", ";".join(parts))


def _bodies(tree: ast.AST):
    """Every list of statements in the tree (module, function, loop, branch bodies)."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            value = getattr(node, field, None)
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                yield [s for s in value if not _is_docstring(s)]
        for handler in getattr(node, "handlers", []) or []:
            yield handler.body


def fingerprints(tree: ast.AST) -> dict[str, int]:
    """Normalised text -> first line, for every long statement and every pair of
    non-trivial neighbours."""
    found: dict[str, int] = {}
    for body in _bodies(tree):
        forms = [normalise(s) for s in body]
        for i, statement in enumerate(body):
            if len(forms[i]) >= SINGLE_CHARS and not isinstance(statement, (ast.FunctionDef, ast.ClassDef)):
                found.setdefault(forms[i], statement.lineno)
            if i + 1 < len(body) and len(forms[i]) >= TRIVIAL_CHARS and len(forms[i + 1]) >= TRIVIAL_CHARS:
                found.setdefault(normalise(statement, body[i + 1]), statement.lineno)
    return found


def _parse_snippet(text: str) -> ast.Module | None:
    try:
        return ast.parse(textwrap.dedent(text))
    except (SyntaxError, ValueError):
        return None


# ------------------------------------------------------------------ the secrets


def _region_bodies(root: Path) -> list[tuple[str, str]]:
    """(label, body) of every solution region of the reference."""
    found = []
    for rel, source in package_sources(root).items():
        for region in find_regions(source, rel):
            found.append((f"solutions/{root.name}/{rel} region {region.task}", region.body(source)))
    return found


def _accuracy_bodies() -> list[tuple[str, str]]:
    """(label, body) of every mutant and variant: the full text of the region each one
    writes (a patched mutant's too), which restates a reference body."""
    from grader.mutants import catalogue

    reference = package_sources(ROOT / "solutions" / "hero_transformer")
    mutants, variants = catalogue()
    return [(f"the {kind} {entry.name} (region {entry.task})", entry.region(reference))
            for kind, entries in (("mutant", mutants), ("variant", variants)) for entry in entries]


@dataclass
class Secrets:
    fingerprints: dict[str, str]  # normalised statement(s) -> where it comes from
    hidden_names: set[str]

    @classmethod
    def of_kit(cls) -> "Secrets":
        """The kit's secrets as its files now are (computed once per state of them: reading
        them all costs half a minute, and a test builds several bundles)."""
        return _secrets_of(_kit_state())

    @classmethod
    def computed(cls) -> "Secrets":
        prints: dict[str, str] = {}
        sources = _region_bodies(ROOT / "solutions" / "hero_transformer") + _accuracy_bodies()
        # Public by design: the stub package (its code outside the regions), and for the
        # hidden checks' code, whatever the public checks also spell out.
        stubs = set()
        for path in sorted((ROOT / "hero_transformer").rglob("*.py")):
            stubs |= set(fingerprints(ast.parse(path.read_text(encoding="utf-8"))))
        public = set()
        for path in _check_modules(hidden=False):
            public |= set(fingerprints(ast.parse(path.read_text(encoding="utf-8"))))
        hidden_sources = [(f"the hidden checks' {path.relative_to(ROOT).as_posix()}",
                           path.read_text(encoding="utf-8")) for path in _check_modules(hidden=True)]
        hidden = {c.name for c in catalogue.all_checks() if c.hidden}
        for label, body in sources + hidden_sources:
            tree = _parse_snippet(body)
            if tree is None:
                continue
            shared = stubs | (public if label.startswith("the hidden checks'") else set())
            for form in fingerprints(tree):
                if form not in shared:
                    prints.setdefault(form, label)
        return cls(prints, hidden)


def _kit_state() -> tuple:
    """Every file the secrets are read from, with its size and modification time."""
    roots = [ROOT / "solutions" / "hero_transformer", ROOT / "hero_transformer", ROOT / "grader" / "checks"]
    return tuple((str(path), stat.st_mtime_ns, stat.st_size) for root in roots
                 for path in sorted(root.rglob("*.py")) if (stat := path.stat()))


@lru_cache(maxsize=2)
def _secrets_of(state: tuple) -> Secrets:
    return Secrets.computed()


# ---------------------------------------------------------------------- the scan


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    what: str
    scope: str = ""  # the enclosing function in a Python file, for the allow-list
    allowed: str = ""  # the allow-list's reason, when it lists this place
    allowed_by: str = ""  # the allow-list entry that did

    def __str__(self):
        where = f"{self.path}:{self.line}" + (f" ({self.scope})" if self.scope else "")
        return f"{where}: {self.what}" + (f" — allowed: {self.allowed}" if self.allowed else "")


def _scopes(tree: ast.AST) -> list[tuple[int, int, str]]:
    spans = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                spans.append((child.lineno, child.end_lineno, prefix + child.name))
                visit(child, prefix + child.name + ".")

    visit(tree, "")
    return spans


def _snippets(text: str) -> list[tuple[int, str]]:
    """(first line, code) of what may be code in a text file: fenced blocks, and each
    line on its own (inline code and indented examples included)."""
    snippets, lines = [], text.splitlines()
    fence_start, block = None, []
    for number, line in enumerate(lines, start=1):
        if line.strip().startswith("```"):
            if fence_start is None:
                fence_start, block = number + 1, []
            else:
                snippets.append((fence_start, "\n".join(block)))
                fence_start = None
            continue
        if fence_start is not None:
            block.append(line)
        for code in re.findall(r"`([^`]+)`", line) or [line.strip().removeprefix(">>> ")]:
            snippets.append((number, code))
    return snippets


def scan(bundle: Path, secrets: Secrets | None = None, allowed: dict[str, str] | None = None) -> list[Finding]:
    """What of the solutions, the mutants or the hidden checks appears in the bundle;
    the places the allow-list names come back with its reason (they do not block)."""
    secrets = secrets or Secrets.of_kit()
    allowed = read_allow_list() if allowed is None else allowed
    findings = []
    for path in sorted(p for p in bundle.rglob("*") if p.is_file()):
        rel = path.relative_to(bundle).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, ValueError):
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            for name in secrets.hidden_names:
                if name in line:
                    findings.append(Finding(rel, number, f"names the hidden check {name}"))
        if path.suffix == ".py":
            tree = _parse_snippet(text)
            units = [(0, tree)] if tree is not None else []
        else:
            units = [(start - 1, t) for start, code in _snippets(text) if (t := _parse_snippet(code)) is not None]
        scopes = _scopes(tree) if path.suffix == ".py" and tree is not None else []
        seen = set()
        for offset, unit in units:
            for form, line in fingerprints(unit).items():
                where = line + offset
                source = secrets.fingerprints.get(form)
                if source is None or (where, source) in seen:
                    continue
                seen.add((where, source))
                scope = max((s for s in scopes if s[0] <= where <= s[1]), key=lambda s: s[0], default=(0, 0, ""))[2]
                findings.append(Finding(rel, where, f"restates {source}", scope))
    for i, finding in enumerate(findings):
        entry = next((key for key in (f"{finding.path}::{finding.scope}", finding.path) if key in allowed), "")
        why = allowed.get(entry)
        if why and "hidden" not in finding.what:  # a hidden check's name or code is never allowed
            findings[i] = Finding(finding.path, finding.line, finding.what, finding.scope, why, entry)
    return findings


def answer_findings(folder: Path, chapters: list[str] | None = None) -> list[Finding]:
    """The answer scan's findings as the release reports them (never allowed: the scan
    already leaves out what the allow-list names)."""
    from grader.generate.answer_scan import scan as scan_answers

    found = []
    for finding in scan_answers(folder, chapters=chapters):
        text = (folder / finding.path).read_text(encoding="utf-8")
        line = next((n for n, code in enumerate(text.splitlines(), 1) if code.startswith(f"def {finding.function}(")), 0)
        found.append(Finding(finding.path, line, f"computes the answer of task {finding.check.rsplit('.', 1)[0]} "
                                                 f"on the inputs of {finding.check} (called {finding.how})",
                             finding.function))
    return found


def blocking(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if not f.allowed]


def stale_allowances(findings: list[Finding], allowed: dict[str, str] | None = None) -> list[str]:
    """Allow-list entries no finding of a full bundle used: left over from code that has
    changed, and a hole a new leak at that place would slip through."""
    allowed = read_allow_list() if allowed is None else allowed
    return sorted(set(allowed) - {f.allowed_by for f in findings if f.allowed})


# --------------------------------------------------------------------- building


def _chapter_folders(chapters: list[str] | None) -> list[Path]:
    from grader.generate.lesson_tables import ASSIGNMENTS, CHAPTER_FOLDERS

    return [ASSIGNMENTS / name for name in CHAPTER_FOLDERS if not chapters or name[2:4] in chapters]


def _copy_tree(source: Path, target: Path):
    shutil.copytree(source, target, ignore=_IGNORED)


def build(out: Path, chapters: list[str] | None = None, run_scan: bool = True,
          answers: bool = False) -> tuple[Path, Path, list[Finding]]:
    """Write the bundle folder and its zip under `out`; returns (folder, zip, findings).
    With findings the zip is not written. answers: also run the scan by what the code
    computes (answer_scan.py, about a minute)."""
    folder = out / BUNDLE_NAME
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    _copy_tree(ROOT / "hero_transformer", folder / "hero_transformer")
    grader = folder / "grader"
    (grader / "checks").mkdir(parents=True)
    for name in STUDENT_GRADER:
        (grader / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / "grader" / name, grader / name)
    edition = grader / "edition.py"
    edition.write_text(edition.read_text(encoding="utf-8").replace('EDITION = "course"', 'EDITION = "student"'),
                       encoding="utf-8")
    _copy_tree(ROOT / "grader" / "run", grader / "run")
    for path in sorted((ROOT / "grader" / "checks").glob("*.py")):
        if not catalogue.CHAPTER_PACKAGE.fullmatch(path.stem):
            shutil.copy2(path, grader / "checks" / path.name)
    for package in _check_packages(chapters):
        _copy_check_package(package, grader / "checks" / package.name)
    # What the hidden checks left out are worth, so a student's report can say it.
    counts = {number: entry for number, entry in catalogue.hidden_counts().items()
              if not chapters or number in chapters}
    (grader / "checks" / catalogue.HIDDEN_COUNTS.name).write_text(json.dumps(counts, indent=1) + "\n",
                                                                   encoding="utf-8")
    # Which tasks each task's checks build on, read from the reference here: the bundle has
    # none to read, and its check needs it to say that a check waits on a part.
    released = {t.name for c in catalogue.chapters() if not chapters or c.number in chapters for t in c.tasks}
    graph = {task: [part for part in parts if part in released]
             for task, parts in dependencies.task_graph().items() if task in released}
    (grader / "checks" / dependencies.TASK_GRAPH.name).write_text(json.dumps(graph, indent=1) + "\n",
                                                                   encoding="utf-8")
    # The public checks by lesson and task, so that pytest (and an editor's test panel)
    # lists them without importing the checks, and so torch, on every collection.
    from grader.pytest_plugin import PUBLIC_CHECKS, public_checks

    (grader / "checks" / PUBLIC_CHECKS.name).write_text(json.dumps(public_checks(chapters), indent=1) + "\n",
                                                         encoding="utf-8")
    lessons = folder / "assignments"
    lessons.mkdir()
    for chapter in _chapter_folders(chapters):
        (lessons / chapter.name).mkdir()
        shutil.copy2(chapter / "README.md", lessons / chapter.name / "README.md")
        if (chapter / "figures").is_dir():
            _copy_tree(chapter / "figures", lessons / chapter.name / "figures")
    for path in sorted(p for p in TEMPLATE.rglob("*") if p.is_file() and p != ALLOW_LIST):
        target = folder / path.relative_to(TEMPLATE)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    opened = ", ".join(c.name for c in _chapter_folders(chapters))
    readme = folder / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8").replace("{{CHAPTERS}}", opened), encoding="utf-8")
    findings = scan(folder) if run_scan else []
    if answers:
        findings += answer_findings(folder, chapters)
    archive = out / f"{BUNDLE_NAME}.zip"
    if archive.exists():
        archive.unlink()
    if not blocking(findings):
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as handle:
            for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                handle.write(path, Path(BUNDLE_NAME) / path.relative_to(folder))
    return folder, archive, findings


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader release", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="release", help="folder to write the bundle and its zip into")
    parser.add_argument("--chapters", help="only the chapters opened so far, e.g. 00,01,05 (default: all)")
    parser.add_argument("--scan", metavar="FOLDER", help="only scan an existing folder for leaks")
    args = parser.parse_args(argv)
    if args.scan:
        findings = scan(Path(args.scan))
        for finding in findings:
            print(finding)
        print(f"{len(blocking(findings))} blocking finding(s) in {args.scan}, {len(findings) - len(blocking(findings))}"
              f" allowed by {ALLOW_LIST.relative_to(ROOT)}")
        return 1 if blocking(findings) else 0
    try:
        chapters = catalogue.parse_chapters(args.chapters)
    except ValueError as unknown:
        raise SystemExit(f"error: {unknown}") from None
    from grader.generate.facts import stale

    if out_of_date := stale():
        raise SystemExit("error: the public checks' facts are out of date (" + ", ".join(
            str(path.relative_to(ROOT)) for path in out_of_date) + "): run `make student` first")
    folder, archive, findings = build(Path(args.out), chapters, answers=True)
    # Allowed places are printed every time, so the list never turns into silence.
    for finding in sorted(findings, key=lambda f: not f.allowed):
        print(finding)
    if not chapters:
        for entry in stale_allowances(findings):
            print(f"{ALLOW_LIST.relative_to(ROOT)}: '{entry}' allows nothing now: delete it")
    refused = blocking(findings)
    if refused:
        print(f"the release is refused and no zip written: {len(refused)} place(s) in {folder} give an answer "
              f"away (fix them; a fact the lesson itself publishes may be listed in "
              f"{ALLOW_LIST.relative_to(ROOT)} with why)")
        return 1
    files = sum(1 for p in folder.rglob("*") if p.is_file())
    print(f"wrote {folder} ({files} files) and {archive} ({archive.stat().st_size / 1e3:.0f} kB); the leak scan "
          f"found nothing beyond the {len(findings)} allowed place(s) above")
    return 0


if __name__ == "__main__":
    sys.exit(main())
