"""A Gradescope autograder, built from this kit:

    python -m grader gradescope --output autograder.zip

Gradescope unpacks the zip into /autograder/source, runs setup.sh once when it builds the
image, and runs run_autograder for every submission (the upload in
/autograder/submission); run_autograder grades it with all checks and writes
/autograder/results/results.json. The zip holds the grader and the reference, never the
kit's tests or the student copy. Where the image cannot run bubblewrap, setup.sh makes
the reference and the engine unreadable to `nobody`, the user the code being graded then
runs as. The kit needs Python 3.11+ (Ubuntu 22.04 images get it from apt as python3.11)
and a CPU build of torch below 2.14: install one first if the image's pip would pick a
CUDA build.
"""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SETUP = """\
#!/usr/bin/env bash
# Runs once, when Gradescope builds the autograder image.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq python3.11 python3.11-venv bubblewrap >/dev/null
cd /autograder/source
python3.11 -m venv .venv
.venv/bin/pip install --quiet --upgrade pip
.venv/bin/pip install --quiet .
# Without bubblewrap the graded code runs as `nobody`: it may read only what the sandbox
# side needs (grader/inside, grader/checks), never solutions/ or the rest of grader/.
chmod -R go-rwx solutions grader
chmod go+rx grader grader/inside grader/checks
chmod go+r grader/__init__.py grader/inside/*.py grader/checks/*.py
"""

RUN = """\
#!/usr/bin/env bash
# Runs for every submission; always leaves a results.json behind.
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${AUTOGRADER_PYTHON:-$ROOT/source/.venv/bin/python}"
mkdir -p "$ROOT/results"
cd "$ROOT/source"
"$PYTHON" -m grader grade "$ROOT/submission" --json "$ROOT/results/results.json" --allow-weak-sandbox
if [ ! -s "$ROOT/results/results.json" ]; then
  echo '{"score": 0, "output": "The autograder failed before it could grade; please tell the course staff.", "tests": []}' \\
    > "$ROOT/results/results.json"
fi
exit 0
"""

INCLUDED = ("grader", "solutions")
SKIPPED_PARTS = {"__pycache__", "accuracy"}


def build(output: Path) -> list[str]:
    names = []
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in (("setup.sh", SETUP), ("run_autograder", RUN)):
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | 0o755) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, text)
            names.append(name)
        for name in ("pyproject.toml", "README.md"):
            archive.write(ROOT / name, name)
            names.append(name)
        for folder in INCLUDED:
            for path in sorted((ROOT / folder).rglob("*")):
                rel = path.relative_to(ROOT)
                if path.is_file() and not SKIPPED_PARTS & set(rel.parts) and path.suffix in (".py", ".md"):
                    archive.write(path, rel.as_posix())
                    names.append(rel.as_posix())
    return names
