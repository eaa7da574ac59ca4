"""The grader's own accuracy: known-wrong implementations (mutants) that must lose
points with the right diagnosis, and known-right ones (variants) that must not.

Each entry rewrites one solution region of the reference (solutions/hero_transformer/,
between `### BEGIN SOLUTION <task>` and `### END SOLUTION`). A mutant is written as a
patch of that region, the changed lines only, so it reads as the mistake it is:

    mutant("block_no_residual", "block", patch('''
        - hidden = hidden + self.residual_dropout(attended)
        + hidden = self.residual_dropout(attended)
    '''), expect, keyword, mistake)

`expect` is the handle of the check the mutant must fail (or a tuple of handles, of
which one must fail), imported from the task folder that declares it:
`from grader.checks.ch05_block.block import formula`.

A patch is a list of hunks:

- `- line` removes a line of the region. It must match, with the surrounding whitespace
  stripped, exactly one line of the region; consecutive `-` lines match consecutive
  lines (blank lines of the region in between are skipped, and removed with them).
- `+ line`s after them replace the removed lines, at the first removed line's
  indentation; whatever indentation follows the `+ ` is kept on top of it
  (`+     line` is one level deeper), and a bare `+` adds a blank line.
- `  line` (two spaces) is context: it must match too and is kept. Right before `-`
  lines it says which of two equal places is meant; followed by `+` lines only, they
  are inserted after it, at its indentation; after `+` lines that have nothing before
  them (the patch's first lines, or the first after a blank line), they are inserted
  before it, at its indentation.
- A blank line ends a hunk. Each hunk is matched in the reference's region as it is,
  so hunks may come in any order, but must not overlap.

A patch that does not fit (a `-` or context line that matches no line, or more than
one place) raises PatchError naming the mutant and the line. A mutant that is a
different short implementation, or a rewrite that shares little with the reference,
is written as a whole body instead, a plain string with the region's full text, as is
every variant (a correct alternative). Either way, `entry.region()` is the full text
of the region the entry writes, and `entry.apply(sources)` the reference's sources
with it in place. Entries live in each task's folder, in
grader/checks/chNN_*/<task>/mutants.py (MUTANTS, VARIANTS, and LESSON: each phrase of the
chapter lesson's "common mistakes" that names a mutant, which must appear in the lesson
word for word); `make mutants` (python -m grader.qa.catch_table) runs them all and
prints the catch table, and `make task-check TASK=…` one task's.
"""

from __future__ import annotations

import importlib
import json
import textwrap
from dataclasses import dataclass
from functools import lru_cache

from grader import KIT_ROOT
from grader.regions import BEGIN, END, find_regions, package_sources

REFERENCE_PACKAGE = KIT_ROOT / "solutions" / "hero_transformer"


class PatchError(ValueError):
    """A patch that cannot be read, or does not fit the region it patches."""


@dataclass(frozen=True)
class Hunk:
    before: tuple[str, ...]  # context lines before the change
    removed: tuple[str, ...]
    added: tuple[str, ...]  # each with its indentation relative to where it goes
    after: tuple[str, ...] = ()  # context after lines added with nothing before them

    def anchor(self) -> tuple[str, ...]:
        """The lines that must match, one after the other, exactly once in the region."""
        return self.before + self.removed + self.after

    def marked(self) -> list[str]:
        return ([f"  {t}" for t in self.before] + [f"- {t}" for t in self.removed]
                + [f"+ {t}".rstrip() for t in self.added] + [f"  {t}" for t in self.after])


@dataclass(frozen=True)
class Patch:
    """The changed lines of a region (see the module's docstring for the form)."""
    text: str  # as written, dedented: what the catch table shows

    def hunks(self, where: str = "the patch") -> tuple[Hunk, ...]:
        return _hunks(self.text, where)


def patch(text: str) -> Patch:
    """A Patch from its text: `- old`, `+ new` and `  context` lines (see the module's docstring)."""
    return Patch(textwrap.dedent(text).strip("\n"))


