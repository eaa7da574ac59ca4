"""A Gradescope autograder, built from this kit:

    python -m grader gradescope --output autograder.zip                 all chapters
    python -m grader gradescope --chapters 05 --output ch05.zip         one assignment per chapter

Gradescope unpacks the zip into /autograder/source, runs setup.sh once (as root) when it
builds the image, and runs run_autograder for every submission (the upload in
/autograder/submission); run_autograder grades it with all checks of the chapters the
zip was built for, and writes /autograder/results/results.json. Its total is those
chapters' points only. The zip holds the grader and the reference, never the kit's tests
or the student copy.

setup.sh works on Gradescope's Ubuntu base images (22.04, the default, whose python3 is
3.10; 24.04, whose python3 is 3.12): it uses a Python >= 3.11 the image has, or installs
one (apt's python3.11 where the release carries it, else the deadsnakes PPA), makes a
venv with it, and installs the CPU build of torch from PyPI's CPU wheel index before the
rest, so pip never fetches the multi-GB CUDA build. Where the image cannot run
bubblewrap, setup.sh makes the reference and the engine unreadable to `nobody`, the user
the code being graded then runs as.

Assignment settings (Configure Autograder): at least 2 CPUs and 4 GB of memory (the
grader, its sandbox's zygote and two workers each hold torch), and a 10-minute timeout
(a full submission grades in seconds; the limit only bounds pathological code, whose
every check stops at its own time limit). Both scripts accept AUTOGRADER_ROOT (default
/autograder), so a copy of that layout can be tested anywhere.
"""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

from grader import KIT_ROOT
from grader.lms.external import CPU_WHEELS, kit_files, torch_requirement

ROOT = KIT_ROOT

SETUP = """\
#!/usr/bin/env bash
# Runs once, as root, when Gradescope builds the autograder image.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
cd "$ROOT/source"

# A Python >= 3.11 whose venv module can bootstrap pip.
usable() {{ "$1" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; }}
find_python() {{
  local name
  for name in python3.13 python3.12 python3.11 python3; do
    if command -v "$name" >/dev/null 2>&1 && usable "$(command -v "$name")"; then
      command -v "$name"
      return 0
    fi
  done
  return 1
}}

apt-get update -qq
apt-get install -y -qq bubblewrap >/dev/null || echo "setup.sh: no bubblewrap; graded code will run as nobody"
PYTHON="$(find_python || true)"
if [ -z "$PYTHON" ]; then
  # Ubuntu 24.04: python3 is 3.12 but its venv module comes in a separate package.
  apt-get install -y -qq python3-venv >/dev/null 2>&1 || true
  PYTHON="$(find_python || true)"
fi
if [ -z "$PYTHON" ]; then
  # Ubuntu 22.04: python3 is 3.10; 3.11 is in the release's universe component.
  apt-get install -y -qq python3.11 python3.11-venv >/dev/null 2>&1 || true
  PYTHON="$(find_python || true)"
fi
if [ -z "$PYTHON" ]; then
  # Anything older: the deadsnakes PPA carries 3.11 for every supported Ubuntu release.
  apt-get install -y -qq software-properties-common >/dev/null
  add-apt-repository -y ppa:deadsnakes/ppa
  apt-get update -qq
  apt-get install -y -qq python3.11 python3.11-venv >/dev/null
  PYTHON="$(find_python || true)"
fi
if [ -z "$PYTHON" ]; then
  echo "setup.sh: could not find or install Python >= 3.11" >&2
  exit 1
fi
echo "setup.sh: using $PYTHON"

"$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# torch first, from the CPU wheel index only: the default index would resolve the
# multi-GB CUDA build. The rest then finds torch already satisfied.
.venv/bin/python -m pip install --quiet --index-url {cpu_wheels} "{torch}"
.venv/bin/python -m pip install --quiet .
.venv/bin/python -c 'import torch; assert torch.version.cuda is None, "a CUDA build of torch was installed"'

# Without bubblewrap the graded code runs as `nobody`: it may read only what the sandbox
# side needs (grader/run/inside, grader/checks), never solutions/ or the rest of grader/.
chmod -R go-rwx solutions grader
chmod go+x grader grader/run
chmod go+r grader/__init__.py grader/run/__init__.py
chmod -R go+rX grader/run/inside grader/checks
"""

RUN = """\
#!/usr/bin/env bash
# Runs for every submission; always leaves a results.json behind.
# Paths given relative to where it was started are read from there, before it changes folder.
ROOT="$(cd "${{AUTOGRADER_ROOT:-/autograder}}" && pwd)" || {{ echo "run_autograder: no folder ${{AUTOGRADER_ROOT:-/autograder}}" >&2; exit 2; }}
PYTHON="${{AUTOGRADER_PYTHON:-$ROOT/source/.venv/bin/python}}"
case "$PYTHON" in
  /*) ;;
  */*) PYTHON="$PWD/$PYTHON" ;;
esac
CHAPTERS="{chapters}"  # the chapters this assignment grades (empty: all)
mkdir -p "$ROOT/results"
cd "$ROOT/source" || exit 2
status=0
if command -v "$PYTHON" >/dev/null 2>&1; then
  # --budget: Gradescope's 10-minute timeout less a minute, so results.json is written first.
  "$PYTHON" -m grader grade "$ROOT/submission" --json "$ROOT/results/results.json" --allow-weak-sandbox --budget 540 \\
    ${{CHAPTERS:+--chapters "$CHAPTERS"}} || status=$?
else
  echo "run_autograder: no Python at $PYTHON (set AUTOGRADER_PYTHON, or run setup.sh first)" >&2
  status=2
fi
# What the code printed and raised, for course staff: results.json keeps the autograder's
# own output hidden from students (stdout_visibility), and the staff file is not shown.
if [ -s "$ROOT/results/results.staff.json" ]; then
  cat "$ROOT/results/results.staff.json"
fi
if [ ! -s "$ROOT/results/results.json" ]; then
  echo '{{"score": 0, "execution_time": 0, "output": "The autograder failed before it could grade; please tell the course staff.", "tests": []}}' \\
    > "$ROOT/results/results.json"
  exit $(( status ? status : 1 ))  # a failed grading says so, with its results.json in place
fi
exit 0
"""


def scripts(chapters: list[str] | None = None) -> dict[str, str]:
    return {"setup.sh": SETUP.format(cpu_wheels=CPU_WHEELS, torch=torch_requirement()),
            "run_autograder": RUN.format(chapters=",".join(chapters or []))}


def build(output: Path, chapters: list[str] | None = None) -> list[str]:
    names = []
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in scripts(chapters).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | 0o755) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, text)
            names.append(name)
        for path, name in kit_files():
            archive.write(path, name)
            names.append(name)
    return names
