"""The Autolab autograder as Autolab runs it: the handin, autograde.tar and
autograde-Makefile (renamed Makefile) copied into an empty folder, `make` run there, and
the last line of its output read as the autoresult (Autolab's "Guide for Lab Authors"
and "Formatted Feedback")."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest

from grader.lms.autolab import MAKEFILE, TAR, build
from grader.mutants import apply, catalogue as accuracy_catalogue
from grader.run.schedule import possible_points

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "hero_transformer"
STUBS = ROOT / "hero_transformer"
STAMP_KEYS = {"kit", "checks", "torch", "python", "seed", "id"}
CHECK_LINE = re.compile(r"^  (?P<got>[\d.]+)/(?P<of>[\d.]+)  (?P<name>ch\d\d\.\S+)(?P<hidden> \(hidden\))?: "
                        r"(?P<said>.*)$")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("autolab") / "assessment"
    problems = build(out, ["05"])
    return out, problems


def _sources(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.glob("*.py"))}


def _autolab(built, tmp: Path, handin_name: str, content: bytes, python: str = sys.executable):
    """What Autolab does for one submission; (make's result, the output's lines)."""
    out, _ = built
    job = tmp / "job"
    job.mkdir()
    (job / handin_name).write_bytes(content)
    shutil.copy(out / TAR, job / TAR)
    shutil.copy(out / MAKEFILE, job / "Makefile")
    # Autolab runs make at the top level: none of the kit's own `make test` flags (which
    # would make GNU make print "Leaving directory" after the autoresult).
    top_level = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    done = subprocess.run(["make"], cwd=job, env={**top_level, "HERO_TRANSFORMER_PYTHON": python},
                          capture_output=True, text=True, timeout=600)
    return done, done.stdout.rstrip("\n").splitlines()


def _autoresult(lines: list[str], problems: dict) -> dict:
    """The last line: {"scores": {...}}, one number per problem the assessment defines."""
    result = json.loads(lines[-1])
    assert set(result) == {"scores"}
    assert set(result["scores"]) == set(problems)
    for name, score in result["scores"].items():
        assert isinstance(score, (int, float)) and 0 <= score <= problems[name]
    return result["scores"]


def _semantic(lines: list[str]) -> dict:
    """The line before it: the semantic feedback, each stage's test cases passed or not."""
    semantic = json.loads(lines[-2])
    assert semantic["_presentation"] == "semantic"
    for stage in semantic.get("stages", []):
        for case in semantic[stage].values():
            assert isinstance(case["passed"], bool)
            assert ("hint" in case) is (not case["passed"])
    return semantic


def _stamp(lines: list[str]) -> dict:
    stamped = [line for line in lines if line.startswith("hero_transformer stamp: ")]
    assert len(stamped) == 1
    found = json.loads(stamped[0].split(": ", 1)[1])
    assert set(found) == STAMP_KEYS
    return found


def _zip(sources: dict[str, str]) -> bytes:
    from io import BytesIO

    buffer = BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in sorted(sources.items()):
            archive.writestr(f"hero_transformer/{name}", text)
    return buffer.getvalue()


def test_the_tar_holds_what_grading_needs_and_the_readme_names_the_problems(built):
    out, problems = built
    assert problems == {"ch05": possible_points(["05"])}
    with tarfile.open(out / TAR) as archive:
        names = set(archive.getnames())
    assert {"hero_transformer_grader/grader/run/engine.py", "hero_transformer_grader/solutions/hero_transformer/model.py",
            "hero_transformer_grader/hero_transformer/model.py", "hero_transformer_grader/pyproject.toml"} <= names
    assert not any("/tests/" in n or "/qa/" in n for n in names)
    assert all(n.startswith("hero_transformer_grader/") for n in names)
    assert f"`ch05`: {possible_points(['05']):g}" in (out / "README.md").read_text()
    dockerfile = (out / "Dockerfile").read_text()
    assert '--index-url https://download.pytorch.org/whl/cpu "torch>=2.3,<2.14"' in dockerfile
    assert f"ADD {TAR} " in dockerfile