def _hunks(text: str, where: str) -> tuple[Hunk, ...]:
    hunks = []
    before, removed, added, after = [], [], [], []

    def close():
        if not (removed or added):
            if before or after:
                raise PatchError(f"{where}: context lines that change nothing: {before + after}")
            return
        if not (before or removed or after):
            raise PatchError(f"{where}: {'+ ' + added[0]!r} and the lines added with it need a removed line "
                             f"('- ...') or a context line ('  ...') next to them, to say where they go")
        hunks.append(Hunk(tuple(before), tuple(removed), tuple(added), tuple(after)))
        for part in (before, removed, added, after):
            part.clear()

    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            close()  # a blank line ends a hunk
        elif raw == "+" or raw.startswith("+ "):
            if after:
                close()
            added.append(raw[2:].rstrip())
        elif raw.startswith("- "):
            if added or after:
                close()
            removed.append(raw[2:].strip())
        elif raw.startswith("  "):
            if after or added and not (before or removed):
                after.append(raw.strip())  # lines added with nothing before them go before this context
            else:
                if added or removed:
                    close()
                before.append(raw.strip())
        else:
            raise PatchError(f"{where}: line {number} of the patch, {raw!r}, begins with neither '- ' (a line "
                             f"removed), '+ ' (a line added) nor two spaces (a context line)")
    close()
    if not hunks:
        raise PatchError(f"{where}: the patch changes nothing")
    return tuple(hunks)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def apply_patch(region: str, change: Patch, where: str = "the patch") -> str:
    """The region's text (dedented, no markers) with the patch applied; `where` names the
    patch in errors (e.g. "mutant 'block_no_residual' (region block)")."""
    lines = textwrap.dedent(region).strip("\n").splitlines()
    solid = [i for i, line in enumerate(lines) if line.strip()]  # blank lines are skipped when matching
    stripped = [lines[i].strip() for i in solid]
    spans = []
    for hunk in change.hunks(where):
        anchor = hunk.anchor()
        starts = [s for s in range(len(stripped) - len(anchor) + 1) if tuple(stripped[s:s + len(anchor)]) == anchor]
        if len(starts) != 1:
            raise PatchError(_misfit(where, hunk, stripped, starts))
        first = starts[0] + len(hunk.before)  # the first removed line (or the first after one), among the solid
        if hunk.removed:  # replaced, at the first removed line's indentation
            begin, end = solid[first], solid[first + len(hunk.removed) - 1] + 1
            base = _indent(lines[begin])
        elif hunk.before:  # inserted after the last context line, at its indentation
            begin = end = solid[first - 1] + 1
            base = _indent(lines[begin - 1])
        else:  # inserted before the first context line, at its indentation
            begin = end = solid[first]
            base = _indent(lines[begin])
        spans.append((begin, end, [base + text if text else "" for text in hunk.added], hunk))
    spans.sort(key=lambda s: s[:2])
    for (_, end, _, one), (begin, _, _, other) in zip(spans, spans[1:]):
        if begin < end:
            raise PatchError(f"{where}: two hunks change the same lines: {one.marked()} and {other.marked()}")
    out, at = [], 0
    for begin, end, added, _ in spans:
        out += lines[at:begin] + added
        at = end
    return "\n".join(out + lines[at:]) + "\n"


def _misfit(where: str, hunk: Hunk, stripped: list[str], starts: list[int]) -> str:
    marked = [m for m in hunk.marked() if not m.startswith("+")]
    if starts:
        return (f"{where}: {' / '.join(repr(m) for m in marked)} matches {len(starts)} places in the region; "
                f"add the line before it as context ('  ...') to say which")
    for mark, text in zip(marked, hunk.anchor()):
        if text not in stripped:
            return f"{where}: {mark!r} matches no line of the region"
    return f"{where}: the lines {marked} are each in the region, but not one after the other"


@lru_cache(maxsize=1)
def _kit_reference() -> tuple[tuple[str, str], ...]:
    return tuple(package_sources(REFERENCE_PACKAGE).items())


def region_of(sources: dict[str, str], task: str) -> tuple[str, str]:
    """(file, the region's text, dedented and without its markers) of `task` in `sources`."""
    for rel, source in sources.items():
        for region in find_regions(source, rel):
            if region.task == task:
                return rel, textwrap.dedent(region.body(source)).strip("\n") + "\n"
    raise KeyError(f"no region '{task}' in these sources")


class Entry:
    """What mutants and variants share: the region they write."""
    name: str
    task: str
    change: str | Patch

    @property
    def is_patch(self) -> bool:
        return isinstance(self.change, Patch)

    def region(self, reference: dict[str, str] | None = None) -> str:
        """The full text of the region this entry writes (dedented, without the markers):
        its body, or the reference's region with its patch applied. `reference` is the
        reference package's sources ({"model.py": text, ...}); by default the kit's."""
        if not self.is_patch:
            return textwrap.dedent(self.change).strip("\n") + "\n"
        sources = reference if reference is not None else dict(_kit_reference())
        return apply_patch(region_of(sources, self.task)[1], self.change,
                           f"{type(self).__name__.lower()} '{self.name}' (region {self.task})")

    def apply(self, reference: dict[str, str]) -> dict[str, str]:
        """The reference's sources with this entry's region in place of the reference's."""
        rel, _ = region_of(reference, self.task)
        changed = dict(reference)
        changed[rel] = replace_region(reference[rel], self.task, self.region(reference))
        return changed

    @property
    def shown(self) -> str:
        """What the catch table shows: the patch, or the whole body."""
        return self.change.text if self.is_patch else self.region().rstrip("\n")


