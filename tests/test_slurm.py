"""The Slurm array job the kit ships (grader/grade_class/slurm/), run on a real one-node
Slurm: munged, slurmctld and slurmd brought up from Debian's packages in a scratch
folder, the documented array job submitted with `sbatch --wait` over a small class
download, the merge job after it, and the merged gradebook compared with a single run's.
Skipped, with the reason, where Slurm is not installed or cannot start; every daemon the
test starts is stopped by its own pid."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "grader" / "grade_class" / "slurm"
SOLUTIONS = ROOT / "solutions" / "hero_transformer"
STUBS = ROOT / "hero_transformer"
NO_RESIDUAL = ("hidden = hidden + self.residual_dropout(fed)", "hidden = self.residual_dropout(fed)")
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo")
MISSING = [name for name in DAEMONS if shutil.which(name) is None]

NEEDS_SLURM = pytest.mark.skipif(bool(MISSING), reason=f"Slurm is not installed here ({', '.join(MISSING)} not "
                                                        f"found); `apt-get install -y slurmctld slurmd munge "
                                                        f"slurm-client` provides it")
NEEDS_ROOT = pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() != 0,
                                reason="slurmd must start as root to run jobs; this test runs as another user")

SLURM_CONF = """\
ClusterName=herokit
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={socket}
StateSaveLocation={base}/state
SlurmdSpoolDir={base}/spool
SlurmctldPidFile={base}/run/slurmctld.pid
SlurmdPidFile={base}/run/slurmd.pid
SlurmctldLogFile={base}/log/slurmctld.log
SlurmdLogFile={base}/log/slurmd.log
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
NodeName={host} CPUs={cpus} RealMemory={memory} State=UNKNOWN
PartitionName=grading Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024 - 512
    return 2048


def _stop(pid_file: Path) -> None:
    """End a daemon this test started, by the pid it wrote, and wait for it to go."""
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def cluster():
    """A one-node Slurm in a scratch folder: the environment that reaches it."""
    base = Path(tempfile.mkdtemp(prefix="herokit-slurm-", dir="/tmp"))
    base.chmod(0o755)  # munged wants every folder above its socket searchable by all
    for part in ("state", "spool", "log", "run", "munge", "socket"):
        (base / part).mkdir()
    (base / "munge").chmod(0o700)
    key = base / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    host = socket.gethostname().split(".")[0]
    conf = base / "slurm.conf"
    conf.write_text(SLURM_CONF.format(host=host, base=base, socket=base / "socket" / "munge.sock",
                                      ctld_port=_free_port(), d_port=_free_port(), cpus=os.cpu_count() or 1,
                                      memory=_memory_mb()))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    started = []
    try:
        steps = [(["munged", "-S", str(base / "socket" / "munge.sock"), "--key-file", str(key),
                   "--pid-file", str(base / "run" / "munged.pid"), "--log-file", str(base / "log" / "munged.log"),
                   "--seed-file", str(base / "munge" / "seed")], base / "run" / "munged.pid"),
                 (["slurmctld", "-f", str(conf)], base / "run" / "slurmctld.pid"),
                 (["slurmd", "-f", str(conf)], base / "run" / "slurmd.pid")]
        for command, pid_file in steps:
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
            for _ in range(50):
                if pid_file.exists():
                    break
                time.sleep(0.1)
            if pid_file.exists():
                started.append(pid_file)
            if done.returncode != 0 or not pid_file.exists():
                pytest.skip(f"Slurm could not start here: `{command[0]}` exited {done.returncode}: "
                            f"{(done.stderr or done.stdout).strip()[-500:]}")
        for _ in range(60):
            state = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True).stdout
            if state.strip() in ("idle", "mixed", "allocated"):
                break
            time.sleep(0.5)
        else:
            log = (base / "log" / "slurmd.log").read_text()[-800:] if (base / "log" / "slurmd.log").exists() else ""
            pytest.skip(f"Slurm started but its node never became idle (sinfo: {state.strip()!r}); slurmd: {log}")
        yield env
    finally:
        for pid_file in reversed(started):
            _stop(pid_file)
        shutil.rmtree(base, ignore_errors=True)


def _zip(path: Path, source: Path, replace: tuple[str, str] | None = None) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for file in sorted(source.glob("*.py")):
            text = file.read_text()
            archive.writestr(f"hero_transformer/{file.name}", text.replace(*replace) if replace else text)


def _class_download(folder: Path) -> Path:
    """A few uploads: reference copies, stub copies, one partly wrong."""
    folder.mkdir()
    _zip(folder / "ann.zip", SOLUTIONS)
    _zip(folder / "ben.zip", STUBS)
    _zip(folder / "cho.zip", SOLUTIONS, NO_RESIDUAL)
    _zip(folder / "dev.zip", STUBS)
    with tarfile.open(folder / "eli.tar.gz", "w:gz") as archive:
        archive.add(SOLUTIONS, "hero_transformer", filter=lambda i: None if "__pycache__" in i.name else i)
    return folder