@pytest.mark.slow
def test_the_reference_zip_gets_full_marks(built, tmp_path):
    _, problems = built
    done, lines = _autolab(built, tmp_path, "handin.zip", _zip(_sources(SOLUTIONS)))
    assert done.returncode == 0, done.stderr[-2000:]
    assert _autoresult(lines, problems) == {"ch05": possible_points(["05"])}
    semantic = _semantic(lines)
    cases = semantic[semantic["stages"][0]]
    assert len(semantic["stages"]) == 1 and all(case["passed"] for case in cases.values())
    assert any(name.endswith("(hidden)") for name in cases)
    _stamp(lines)


@pytest.mark.slow
def test_the_stub_copy_as_a_tarball_scores_zero_with_every_check_listed(built, tmp_path):
    _, problems = built
    package = tmp_path / "stubs.tar.gz"
    with tarfile.open(package, "w:gz") as archive:
        archive.add(STUBS, "hero_transformer", filter=lambda i: None if "__pycache__" in i.name else i)
    done, lines = _autolab(built, tmp_path, "handin.tar.gz", package.read_bytes())
    assert done.returncode == 0, done.stderr[-2000:]
    assert _autoresult(lines, problems) == {"ch05": 0}
    semantic = _semantic(lines)
    listed = [m for m in map(CHECK_LINE.match, lines) if m]
    assert {m["name"] for m in listed} == {name.removesuffix(" (hidden)") for name in semantic[semantic["stages"][0]]}
    assert all(m["said"].startswith("not implemented") for m in listed)


@pytest.mark.slow
def test_a_single_wrong_file_is_graded_with_the_stubs_and_scores_what_its_checks_add_up_to(built, tmp_path):
    """The handin is model.py alone, with the post-LN mistake: partly right."""
    _, problems = built
    wrong = next(m for m in accuracy_catalogue()[0] if m.name == "block_post_ln")
    model = apply(_sources(SOLUTIONS), "model", wrong.task, wrong.region())["model.py"]
    done, lines = _autolab(built, tmp_path, "model.py", model.encode())
    assert done.returncode == 0, done.stderr[-2000:]
    scores = _autoresult(lines, problems)
    assert 0 < scores["ch05"] < problems["ch05"]
    listed = [m for m in map(CHECK_LINE.match, lines) if m]
    assert sum(float(m["got"]) for m in listed) == pytest.approx(scores["ch05"])
    semantic = _semantic(lines)
    cases = semantic[semantic["stages"][0]]
    failed_hidden = [name for name, case in cases.items() if name.endswith("(hidden)") and not case["passed"]]
    assert failed_hidden, "the post-LN block must fail a hidden comparison"
    for m in listed:
        name = m["name"] + (m["hidden"] or "")
        assert cases[name]["passed"] is (m["said"] == "passed")
        if not cases[name]["passed"]:
            assert m["said"].startswith(cases[name]["hint"][:200])
    assert "### BEGIN SOLUTION" not in done.stdout and "Traceback" not in done.stdout


@pytest.mark.parametrize("name, content, said", [
    ("handin.zip", b"PK\x03\x04 this is no zip", "handin.zip"),
    ("notes.py", b"print('hello')", "not a file of hero_transformer/"),
])
def test_an_unusable_handin_scores_zero_with_the_reason(built, tmp_path, name, content, said):
    _, problems = built
    done, lines = _autolab(built, tmp_path, name, content)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _autoresult(lines, problems) == {"ch05": 0}
    assert _semantic(lines) == {"_presentation": "semantic"}
    assert lines[0].startswith("This handin could not be graded: ") and said in lines[0]
    _stamp(lines)


def test_a_grader_that_cannot_start_still_ends_with_an_autoresult(built, tmp_path):
    _, problems = built
    done, lines = _autolab(built, tmp_path, "handin.zip", _zip(_sources(SOLUTIONS)), python="/nonexistent/python")
    assert done.returncode == 0
    assert _autoresult(lines, problems) == {"ch05": 0}
    assert "course staff" in lines[-2]


# ------------------------------------------------------------------ Tango's job

