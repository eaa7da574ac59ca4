"""The Slurm array job the kit ships (grader/grade_class/slurm/), run on a real one-node
Slurm: munged, slurmctld and slurmd brought up from Debian's packages in a scratch
folder, the documented array job submitted with `sbatch --wait` over a small class
download, the merge job after it, and the merged gradebook compared with a single run's.
Skipped, with the reason, where Slurm is not installed or cannot start; every daemon the
test starts is stopped by its own pid."""

from __future__ import annotations

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


@pytest.mark.slow
@NEEDS_SLURM
@NEEDS_ROOT
def test_the_shipped_array_job_and_merge_equal_a_single_run(cluster, tmp_path):
    uploads = _class_download(tmp_path / "uploads")
    flags = ["--chapters", "05", "--seed", "4242", "--allow-weak-sandbox"]
    env = {**cluster, "HERO_TRANSFORMER_KIT": str(ROOT), "HERO_TRANSFORMER_PYTHON": sys.executable}
    # The job script as docs/grading-a-class.md shows it; the cluster's sizes on the command line.
    sized = ["--cpus-per-task=1", "--mem=2G", "--time=00:20:00"]
    array = subprocess.run(["sbatch", "--wait", "--parsable", "--array=1-3", *sized,
                            f"--output={tmp_path}/grade-%A_%a.log", str(SCRIPTS / "grade-array.sh"),
                            "uploads", "shards", *flags], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=900)
    logs = "\n".join(p.read_text()[-1500:] for p in sorted(tmp_path.glob("grade-*.log")))
    assert array.returncode == 0, array.stderr + logs
    job = array.stdout.strip().split(";")[0]
    assert re.fullmatch(r"\d+", job), array.stdout
    assert sorted(p.name for p in (tmp_path / "shards").iterdir()) == ["1", "2", "3"]
    merged = subprocess.run(["sbatch", "--wait", f"--dependency=afterok:{job}", *sized,
                             f"--output={tmp_path}/merge-%j.log", str(SCRIPTS / "merge.sh"), "shards", "graded"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert merged.returncode == 0, merged.stderr + "".join(p.read_text() for p in tmp_path.glob("merge-*.log"))

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
