"""The kit's own set-up on a fresh Linux machine: `make setup` gets bubblewrap where it
can (root with apt-get, quietly) and otherwise says the one command to run, and never
fails for want of it. Every command the script calls is a fake here."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / ".ci" / "get-bubblewrap"


def _fake(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


def _machine(tmp_path: Path, uid: int = 0, system: str = "Linux", apt: str | None = "works",
             bwrap: bool = False) -> Path:
    """A PATH of fakes: uname, id, and apt-get that installs bwrap, fails, or is absent."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    _fake(bin_, "uname", f'echo "{system}"')
    _fake(bin_, "id", f'echo "{uid}"')
    if bwrap:
        _fake(bin_, "bwrap", "exit 0")
    log = tmp_path / "apt.log"
    if apt == "works":
        _fake(bin_, "apt-get", f'echo "$@" >> "{log}"\necho "noise from apt"\n'
                               f'case "$*" in *install*) printf "#!/bin/sh\\nexit 0\\n" > "{bin_}/bwrap"; '
                               f'/bin/chmod 755 "{bin_}/bwrap";; esac')
    elif apt == "fails":
        _fake(bin_, "apt-get", f'echo "$@" >> "{log}"\necho "E: unable to locate package" >&2\nexit 100')
    return bin_


def _run(bin_: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["/bin/sh", str(SCRIPT)], env={"PATH": str(bin_)}, capture_output=True, text=True,
                          timeout=60)


def test_root_with_apt_get_installs_it_quietly(tmp_path):
    bin_ = _machine(tmp_path)
    done = _run(bin_)
    assert done.returncode == 0 and (bin_ / "bwrap").exists()
    assert done.stdout.strip() == "installed bubblewrap (the grader's sandbox)" and done.stderr == ""
    calls = (tmp_path / "apt.log").read_text().splitlines()
    assert calls == ["update -qq", "install -y -qq bubblewrap"]


@pytest.mark.parametrize("uid, apt, says", [
    (0, "fails", "sudo apt-get install bubblewrap"),
    (1000, "works", "sudo apt-get install bubblewrap"),
    (1000, None, "bubblewrap package"),
])
def test_otherwise_it_says_the_command_and_does_not_fail(tmp_path, uid, apt, says):
    bin_ = _machine(tmp_path, uid=uid, apt=apt)
    done = _run(bin_)
    assert done.returncode == 0 and not (bin_ / "bwrap").exists()
    assert says in done.stdout and "E: unable" not in done.stdout + done.stderr
    if uid != 0 and apt:
        assert not (tmp_path / "apt.log").exists(), "apt-get is run as root only"


def test_nothing_to_do_where_it_is_installed_or_not_linux(tmp_path):
    for folder, kwargs in (("has", {"bwrap": True}), ("mac", {"system": "Darwin"})):
        (tmp_path / folder).mkdir()
        done = _run(_machine(tmp_path / folder, **kwargs))
        assert done.returncode == 0 and done.stdout == "" and not (tmp_path / folder / "apt.log").exists()


def test_make_setup_runs_it_before_the_venv():
    done = subprocess.run(["make", "-n", "--no-print-directory", "setup", "VENV=/nonexistent/venv"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    lines = done.stdout.splitlines()
    assert lines[0] == "sh .ci/get-bubblewrap", lines
    assert any("-m venv" in line for line in lines[1:])


def test_ci_leaves_bubblewrap_to_make_setup():
    text = (ROOT / ".ci" / "run").read_text()
    assert "apt-get install" not in text and "make test" in text


def test_time_limits_grow_with_the_machines_load(monkeypatch):
    from tests import timing

    monkeypatch.setattr(timing, "starved", lambda: 1.0)
    monkeypatch.setattr(timing, "_cores", lambda: 2)
    monkeypatch.setattr(timing.os, "getloadavg", lambda: (6.0, 6.0, 6.0))
    assert timing.limit(3.0) == pytest.approx(9.0)  # three runnable processes per core
    monkeypatch.setattr(timing.os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    assert timing.limit(3.0) == 3.0  # an idle machine: never below the idle figure
    monkeypatch.setattr(timing, "starved", lambda: 4.0)
    assert timing.limit(3.0) == 12.0  # a process given a quarter of a core right now


def test_starved_measures_wall_time_per_cpu_second():
    from tests.timing import starved

    assert starved(0.02) >= 0.99
