"""`make new-task CH=05 TASK=rms_norm [FUNC=rms_norm] [MODULE=model]`: a new task's skeleton.

    python -m grader.generate.new_task 05 rms_norm --function rms_norm --module model
    python -m grader.generate.new_task 05 rms_norm --function RMSNorm.forward

FUNC is a function, or a method of a new class (Class.method): then the class is
written, its __init__ outside the region (taking d_model, as the course's modules do),
the region the method's body, and the probes build the class for a [.., d] input and
call it (forward by calling the module).

Writes, each piece working from the start:
- a function (or a class and its method) with the task's solution region in
  solutions/hero_transformer/<module>.py, at the end of the chapter's part of the file
  where the file is divided by chapter (the region's place sets the task's order); its
  body is yours to write (until then it raises, so every check fails and `make
  task-check` says so);
- the task's folder, grader/checks/chNN_*/<task>/: __init__.py (the task, one public
  check comparing the function's output on fixed inputs with the reference's, and one
  named mistake), hidden.py (what the public check knows, the right output and the
  mistake's, computed from the reference when `make student` runs, and a hidden check on
  random inputs) and mutants.py (a mutant making the named mistake);
- a section naming the task at the end of the lesson;
then prints what is left to write. Nothing is overwritten: an existing task or file stops it.
The chapter finds the task by its folder; `make student` puts it in the chapter's order.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import textwrap
import zlib
from pathlib import Path

from grader import KIT_ROOT

IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")
METHOD = re.compile(r"(?P<cls>[A-Z][A-Za-z0-9]*)\.(?P<method>[a-z_][a-z0-9_]*)")
CHAPTER_PART = re.compile(r"^# -+ chapter (?P<number>\d\d)\b", re.M)


def _chapter_package(root: Path, number: str) -> Path:
    found = sorted((root / "grader" / "checks").glob(f"ch{number}_*/__init__.py"))
    if not found:
        raise SystemExit(f"there is no chapter {number}: its checks would live in grader/checks/ch{number}_<topic>/")
    return found[0].parent


def _lesson(root: Path, package: Path) -> Path:
    return root / "assignments" / package.name / "README.md"


SOLUTION = '''

def {function}(x: torch.Tensor) -> torch.Tensor:
    """{title}: say here what it takes and returns (shapes, dtypes) and the formula."""
    ### BEGIN SOLUTION {task}
    raise NotImplementedError("write the reference {function} of task {task} here")
    ### END SOLUTION
'''

SOLUTION_METHOD = '''

class {cls}(torch.nn.Module):
    """{title}: say here what the module holds and computes."""

    def __init__(self, d_model: int):
        super().__init__()
        # The parameters it holds, created here with their shapes and a fixed start (ones,
        # zeros): the probes build one for the student's code and one for the reference.
        self.d_model = d_model

    def {method}(self, x: torch.Tensor) -> torch.Tensor:
        """Say here what it takes and returns (shapes, dtypes) and the formula."""
        ### BEGIN SOLUTION {task}
        raise NotImplementedError("write the reference {function} of task {task} here")
        ### END SOLUTION
'''


def _example_input(task: str) -> str:
    """A fixed [1, 2, 3] input for the public check, written as a literal. Its numbers come
    from the task's name, so no two scaffolded tasks share an input (the facts are looked up
    by input: two checks with one input and different facts would clash)."""
    draw = random.Random(zlib.crc32(task.encode()))
    rows = [[draw.choice([-1, 1]) * draw.randint(1, 16) / 4 for _ in range(3)] for _ in range(2)]
    return repr([rows])


def _placed(text: str, addition: str, number: str) -> str:
    """The module's text with `addition` at the end of chapter `number`'s part (before the
    next chapter's heading comment), or at the end where the file has no such part."""
    parts = list(CHAPTER_PART.finditer(text))
    ours = [i for i, part in enumerate(parts) if part["number"] == number]
    if not ours or ours[-1] + 1 >= len(parts):
        return text.rstrip("\n") + "\n" + addition
    cut = parts[ours[-1] + 1].start()
    return text[:cut].rstrip("\n") + "\n" + addition + "\n\n" + text[cut:]

PUBLIC = '''"""{title}.

The public check compares {function}'s output on fixed inputs with what the kit computed
from the reference (grader/checks/facts.py), and names the mistake in {mistake_name}.
"""

from __future__ import annotations

import torch

from grader.checks._api import Task, check, diagnose, named
from grader.checks.facts import known_facts

TASKS = [
    Task("{task}", "{module}", "{function}", "{title}"),
]

# Each mistake a student makes, by name: the sentence the student reads. What each one
# outputs on the public inputs is computed in hidden.py beside this file, under the same name.
MISTAKES = {{
    "{mistake}": "{mistake_text}",
}}


def probe_{task}(ns, x):
    return {{"y": ns.{call}(x.clone())}}


@check("example", 2, "{function} of a fixed [1, 2, 3] input matches the reference",
       probe=probe_{task},
       inputs=lambda g: {{"x": torch.tensor({example}, dtype=torch.float64)}})
def example(out, inputs, expected):
    facts = known_facts(inputs)
    return diagnose(out["y"], facts["right"], named(MISTAKES, facts["mistakes"]), "{function}(x)")
'''

HIDDEN = '''"""Task {task}'s hidden checks, and what its public check knows (the release leaves this file out)."""

from __future__ import annotations

import torch

from grader.checks._api import check, compare
from grader.checks.{package}.{task} import example, probe_{task}
from grader.checks.facts import facts_for


def {mistake}(x):
    """The named mistake, written out: what a student's {function} gives when making it."""
    {mistake_code}


@facts_for(example)
def example_facts(ref, inputs):
    x = inputs["x"]
    return {{"right": ref.{call}(x), "mistakes": {{"{mistake}": {mistake}(x)}}}}


@check("matches_reference", 2, "random [B, T, d] inputs match the reference",
       probe=probe_{task}, inputs=lambda g: {{"x": torch.randn(2, 3, 5, generator=g, dtype=torch.float64)}},
       expect=lambda ref, inputs: _reference(ref, inputs["x"]), hidden=True)
def matches_reference(out, inputs, expected):
    return compare(out["y"], expected, "{function}(x)", atol=1e-9, rtol=1e-9)


def _reference(ref, x):
    return ref.{call}(x)
'''

MUTANTS = '''"""Task {task}: the mistakes the lesson warns about, made in its region (mutants), and right
ways to write it (variants). grader/mutants.py says how an entry is written."""

from grader.checks.{package}.{task} import example
from grader.mutants import mutant, variant

MUTANTS = [
    mutant("{task}_{mistake}", "{task}", """
        {mistake_code}
    """, example, "{keyword}", "{mistake_text}"),
]

VARIANTS = [
]

# Phrases of the lesson's common mistakes, each with the mutants that make it.
LESSON = {{
    "{mistake_text}": ("{task}_{mistake}",),
}}
'''

LESSON = '''

## {title} (`{task}`)

Write `{function}` in `hero_transformer/{module}.py`: say what it takes, what it returns
and why, in the lesson's words.

### Common mistakes

- {mistake_text}.
'''


def scaffold(root: Path, number: str, task: str, function: str, module: str, title: str,
             mistake: str = "doubled", mistake_text: str = "the output is doubled",
             mistake_code: str = "return 2 * x", keyword: str = "doubled") -> list[str]:
    """Write the skeleton; return what is left to write, as sentences."""
    number = number.removeprefix("ch").zfill(2)
    for name, value in (("TASK", task), ("MODULE", module)):
        if not IDENTIFIER.fullmatch(value):
            raise SystemExit(f"{name}={value!r} is not a Python name in lower case (letters, digits, _)")
    method = METHOD.fullmatch(function)
    if not (IDENTIFIER.fullmatch(function) or method):
        raise SystemExit(f"FUNC={function!r} is neither a function's name in lower case (rms_norm) nor a method "
                         f"of a new class, Class.method (RMSNorm.forward)")
    package = _chapter_package(root, number)
    solution = root / "solutions" / "hero_transformer" / f"{module}.py"
    folder = package / task
    lesson = _lesson(root, package)
    if not solution.is_file():
        raise SystemExit(f"solutions/hero_transformer/{module}.py does not exist: MODULE names a file of the package")
    if f"BEGIN SOLUTION {task}\n" in solution.read_text(encoding="utf-8") or folder.exists():
        raise SystemExit(f"task {task} exists already (its region, or {folder.relative_to(root)}/): nothing was "
                         f"written")
    defined = rf"^class {method['cls']}\b" if method else rf"^def {function}\("
    if re.search(defined, solution.read_text(encoding="utf-8"), re.M):
        raise SystemExit(f"{module}.py already defines {method['cls'] if method else function}: choose another FUNC")
    if not lesson.is_file():
        raise SystemExit(f"chapter {number} has no lesson at {lesson.relative_to(root)}")
    if method:  # the module built for a [.., d] input, in float64, and the method called (forward: the module)
        built = f"{module}.{method['cls']}(x.shape[-1]).double()"
        call = built if method["method"] == "forward" else f"{built}.{method['method']}"
    else:
        call = f"{module}.{function}"
    words = dict(example=_example_input(task), number=number, task=task, function=function, module=module,
                 title=title, package=package.name, mistake=mistake, mistake_text=mistake_text, mistake_code=mistake_code, keyword=keyword,
                 mistake_name="MISTAKES", call=call, cls=method["cls"] if method else "",
                 method=method["method"] if method else "")
    text = solution.read_text(encoding="utf-8")
    solution.write_text(_placed(text, (SOLUTION_METHOD if method else SOLUTION).format(**words), number),
                        encoding="utf-8")
    folder.mkdir()
    (folder / "__init__.py").write_text(PUBLIC.format(**words), encoding="utf-8")
    (folder / "hidden.py").write_text(HIDDEN.format(**words), encoding="utf-8")
    (folder / "mutants.py").write_text(MUTANTS.format(**words), encoding="utf-8")
    with lesson.open("a", encoding="utf-8") as handle:
        handle.write(LESSON.format(**words))
    _name_in_the_table(root, package.name, function)
    where = f"grader/checks/{package.name}/{task}/"
    return [f"write {function}'s body between the region's markers in solutions/hero_transformer/{module}.py "
            f"(its docstring becomes the student's stub)" + (f", and {method['cls']}.__init__ above it (outside the "
                                                            f"region: the student receives it as written)"
                                                            if method else ""),
            f"write the checks in {where}__init__.py: each mistake by name in MISTAKES, its output by the same "
            f"name in hidden.py beside it (which holds the hidden check too; mutants.py proves the checks)",
            f"write the lesson's section at the end of assignments/{package.name}/README.md (move it where it "
            f"belongs; keep the task id `{task}` and {function} in its words)",
            f"`make student`, then `make task-check TASK={task}` until every step holds"]


def _name_in_the_table(root: Path, package: str, function: str) -> None:
    """The task's function named in its chapter's row of assignments/README.md ("what you
    implement"), before the row's closing file name: tests/test_docs_totals.py holds every
    task to its row."""
    table = root / "assignments" / "README.md"
    lines = table.read_text(encoding="utf-8").splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith(f"| [{package}]") and line.rstrip().endswith("|"):
            body = line.rstrip()[:-1].rstrip()
            closing = re.search(r" \(`\w+\.py`(?:, `\w+\.py`)*\)$", body)
            cut = closing.start() if closing else len(body)
            lines[i] = f"{body[:cut]}, `{function}`{body[cut:]} |\n"
            table.write_text("".join(lines), encoding="utf-8")
            return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.generate.new_task", description=__doc__.split("\n\n")[0])
    parser.add_argument("chapter", help="the chapter's number, 05")
    parser.add_argument("task", help="the task's id, which is its solution region's id: rms_norm")
    parser.add_argument("--function", help="the function the student fills in (default: the task id)")
    parser.add_argument("--module", default="model", help="the package's file it goes in (default: model)")
    parser.add_argument("--title", help="a few words on what it computes")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    left = scaffold(KIT_ROOT, args.chapter, args.task, args.function or args.task, args.module,
                    args.title or args.task.replace("_", " "))
    print(f"wrote task {args.task}'s skeleton. Left to write:")
    for i, step in enumerate(left, 1):
        print(textwrap.fill(f"{i}. {step}", 100, subsequent_indent="   "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