# What Tango does for one job (vmms/localDocker.py runJob, autodriver/autodriver.c), on
# this machine: in a mount namespace of its own (so /home, /etc/passwd and /etc/group are
# the job's and nothing outside changes), the users autolab and autograde and Tango's
# /home as its image makes them; then its command line, with the autodriver's steps as
# the autodriver takes them (it runs setuid root, so this script runs them as root):
# the job folder moved into autograde's home and handed to autograde, RLIMIT_NPROC and
# RLIMIT_FSIZE set, the user dropped to autograde, make run with its output in output.log,
# killed at the timeout, the output dumped after a status line. HOME and USER are what
# `su autolab` leaves. Bubblewrap is out of reach, as in Tango's containers, which have
# no user namespaces to give it.
TANGO_JOB = r"""
set -eu
S="$1"; NPROC="$2"; FSIZE="$3"; TIMEOUT="$4"; OSIZE="$5"; PY="$6"; HIDES="$7"
mount --make-rprivate /
cp /etc/passwd "$S/passwd"; cp /etc/group "$S/group"
echo "autolab:x:$8:$8::/home/autolab:/bin/sh" >> "$S/passwd"
echo "autograde:x:$9:$9::/home/autograde:/bin/sh" >> "$S/passwd"
echo "autolab:x:$8:" >> "$S/group"
echo "autograde:x:$9:" >> "$S/group"
mount --bind "$S/passwd" /etc/passwd
mount --bind "$S/group" /etc/group
# The interpreter or the kit sits in a folder only root may enter (a Python under /root, a
# checkout in a private temporary folder): in this namespace only, each such folder is
# replaced by an open one that holds just what the job needs of it. One line per folder:
# the folder, then the entries to keep.
n=0
while read -r hidden children; do
  [ -n "$hidden" ] || continue
  n=$((n + 1)); keep="$S/keep$n"; mkdir -p "$keep"
  mount --bind "$hidden" "$keep"
  mount -t tmpfs -o mode=0755 tmpfs "$hidden"
  for child in $children; do
    if [ -d "$keep/$child" ]; then mkdir -p "$hidden/$child"; else touch "$hidden/$child"; fi
    mount --bind "$keep/$child" "$hidden/$child"
  done
done <<< "$HIDES"
if command -v bwrap >/dev/null 2>&1; then mount --bind /dev/null "$(command -v bwrap)"; fi
mount --bind "$S/home" /home
cd /home
mkdir autolab autograde output
chown autolab:autolab autolab output
chown autograde:autograde autograde
# Tango: cp -r mount/* autolab/; su autolab -c "autodriver -u N -f F -t T -o O autolab > output/feedback 2>&1"
cp -r mount/* autolab/
{
  mv -f autolab /home/autograde
  cd /home/autograde
  chown -R autograde:autograde autolab
  status=0
  timeout -s KILL "$TIMEOUT" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/home/autolab USER=autolab \
      LOGNAME=autolab SHELL=/bin/sh HERO_TRANSFORMER_PYTHON="$PY" \
      prlimit --nproc="$NPROC" --fsize="$FSIZE" -- \
      setpriv --reuid=autograde --regid=autograde --init-groups -- \
      sh -c 'exec > output.log 2>&1; cd autolab && exec /usr/bin/make' || status=$?
  if [ "$status" = 137 ]; then echo "Autodriver: Job timed out after $TIMEOUT seconds"
  else echo "Autodriver: Job exited with status $status"; fi
  head -c "$OSIZE" output.log
} > /home/output/feedback 2>&1
cp /home/output/feedback /home/mount/feedback
stat -c %U /home/autograde/output.log > /home/mount/ran-as
"""


def _blocked_folders(path: str, inside: bool = False) -> dict[str, set[str]] | str:
    """{folder others may not enter: its entries on the way to path (inside=True: the
    folder is path itself, and all its entries are kept)}, or why the job cannot make path
    reachable (a closed folder below another closed one, or /)."""
    parts = Path(path).parts
    last = len(parts) + 1 if inside else len(parts)
    blocked = [i for i in range(1, last) if not os.stat(Path(*parts[:i])).st_mode & 0o001]
    if len(blocked) > 1 or blocked == [1]:
        return f"{path} sits below several folders (or /) that other users may not enter"
    if not blocked:
        return {}
    folder = Path(*parts[:blocked[0]])
    return {str(folder): set(os.listdir(folder)) if blocked[0] == len(parts) else {parts[blocked[0]]}}