FAILS_ONCE = """#!/bin/sh
# Task 2 of the first array fails before grading anything, as a node lost would.
if [ "$SLURM_ARRAY_TASK_ID" = 2 ] && [ -e "{flag}" ]; then echo "task 2 lost its node" >&2; exit 3; fi
exec "{python}" "$@"
"""


def _sbatch(args, cwd, env, timeout=900):
    return subprocess.run(["sbatch", "--wait", "--parsable", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _shard_files(shards: Path) -> dict[str, bytes]:
    return {str(p.relative_to(shards)): p.read_bytes() for p in sorted(shards.rglob("*.json")) if p.is_file()}


@pytest.mark.slow
@NEEDS_SLURM
@NEEDS_ROOT
def test_a_failed_task_rerun_fills_its_shard_and_the_merge_equals_a_single_run(cluster, tmp_path):
    """The documented flow with one task lost: the array job, a merge after any outcome
    that names the missing shard and writes nothing, the task run again as the docs say
    (`--array=2-2`, shard 2 of 3, nothing else touched), the merge again: the gradebook
    of a single run. Logs land in the folder sbatch ran in, never the kit's."""
    uploads = _class_download(tmp_path / "uploads")
    flags = ["--chapters", "05", "--seed", "4242", "--allow-weak-sandbox"]
    flag = tmp_path / "lose-task-2"
    flag.write_text("")
    python = tmp_path / "python"
    python.write_text(FAILS_ONCE.format(flag=flag, python=sys.executable))
    python.chmod(0o755)
    env = {**cluster, "HERO_TRANSFORMER_KIT": str(ROOT), "HERO_TRANSFORMER_PYTHON": str(python)}
    logs_before = set(ROOT.glob("grade-class-*.log"))
    # The job scripts as docs/grading-a-class.md shows them; the cluster's sizes on the command line.
    sized = ["--cpus-per-task=1", "--mem=2G", "--time=00:20:00"]
    array = _sbatch(["--array=1-3", *sized, str(SCRIPTS / "grade-array.sh"), "uploads", "shards", *flags],
                    tmp_path, env)
    job = array.stdout.strip().split(";")[0]
    assert re.fullmatch(r"\d+", job), array.stdout + array.stderr
    assert array.returncode != 0  # one task failed
    assert sorted(p.name for p in (tmp_path / "shards").iterdir() if p.is_dir()) == ["1", "3"]
    assert "task 2 lost its node" in (tmp_path / f"grade-class-{job}_2.log").read_text()

    merge = _sbatch([f"--dependency=afterany:{job}", *sized, str(SCRIPTS / "merge.sh"), "shards", "graded"],
                    tmp_path, env)
    merge_log = next(tmp_path.glob("grade-class-merge-*.log")).read_text()
    assert merge.returncode != 0, merge_log
    assert "shard 2: never started" in merge_log and "--array=2 " in merge_log, merge_log
    assert not (tmp_path / "graded" / "gradebook.csv").exists()

    kept = {k: _shard_files(tmp_path / "shards" / k) for k in ("1", "3")}
    flag.unlink()
    rerun = _sbatch(["--array=2-2", *sized, str(SCRIPTS / "grade-array.sh"), "uploads", "shards", *flags],
                    tmp_path, env)
    rerun_job = rerun.stdout.strip().split(";")[0]
    assert rerun.returncode == 0, rerun.stderr + (tmp_path / f"grade-class-{rerun_job}_2.log").read_text()[-2000:]
    assert "shard 2 of 3" in (tmp_path / f"grade-class-{rerun_job}_2.log").read_text()
    assert json.loads((tmp_path / "shards" / "2" / "class.json").read_text())["shard"] == [2, 3]
    assert {k: _shard_files(tmp_path / "shards" / k) for k in ("1", "3")} == kept  # nothing else touched
    merged = _sbatch([f"--dependency=afterany:{rerun_job}", *sized, str(SCRIPTS / "merge.sh"), "shards", "graded"],
                     tmp_path, env, timeout=600)
    assert merged.returncode == 0, merged.stderr + "".join(p.read_text() for p in tmp_path.glob("grade-class-merge-*"))

    single = subprocess.run([sys.executable, "-m", "grader", "grade-class", str(uploads), "--out",
                             str(tmp_path / "single"), *flags], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert single.returncode == 0, single.stderr[-2000:]
    for name in ("gradebook.csv", "entries.csv", "summary.md"):
        assert (tmp_path / "graded" / name).read_text() == (tmp_path / "single" / name).read_text(), name
    rows = (tmp_path / "graded" / "gradebook.csv").read_text().splitlines()
    assert len(rows) == 1 + 5 and any(row.startswith("ann,") and ",36,36," in row for row in rows)
    # Every upload was graded by exactly one shard.
    graded = [p.name for k in (1, 2, 3) for p in (tmp_path / "shards" / str(k) / "results").glob("*.json")
              if not p.name.endswith(".staff.json")]
    assert len(graded) == len(set(graded)) == 5
    assert set(ROOT.glob("grade-class-*.log")) == logs_before


def test_the_documented_job_script_is_the_shipped_one():
    doc = (ROOT / "docs" / "grading-a-class.md").read_text()
    for script in ("grade-array.sh", "merge.sh"):
        shipped = (SCRIPTS / script).read_text()
        assert f"grader/grade_class/slurm/{script}" in doc
        assert f"```bash\n{shipped}```" in doc, f"docs/grading-a-class.md must show {script} as shipped"
        assert os.access(SCRIPTS / script, os.X_OK)


def test_the_array_job_refuses_to_run_without_a_seed(tmp_path):
    env = {**os.environ, "SLURM_ARRAY_TASK_COUNT": "2", "SLURM_ARRAY_TASK_ID": "1", "SLURM_SUBMIT_DIR": str(tmp_path)}
    done = subprocess.run(["bash", str(SCRIPTS / "grade-array.sh"), "uploads", "shards"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--seed" in done.stderr
    assert not (tmp_path / "shards").exists()


ECHO_PYTHON = """#!/bin/sh
printf '%s\\n' "$@" > "{record}"
"""


def _task(tmp_path, task: int, low: int, high: int) -> subprocess.CompletedProcess:
    """grade-array.sh as Slurm starts one task, with a Python that records its arguments."""
    python = tmp_path / "python"
    python.write_text(ECHO_PYTHON.format(record=tmp_path / f"args-{task}"))
    python.chmod(0o755)
    env = {**os.environ, "SLURM_SUBMIT_DIR": str(tmp_path), "HERO_TRANSFORMER_KIT": str(ROOT),
           "HERO_TRANSFORMER_PYTHON": str(python), "SLURM_ARRAY_TASK_ID": str(task),
           "SLURM_ARRAY_TASK_MIN": str(low), "SLURM_ARRAY_TASK_MAX": str(high),
           "SLURM_ARRAY_TASK_COUNT": str(high - low + 1)}
    return subprocess.run(["bash", str(SCRIPTS / "grade-array.sh"), "uploads", "shards", "--seed", "4242"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)


def test_the_task_id_is_the_shard_and_a_rerun_keeps_the_split(tmp_path):
    first = _task(tmp_path, 3, 1, 3)  # the array 1-3
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "args-3").read_text().split("\n")[:6] == [
        "-m", "grader", "grade-class", str(tmp_path / "uploads"), "--shard", "3/3"]
    assert (tmp_path / "shards" / "array").read_text().startswith("shards=3\narguments=")
    rerun = _task(tmp_path, 2, 2, 2)  # sbatch --array=2-2: shard 2 of 3, not 1 of 1
    assert rerun.returncode == 0, rerun.stderr
    said = (tmp_path / "args-2").read_text().split("\n")
    assert said[said.index("--shard") + 1] == "2/3" and said[said.index("--out") + 1] == str(tmp_path / "shards" / "2")
    late = _task(tmp_path, 4, 4, 4)
    assert late.returncode == 2 and "outside shards 1-3" in late.stderr


def test_an_array_that_does_not_start_at_one_is_refused(tmp_path):
    done = _task(tmp_path, 0, 0, 3)
    assert done.returncode == 2 and "number the tasks from 1" in done.stderr
    assert not (tmp_path / "args-0").exists()


def test_the_shard_check_names_what_is_missing_and_how_to_rerun_it(tmp_path):
    from grader.files import write_json
    from grader.grade_class.records import RECORD_FORMAT, STATE
    from grader.grade_class.shards import report

    shards = tmp_path / "shards"
    shards.mkdir()
    assert report(shards)[0] is False and "no task of the array job began" in report(shards)[1]
    (shards / "array").write_text("shards=3\narguments= /in /shards --seed 4242\n")
    for k, graded in ((1, ["a", "b"]), (3, ["e"])):
        write_json(shards / str(k) / STATE, {"shard": [k, 3], "uploads": ["a", "b"] if k == 1 else ["e", "f"]})
        for slug in graded:
            write_json(shards / str(k) / "results" / f"{slug}.json", {"format": RECORD_FORMAT, "upload": {"slug": slug}})
    finished, said = report(shards)
    assert not finished
    assert "shard 2: never started" in said and "shard 3: 1 of 2 uploads not graded" in said
    assert "shard 1:" not in said  # finished
    assert "--array=2,3 $HERO_TRANSFORMER_KIT/grader/grade_class/slurm/grade-array.sh /in /shards --seed 4242" in said
    write_json(shards / "2" / STATE, {"shard": [2, 3], "uploads": []})
    write_json(shards / "3" / "results" / "f.json", {"format": RECORD_FORMAT, "upload": {"slug": "f"}})
    assert report(shards) == (True, "all 3 shards finished; merging")


def test_the_merge_is_submitted_one_way_in_one_place():
    """The sbatch line that submits the merge waits for the array however it ended
    (afterany: afterok stays pending for ever after one failed task), and only
    docs/grading-a-class.md writes the recipe; other pages point there."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    submitting = {page.name: [line for line in page.read_text().splitlines()
                              if "sbatch" in line and "--dependency" in line] for page in pages}
    assert not [line for lines in submitting.values() for line in lines if "afterok" in line], submitting
    assert {name for name, lines in submitting.items() if lines} == {"grading-a-class.md"}, submitting
    assert all("--dependency=afterany:" in line for line in submitting["grading-a-class.md"])
