"""Which edition of the kit this is. The course's own checkout says "course"; the
student release rewrites this line to "student", and its command line then offers the
student's commands only."""

EDITION = "course"


def check_py(arguments: str = "") -> str:
    """The students' check command as this platform runs it: Windows has the `py`
    launcher, Linux and macOS `python3` (many have no `python` at all)."""
    import sys

    command = "py check.py" if sys.platform == "win32" else "python3 check.py"
    return f"{command} {arguments}".rstrip()
