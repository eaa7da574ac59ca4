"""Unit tests of grader.regions: finding, validating and stripping solution regions."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from grader.regions import (
    BEGIN,
    END,
    Region,
    RegionError,
    all_regions,
    find_regions,
    package_sources,
    strip,
)

REFERENCE_PACKAGE = Path(__file__).resolve().parent.parent / "solutions" / "hero_transformer"


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# Regions followed by more code in the same function.
MID_FUNCTION = src(
    '''
    import math


    def helper(x):
        y = x + 1
        ### BEGIN SOLUTION first
        y = y * 2
        y = y - 3
        ### END SOLUTION
        return y


    class Thing:
        """A class with a method holding a region."""

        def __init__(self, n):
            self.n = n
            ### BEGIN SOLUTION thing_init
            self.squares = [i * i for i in range(n)]
            ### END SOLUTION
            self.ready = True

        def outer(self):
            def inner(z):
                ### BEGIN SOLUTION ch05.inner
                z = math.sqrt(z)
                ### END SOLUTION
                return z

            return inner(self.n)
    '''
)

# The usual shape: the region is the whole body, END is the function's last line.
TRAILING = src(
    """
    def gelu(x):
        ### BEGIN SOLUTION gelu
        return x * 0.5
        ### END SOLUTION


    class A:
        def method(self):
            ### BEGIN SOLUTION a_method
            return 1
            ### END SOLUTION

        def other(self):
            return 2
    """
)


def _line(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if line.strip() == text)


# ------------------------------------------------------------- find_regions


def test_find_regions_names_task_qualname_and_lines():
    regions = find_regions(MID_FUNCTION, "pkg/mod.py")
    assert [r.task for r in regions] == ["first", "thing_init", "ch05.inner"]
    assert [r.qualname for r in regions] == ["helper", "Thing.__init__", "Thing.outer.inner"]
    assert all(r.path == "pkg/mod.py" for r in regions)
    first = regions[0]
    assert first == Region(
        "first",
        "pkg/mod.py",
        "helper",
        _line(MID_FUNCTION, "### BEGIN SOLUTION first"),
        _line(MID_FUNCTION, "### BEGIN SOLUTION first") + 3,
    )
    lines = MID_FUNCTION.splitlines()
    for r in regions:
        assert BEGIN.match(lines[r.begin - 1])["task"] == r.task
        assert END.match(lines[r.end - 1])


def test_find_regions_when_end_is_the_functions_last_line():
    """The common case: END SOLUTION closes the function body. The function's ast
    end_lineno is the last *statement*, which is above the END comment."""
    regions = find_regions(TRAILING, "t.py")
    assert [(r.task, r.qualname) for r in regions] == [("gelu", "gelu"), ("a_method", "A.method")]


def test_find_regions_without_regions():
    assert find_regions("def f():\n    return 1\n") == []
    assert find_regions("") == []


def test_marker_regex_details():
    assert BEGIN.match("    ### BEGIN SOLUTION task_1  ")["task"] == "task_1"
    assert BEGIN.match("\t### BEGIN SOLUTION ch05.block")["indent"] == "\t"
    assert BEGIN.match("### BEGIN SOLUTION 5task") is None
    assert BEGIN.match("# BEGIN SOLUTION task") is None
    assert END.match("        ### END SOLUTION\t")
    assert not END.match("### END SOLUTION now")


# ------------------------------------------------------------------ errors


def test_unclosed_region_is_an_error():
    bad = src(
        """
        def f():
            x = 1
            ### BEGIN SOLUTION open_task
            return x
        """
    )
    with pytest.raises(RegionError, match=r"f\.py:3: region 'open_task' is never closed"):
        find_regions(bad, "f.py")


def test_nested_regions_are_an_error():
    bad = src(
        """
        def f():
            ### BEGIN SOLUTION outer
            x = 1
            ### BEGIN SOLUTION inner
            x = 2
            ### END SOLUTION
            ### END SOLUTION
            return x
        """
    )
    with pytest.raises(RegionError, match=r"f\.py:4: BEGIN SOLUTION inside the region opened at line 2"):
        find_regions(bad, "f.py")


def test_end_without_begin_is_an_error():
    bad = "def f():\n    x = 1\n    ### END SOLUTION\n    return x\n"
    with pytest.raises(RegionError, match=r"f\.py:3: END SOLUTION without a BEGIN"):
        find_regions(bad, "f.py")


@pytest.mark.parametrize("marker", ["### BEGIN SOLUTION", "### BEGIN SOLUTION   ", "### BEGIN SOLUTION 9lives"])
def test_begin_without_a_task_id_is_an_error(marker):
    bad = f"def f():\n    {marker}\n    x = 1\n    ### END SOLUTION\n    return x\n"
    with pytest.raises(RegionError, match=r"f\.py:2: write the marker as .### BEGIN SOLUTION <task_id>."):
        find_regions(bad, "f.py")


def test_region_at_module_level_is_an_error():
    bad = "x = 1\n### BEGIN SOLUTION top\ny = 2\n### END SOLUTION\nz = 3\n"
    with pytest.raises(RegionError, match=r"m\.py:2: region 'top' is not inside a function"):
        find_regions(bad, "m.py")


def test_region_in_a_class_body_is_an_error():
    bad = src(
        """
        class C:
            ### BEGIN SOLUTION attr
            size = 3
            ### END SOLUTION
            other = 4

            def method(self):
                return self.size
        """
    )
    with pytest.raises(RegionError, match="region 'attr' is not inside a function"):
        find_regions(bad, "c.py")


# -------------------------------------------------------------------- strip


def test_strip_all_replaces_regions_by_not_implemented_at_the_same_indent():
    out = strip(MID_FUNCTION)
    assert "SOLUTION" not in out
    assert '    raise NotImplementedError("first")\n' in out
    assert '        raise NotImplementedError("thing_init")\n' in out
    assert '            raise NotImplementedError("ch05.inner")\n' in out
    for dropped in ("y = y * 2", "y = y - 3", "self.squares", "math.sqrt"):
        assert dropped not in out
    for kept in ("y = x + 1", "return y", "self.ready = True", "self.n = n", "return inner(self.n)"):
        assert kept in out
    ast.parse(out)
    removed_lines = sum(r.end - r.begin for r in find_regions(MID_FUNCTION))
    assert len(out.splitlines()) == len(MID_FUNCTION.splitlines()) - removed_lines


def test_strip_with_a_subset_keeps_other_regions_code_and_drops_their_markers():
    out = strip(MID_FUNCTION, {"thing_init"})
    assert '        raise NotImplementedError("thing_init")\n' in out
    assert "self.squares" not in out
    assert "y = y * 2\n" in out and "y = y - 3\n" in out and "z = math.sqrt(z)\n" in out
    assert "BEGIN SOLUTION" not in out and "END SOLUTION" not in out
    assert 'NotImplementedError("first")' not in out
    # the kept regions' code is exactly the reference minus the marker lines
    namespace: dict = {}
    exec(compile(out, "<stripped>", "exec"), namespace)
    assert namespace["helper"](5) == 9
    with pytest.raises(NotImplementedError, match="thing_init"):
        namespace["Thing"](3)


def test_strip_with_no_tasks_only_removes_markers():
    out = strip(MID_FUNCTION, set())
    expected = "".join(
        line for line in MID_FUNCTION.splitlines(keepends=True) if not (BEGIN.match(line) or END.match(line))
    )
    assert out == expected


def test_strip_of_trailing_regions_runs_and_raises():
    out = strip(TRAILING)
    namespace: dict = {}
    exec(compile(out, "<stripped>", "exec"), namespace)
    with pytest.raises(NotImplementedError) as info:
        namespace["gelu"](1.0)
    assert info.value.args == ("gelu",)
    with pytest.raises(NotImplementedError, match="a_method"):
        namespace["A"]().method()
    assert namespace["A"]().other() == 2


def test_strip_keeps_tab_indentation_and_source_without_regions():
    tabbed = "def f():\n\t### BEGIN SOLUTION t\n\treturn 1\n\t### END SOLUTION\n\treturn 0\n"
    assert strip(tabbed) == 'def f():\n\traise NotImplementedError("t")\n\treturn 0\n'
    plain = "def f():\n    return 1\n"
    assert strip(plain) == plain


def test_stripped_reference_files_compile_with_one_stub_per_region():
    for rel, source in package_sources(REFERENCE_PACKAGE).items():
        begins = sum(1 for line in source.splitlines() if BEGIN.match(line))
        out = strip(source)
        compile(out, rel, "exec")
        assert out.count("raise NotImplementedError(") == begins, rel


# --------------------------------------------- package_sources / all_regions


def _write_package(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_package_sources_sorted_relative_and_without_pycache(tmp_path):
    root = _write_package(
        tmp_path / "pkg",
        {
            "b.py": "B = 1\n",
            "a.py": "A = 1\n",
            "sub/c.py": "C = 1\n",
            "__pycache__/a.py": "junk\n",
            "notes.txt": "not python\n",
        },
    )
    sources = package_sources(root)
    assert list(sources) == sorted(sources)
    assert set(sources) == {"a.py", "b.py", "sub/c.py"}
    assert sources["sub/c.py"] == "C = 1\n"


def test_all_regions_collects_every_file(tmp_path):
    root = _write_package(tmp_path / "pkg", {"mod.py": MID_FUNCTION, "sub/other.py": "def g():\n    return 0\n"})
    regions = all_regions(root)
    assert set(regions) == {"first", "thing_init", "ch05.inner"}
    assert regions["thing_init"].path == "mod.py"
    assert regions["thing_init"].qualname == "Thing.__init__"


def test_all_regions_rejects_one_task_in_two_functions(tmp_path):
    twice = src(
        """
        def f():
            ### BEGIN SOLUTION same
            x = 1
            ### END SOLUTION
            return x


        def g():
            ### BEGIN SOLUTION same
            y = 2
            ### END SOLUTION
            return y
        """
    )
    root = _write_package(tmp_path / "pkg", {"m.py": twice})
    with pytest.raises(RegionError, match="task 'same' appears in m.py:f and m.py:g"):
        all_regions(root)


def test_all_regions_propagates_file_errors_with_the_path(tmp_path):
    root = _write_package(tmp_path / "pkg", {"ok.py": MID_FUNCTION, "sub/bad.py": "### BEGIN SOLUTION x\n"})
    with pytest.raises(RegionError, match=r"sub/bad\.py:1"):
        all_regions(root)
