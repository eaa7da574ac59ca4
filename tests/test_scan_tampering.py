"""The tamper scan (grader/run/scan_tampering.py): every file of an upload is read for code
that reaches into the grader (its modules, the import machinery that holds certified code,
frames, gc, ctypes, /proc, a process of its own), and a graded run then scores every
check 'forbidden', naming the file and line. Prose and ordinary code that only mention
such names pass, a line the scan cannot parse costs nothing, and the reference and the
student copy pass whole.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from grader.run.engine import grade
from grader.run.reference import Reference
from grader.run.scan_tampering import scan_file, scan_submission
from grader.run.submission import Submission

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "hero_transformer"


def test_prose_that_mentions_the_grader_is_not_tampering():
    sources = dict(Reference().sources)
    sources["tokenizer.py"] += (
        '\n\ndef _note():\n    """My own helper; the autograder never calls it."""\n'
        '    raise ValueError("the grader checks this")\n')
    assert scan_submission(sources) == []
    sources["tokenizer.py"] += '\nTARGET = "grader.checks.ch05_block.gelu"\n'
    assert scan_submission(sources)


def test_an_absurd_line_of_source_costs_nothing_else():
    sources = dict(Reference().sources)
    sources["junk.py"] = "x = a" + ".b" * 100_000 + "\n"
    assert scan_submission(sources) == []  # unparsable here; the worker reports it if it matters


@pytest.mark.parametrize("line", [
    "import sys\nsys.modules['grader.checks.ch05_block.gelu'].probe_gelu = None",
    "from grader.run.inside import wire",
    "import gc\nobjects = gc.get_objects()",
    "import inspect",
    "import ctypes",
    "frame = __import__('sys')._getframe(1)",
    "code = gelu.__code__",
    "path = '/proc/1/mem'",
    "import os\nos.kill(1, 9)",
    "import subprocess",
])
def test_reaching_into_the_grader_scores_forbidden_everywhere(reference, sandbox, line):
    sources = dict(reference.sources)
    sources["tokenizer.py"] += "\n" + line + "\n"
    report = grade(Submission("tamper", sources), chapters=["05"], runner=sandbox, seed=1)
    assert {r.status for r in report.results} == {"forbidden"}
    assert "tokenizer.py line" in report.results[0].diagnosis


# ------------------------------------------------------- the import machinery, a process


@pytest.mark.parametrize("code", [
    "import sys\nfor finder in sys.meta_path:\n    print(finder.sources)",
    "import sys\nsys.path_hooks.insert(0, object)",
    "import sys\nsys.path_importer_cache.clear()",
    "print(__loader__.sources)",
    "print(__spec__.loader)",
    "import torch\nprint(torch.__spec__)",
    "source = getattr(module, '__loader__')",
    "from importlib.util import spec_from_loader",
    "import importlib.machinery",
    "from importlib import abc",
    "import importlib._bootstrap",
    "from importlib.util import find_spec\nfind_spec('x').loader",
    "import linecache\nlinecache.getlines('certified/model.py')",
    "import pkgutil",
    "print(gelu.__code__.co_consts)",
    "import dis",
])
def test_tamper_scan_flags_the_import_machinery(code):
    assert scan_file(code), code


def test_tamper_scan_leaves_ordinary_code_and_prose_alone():
    ordinary = textwrap.dedent('''
        """Notes: the worker's sys.meta_path finders, __loader__ and __spec__ are the
        grader's business; importlib internals too. Prose never trips the scan."""
        import importlib.util
        import math
        from pathlib import Path

        import torch
        from torch import nn

        HERE = Path(__file__).resolve().parent


        def has_package(name):
            # sys.meta_path is mentioned in a comment only
            spec = importlib.util.find_spec(name)
            return spec is not None and spec.origin is not None


        class Head(nn.Module):
            """A docstring that says __spec__ and path_hooks."""

            def __init__(self, d):
                super().__init__()
                self.proj = nn.Linear(d, d)
                self.loader_name = "train"

            def forward(self, x):
                return torch.softmax(self.proj(x) / math.sqrt(x.shape[-1]), dim=-1)
    ''')
    assert scan_file(ordinary) == []


@pytest.mark.parametrize("root", [SOLUTIONS, ROOT / "hero_transformer"], ids=["reference", "student copy"])
def test_tamper_scan_passes_the_course_package(root):
    sources = {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*.py")
               if "__pycache__" not in p.parts}
    assert sources and scan_submission(sources) == []


@pytest.mark.parametrize("code", [
    "import os\nos.posix_spawn('/bin/sh', ['sh'], {})",
    "import os\nos.openpty()",
    "import pty",
    "from subprocess import run",
    "import os as o\no.execvp('sh', ['sh'])",
    "from concurrent.futures import ProcessPoolExecutor",
])
def test_the_tamper_scan_names_a_process_call(code):
    hits = scan_file(code)
    assert hits and all("starts a process" in what for _, what in hits), hits


def test_the_tamper_scan_leaves_threads_alone():
    assert scan_file("from concurrent.futures import ThreadPoolExecutor\nimport threading\n") == []