def _tango_job(built, tmp_path: Path, files: dict[str, bytes], nproc: int | None = None) -> tuple[str, list[str]]:
    """Run one job as Tango does, as the unprivileged autograde within Tango's limits;
    (the feedback Tango hands back to Autolab, its lines)."""
    from grader.lms.autolab import TANGO_FSIZE, TANGO_NPROC, TANGO_OSIZE

    if os.geteuid() != 0:
        pytest.skip("a Tango-style job needs root to give the job its own users and /home (in a mount namespace)")
    for tool in ("unshare", "setpriv", "prlimit", "timeout", "make"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed here (util-linux, coreutils, make provide the job's tools)")
    hides: dict[str, set[str]] = {}
    for path, inside in ((os.path.realpath(sys.executable), False), (os.path.realpath(sys.base_prefix), False),
                         (str(ROOT), True)):
        found = _blocked_folders(path, inside)
        if isinstance(found, str):
            pytest.skip(f"the kit or its Python cannot be made reachable for another user here: {found}")
        for folder, children in found.items():
            hides.setdefault(folder, set()).update(children)
    if any(a != b and b.startswith(a + "/") for a in hides for b in hides):
        pytest.skip(f"the kit or its Python sits in nested closed folders here: {sorted(hides)}")
    scratch = Path(tempfile.mkdtemp(prefix="tango-job-", dir="/tmp"))
    try:
        scratch.chmod(0o755)
        (scratch / "home" / "mount").mkdir(parents=True)
        out, _ = built
        for name, content in {**files, "autograde.tar": (out / TAR).read_bytes(),
                              "Makefile": (out / MAKEFILE).read_bytes()}.items():
            (scratch / "home" / "mount" / name).write_bytes(content)
        taken = {int(line.split(":")[2]) for line in Path("/etc/passwd").read_text().splitlines() if line.count(":") >= 3}
        uids = [u for u in range(61000, 62000) if u not in taken][:2]
        done = subprocess.run(["unshare", "--mount", "--", "bash", "-c", TANGO_JOB, "tango-job", str(scratch),
                               str(nproc or TANGO_NPROC), str(TANGO_FSIZE), "900", str(TANGO_OSIZE), sys.executable,
                               "\n".join(f"{folder} {' '.join(sorted(children))}" for folder, children in hides.items()),
                               str(uids[0]), str(uids[1])],
                              capture_output=True, text=True, timeout=1200)
        if done.returncode != 0 and "unshare failed" in done.stderr:
            pytest.skip(f"no mount namespace here: {done.stderr.strip()[-300:]}")
        assert done.returncode == 0, done.stderr[-2000:]
        feedback = (scratch / "home" / "mount" / "feedback").read_text()
        assert (scratch / "home" / "mount" / "ran-as").read_text().strip() == "autograde"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return feedback, feedback.rstrip("\n").splitlines()


@pytest.mark.slow
def test_a_tango_job_run_as_autograde_within_tangos_limits_scores_the_reference_full(built, tmp_path):
    """The reference zip, with a file of the deployment's beside it: full marks, the
    job run by autograde, and the stamp's seed the course seed's for these bytes."""
    from grader.lms.autolab import handin_seed

    _, problems = built
    handin = _zip(_sources(SOLUTIONS))
    feedback, lines = _tango_job(built, tmp_path, {"handin.zip": handin, "settings.json": b"{}"})
    assert lines[0] == "Autodriver: Job exited with status 0", feedback[-3000:]
    assert _autoresult(lines, problems) == {"ch05": possible_points(["05"])}, feedback[-3000:]
    seed = int(re.search(r"^COURSE_SEED := (\d+)$", (built[0] / MAKEFILE).read_text(), re.MULTILINE)[1])
    scratch = tmp_path / "handin.zip"
    scratch.write_bytes(handin)
    assert _stamp(lines)["seed"] == handin_seed(seed, scratch)


@pytest.mark.slow
def test_a_tango_job_scores_a_wrong_file_as_a_plain_make_run_does(built, tmp_path):
    """The post-LN model.py alone: the same score and the same lines under Tango's user
    and limits as in a plain `make` (same course seed, same bytes, so the same inputs)."""
    _, problems = built
    wrong = next(m for m in accuracy_catalogue()[0] if m.name == "block_post_ln")
    model = apply(_sources(SOLUTIONS), "model", wrong.task, wrong.region())["model.py"].encode()
    feedback, lines = _tango_job(built, tmp_path, {"model.py": model})
    plain, plain_lines = _autolab(built, tmp_path, "model.py", model)
    scores = _autoresult(lines, problems)
    assert 0 < scores["ch05"] < problems["ch05"], feedback[-3000:]
    assert scores == _autoresult(plain_lines, problems)
    checks = [line for line in lines if CHECK_LINE.match(line)]
    assert checks and checks == [line for line in plain_lines if CHECK_LINE.match(line)]


def test_the_image_gives_tangos_job_its_users_homes_and_autodriver(built):
    out, _ = built
    dockerfile = (out / "Dockerfile").read_text()
    steps = [line for line in dockerfile.splitlines() if line and not line.startswith(("#", " "))]
    assert steps[0].startswith("ARG TANGO_IMAGE=") and steps[1] == "FROM ${TANGO_IMAGE} AS tango"
    assert "COPY --from=tango /usr/bin/autodriver /usr/bin/autodriver" in dockerfile
    assert "chmod 4755 /usr/bin/autodriver" in dockerfile  # setuid root: it moves and chowns the job
    for user in ("autolab", "autograde"):
        assert f"--home-dir /home/{user} --shell /bin/sh {user}" in dockerfile
    assert "mkdir -p /home/autolab /home/autograde /home/output" in dockerfile
    assert "chown autolab:autolab /home/autolab /home/output" in dockerfile
    assert "chown autograde:autograde /home/autograde" in dockerfile
    assert "procps" in dockerfile and "findutils" in dockerfile  # the autodriver's pkill and find
    assert 'su autolab -c "autodriver --help"' in dockerfile
    # Tango's command starts with `cp -r mount/* autolab/`, from the image's WORKDIR, as root.
    assert steps[-1] == "WORKDIR /home"
    assert not any(step.startswith("USER") for step in steps)
    makefile = (out / MAKEFILE).read_text()
    assert re.search(r"^COURSE_SEED := \d+$", makefile, re.MULTILINE)
    assert "--seed $(COURSE_SEED)" in makefile and "export OMP_NUM_THREADS := 1" in makefile


def test_extra_files_are_ignored_and_two_handins_refused(tmp_path):
    from grader.lms.autolab import find_handin, handin_seed

    job = tmp_path / "job"
    job.mkdir()
    for name in ("Makefile", TAR, "settings.json", "README"):
        (job / name).write_text("x")
    assert find_handin(job) == "Nothing was handed in. Upload the zip `make submit` builds."
    (job / "handin.zip").write_bytes(b"PK")
    assert find_handin(job) == job / "handin.zip"
    (job / "second.tar.gz").write_bytes(b"x")
    said = find_handin(job)
    assert isinstance(said, str) and "2 handins" in said and "handin.zip" in said and "second.tar.gz" in said
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "Makefile").write_text("x")
    (lone / "handin.bin").write_bytes(b"garbage")
    assert find_handin(lone) == lone / "handin.bin"  # its reader says what is wrong with it
    # A regrade of the same bytes draws the same hidden inputs; other bytes, others.
    assert handin_seed(7, job / "handin.zip") == handin_seed(7, job / "handin.zip")
    assert handin_seed(7, job / "handin.zip") != handin_seed(8, job / "handin.zip")
    assert handin_seed(7, job / "handin.zip") != handin_seed(7, job / "second.tar.gz")
