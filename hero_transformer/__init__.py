# Your copy of the course package. Fill in every part that raises
# NotImplementedError; `make check` tells you how each one is doing.
"""hero_transformer: a GPT-style decoder-only transformer, built chapter by chapter."""

import sys


def run_program(main) -> int:
    """Run a lesson's program (micro, train, sample): a part not written yet is one
    sentence saying which, instead of a traceback."""
    try:
        return main()
    except NotImplementedError as unwritten:
        task = str(unwritten).strip("'\"") or "a part"
        print(f"This program runs task '{task}', which still raises NotImplementedError: fill it in, then run "
              f"the program again (`python check.py` says how each task is doing).", file=sys.stderr)
        return 2