@dataclass(frozen=True)
class Mutant(Entry):
    name: str
    task: str
    change: str | Patch  # a patch of the reference's region, or the region's whole body
    expect: tuple[str, ...]  # the full names of the checks of which at least one must fail
    keyword: str  # must appear (case-insensitive) in a failing check's diagnosis
    mistake: str = ""  # the mistake in a few words, for the table


@dataclass(frozen=True)
class Variant(Entry):
    name: str
    task: str
    change: str  # the region's whole body
    note: str = ""


def mutant(name, task, change, expect, keyword, mistake=""):
    """A mutant; `change` is patch("...") or a whole body; `expect` the check that must fail,
    or a tuple of checks of which one must, each given by its handle (imported from the
    module that declares it, grader.checks._api.CheckHandle), so that a check renamed or
    removed fails the mutant's import instead of leaving it expecting a name no check has."""
    if isinstance(change, Patch):
        change.hunks(f"mutant '{name}'")  # a patch that cannot be read fails here, naming the mutant
    handles = expect if isinstance(expect, (tuple, list)) else (expect,)
    if any(isinstance(handle, str) for handle in handles):
        raise TypeError(f"mutant '{name}': expect the checks' handles, imported from where they are declared, "
                        f"not their names")
    return Mutant(name, task, change, tuple(handle.name for handle in handles), keyword, mistake)


def variant(name, task, body, note=""):
    return Variant(name, task, body, note)


def replace_region(source: str, task: str, body: str) -> str:
    """source with the region of `task` replaced by `body` (indented to match)."""
    lines, out, inside, found = source.splitlines(keepends=True), [], False, False
    for line in lines:
        begin = BEGIN.match(line)
        if begin and begin["task"] == task:
            indent = begin["indent"]
            out.append(textwrap.indent(textwrap.dedent(body).strip("\n") + "\n", indent))
            inside = found = True
        elif inside:
            inside = not END.match(line)
        else:
            out.append(line)
    if not found:
        raise KeyError(f"no region '{task}' in this source")
    return "".join(out)


def apply(sources: dict[str, str], module: str, task: str, body: str) -> dict[str, str]:
    """sources with the region of `task` in `module` replaced by a whole body (for bodies
    written on the spot; a catalogue entry's is entry.apply(sources))."""
    changed = dict(sources)
    key = f"{module}.py"
    changed[key] = replace_region(sources[key], task, body)
    return changed


def _entry_modules():
    """Each task's mutants module (grader/checks/chNN_*/<task>/mutants.py), by chapter and
    in the chapter's task order (its tasks.json), with the chapter's number. Found by their
    files: the task folders import this module, and it imports none of the checks' own."""
    for chapter in sorted((KIT_ROOT / "grader" / "checks").glob("ch[0-9][0-9]_*")):
        try:
            order = json.loads((chapter / "tasks.json").read_text(encoding="utf-8"))["tasks"]
        except (OSError, ValueError, KeyError):
            order = []
        place = {task: i for i, task in enumerate(order)}
        for path in sorted(chapter.glob("*/mutants.py"), key=lambda p: (place.get(p.parent.name, len(order)), p)):
            yield chapter.name[2:4], importlib.import_module(f"grader.checks.{chapter.name}.{path.parent.name}.mutants")


def catalogue() -> tuple[list[Mutant], list[Variant]]:
    mutants, variants = [], []
    for _, module in _entry_modules():
        mutants += getattr(module, "MUTANTS", [])
        variants += getattr(module, "VARIANTS", [])
    return mutants, variants


def lesson_mistakes() -> dict[str, dict[str, tuple[str, ...]]]:
    """{chapter number: {a phrase quoted from the lesson's common mistakes: the mutants that make it}}.
    A phrase that names the mistakes of two tasks is written in each task's LESSON with its own."""
    found: dict[str, dict[str, tuple[str, ...]]] = {}
    for number, module in _entry_modules():
        phrases = found.setdefault(number, {})
        for phrase, names in getattr(module, "LESSON", {}).items():
            phrases[phrase] = phrases.get(phrase, ()) + tuple(names)
    return found
