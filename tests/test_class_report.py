"""The class report a TA reads after `grade-class`: a class with planted mistakes in
several chapters, a syntax error, a hang, an unreadable archive, a student with no
upload and a shared folder. (A hang's line is asserted on a record of its own: whether a
loop that spins on a loaded machine is a timeout is the time limits' business.) Every planted mistake is named once with its student, every
broken or missing upload stands in "needs attention" with its cause (and in the
gradebook's note), and the look-alike pair is named by its students, the earlier first.
The verdicts the report is built from are asserted first, as the records carry them."""

from __future__ import annotations

import csv
import html
import json
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from grader.__main__ import main as cli
from grader.checks.ch05_block.gelu.hidden import matches_reference
from grader.checks.ch05_block.layer_norm import shift_invariance
from grader.mutants import catalogue as accuracy_catalogue

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "solutions" / "hero_transformer"
CHAPTERS = ["--chapters", "01,04,05,08", "--public-only", "--seed", "5", "--allow-weak-sandbox"]


def _sources(entry=None) -> dict[str, str]:
    sources = {p.name: p.read_text() for p in REFERENCE.glob("*.py")}
    return entry.apply(sources) if entry is not None else sources


def _zip(path: Path, sources: dict[str, str]) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in sorted(sources.items()):
            archive.writestr(f"hero_transformer/{name}", text)


def _entry(name: str):
    mutants, variants = accuracy_catalogue()
    return {e.name: e for e in mutants + variants}[name]


# login, Canvas user id, attempt, what the upload holds
PLANTED = {
    "annaberg": ("101", "1001", "right"),
    "benbrook": ("102", "1002", "right"),
    "carlcole": ("103", "1003", "layer_norm_variance_d_minus_1"),
    "dinadove": ("104", "1004", "attention_no_causal_mask"),
    "eddyeast": ("105", "1005", "adamw_coupled_weight_decay"),
    "fernfox": ("106", "1006", "syntax error"),
    "hughhill": ("108", "1008", "garbage"),
    "ivyisle": ("109", "1009", "own layer_norm"),
    "jackjade": ("110", "1012", "copy of ivyisle"),  # a later attempt number: uploaded after
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("class")
    download = base / "submissions"
    download.mkdir()
    own_layer_norm = _sources(_entry("layer_norm_rsqrt_mean_of_squares"))
    for login, (user, attempt, holds) in PLANTED.items():
        path = download / f"{login}_{user}_{attempt}_submission.zip"
        if holds == "right":
            _zip(path, _sources())
        elif holds == "syntax error":
            sources = _sources()
            sources["train.py"] = sources["train.py"].replace("def zero_grad(self) -> None:", "def zero_grad(self)")
            _zip(path, sources)
        elif holds == "garbage":
            path.write_bytes(bytes(range(256)) * 40)
        elif holds in ("own layer_norm", "copy of ivyisle"):
            _zip(path, own_layer_norm)
        else:
            _zip(path, _sources(_entry(holds)))
    roster = base / "roster.csv"
    names = {"annaberg": "Berg, Anna", "benbrook": "Brook, Ben", "carlcole": "Cole, Carl", "dinadove": "Dove, Dina",
             "eddyeast": "East, Eddy", "fernfox": "Fox, Fern", "hughhill": "Hill, Hugh",
             "ivyisle": "Isle, Ivy", "jackjade": "Jade, Jack", "kimkeel": "Keel, Kim"}
    users = {login: data[0] for login, data in PLANTED.items()} | {"kimkeel": "111"}
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section,hero_transformer (9)\n"
                      "    Points Possible,,,,,100\n"
                      + "".join(f'"{names[login]}",{users[login]},S{users[login]},{login},A,\n' for login in names))
    out = base / "out"
    assert cli(["grade-class", str(download), "--out", str(out), "--roster", str(roster), "--format", "canvas",
                *CHAPTERS]) == 0
    return out


def _record(out: Path, login: str) -> dict:
    found = [p for p in (out / "results").glob(f"{login}_*.json") if not p.name.endswith(".staff.json")]
    assert len(found) == 1, found
    return json.loads(found[0].read_text())


def _verdicts(record: dict) -> list[dict]:
    return [c["verdict"] for c in record["checks"] if c["verdict"]]


def test_each_failing_check_carries_what_it_found(graded):
    from grader.run.verdicts import KINDS

    assert all(c["verdict"] is None for c in _record(graded, "annaberg")["checks"])
    every = [c["verdict"] for p in (graded / "results").glob("*.json") if ".staff." not in p.name
             for c in json.loads(p.read_text())["checks"]]
    assert {v["kind"] for v in every if v} <= set(KINDS)
    assert all((v is None) == (c["status"] == "passed") for p in (graded / "results").glob("*.json")
               if ".staff." not in p.name for c in json.loads(p.read_text())["checks"] for v in [c["verdict"]])
    named = {(v["task"], v["mistake"]) for v in _verdicts(_record(graded, "carlcole")) if v["kind"] == "mistake"}
    assert ("layer_norm", "d_minus_1") in named
    assert ("attention", "no_mask") in {(v.get("task"), v.get("mistake")) for v in _verdicts(_record(graded, "dinadove"))}
    assert ("adamw_step", "coupled") in {(v.get("task"), v.get("mistake")) for v in _verdicts(_record(graded, "eddyeast"))}
    # A LayerNorm that divides by d - 1 names its slip: the properties that hold count, and
    # none waits (grader.run.verdicts.computing_status).
    carl = _record(graded, "carlcole")["checks"]
    assert not [v for v in _verdicts(_record(graded, "carlcole")) if v["kind"] == "gated"]
    assert any(c["name"] == shift_invariance.name and c["status"] == "passed" for c in carl)
    loads = [v for v in _verdicts(_record(graded, "fernfox")) if v["kind"] == "load_failed"]
    assert loads and all(v == {"kind": "load_failed", "file": "hero_transformer/train.py", "line": loads[0]["line"],
                               "error": "SyntaxError"} for v in loads)
    assert isinstance(loads[0]["line"], int)
    results = json.loads((graded / "results").joinpath(
        next(p.name for p in (graded / "results").glob("carlcole_*.json") if ".staff." not in p.name)).read_text())
    assert results["checks"]  # the record; its results.json twin carries the verdict per test
    for test in results["results"]["tests"]:
        assert (test["extra_data"]["verdict"] is None) == (test["status"] == "passed")


def _section(text: str, heading: str) -> str:
    return text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_summary_names_each_mistake_once_with_its_students(graded):
    summary = (graded / "summary.md").read_text()
    mistakes = _section(summary, "Mistakes, most made first")
    rows = [line for line in mistakes.splitlines() if line.startswith("| 0")]
    for text, who in (("divided by d - 1", "Cole, Carl"), ("there is no causal mask", "Dove, Dina"),
                      ("decay is added to the gradient", "East, Eddy")):
        found = [row for row in rows if text in row.replace("\\", "")]
        assert len(found) == 1, (text, rows)
        assert who in found[0].replace("\\", "") and "| 1: " in found[0]
    assert "Fox, Fern" not in mistakes  # a package that did not load made no mistake
    tasks = _section(summary, "Tasks")
    layer_norm = next(line for line in tasks.splitlines() if "| layer\\_norm |" in line)
    # right, wrong, not started, could not run: the syntax error in train.py stops chapter 08's tasks only
    assert [int(n) for n in layer_norm.split("|")[3:7]] == [7, 1, 0, 0]
    adamw = next(line for line in tasks.splitlines() if "| adamw\\_step |" in line)
    assert [int(n) for n in adamw.split("|")[3:7]] == [6, 1, 0, 1]


def test_who_needs_attention_and_why_in_the_summary_and_the_gradebook(graded):
    attention = _section((graded / "summary.md").read_text(), "Needs attention").replace("\\", "")
    line = {row.split("|")[1].strip(): row.split("|")[2].strip() for row in attention.splitlines()
            if row.startswith("| ") and "---" not in row and "student" not in row}
    assert set(line) == {"Fox, Fern", "Hill, Hugh", "Keel, Kim"}
    assert re.fullmatch(r"did not load: hero_transformer/train.py line \d+ raised SyntaxError", line["Fox, Fern"])
    assert "zip" in line["Hill, Hugh"] and line["Keel, Kim"] == "missing: nothing was uploaded"
    with (graded / "gradebook.csv").open(encoding="utf-8", newline="") as handle:
        notes = {row["student"]: row["note"] for row in csv.DictReader(handle)}
    assert notes["Fox, Fern"] == line["Fox, Fern"]
    assert notes["Keel, Kim"] == "nothing was uploaded" and notes["Berg, Anna"] == ""


def test_the_look_alike_pair_is_named_by_its_students_the_earlier_first(graded):
    pairs = _section((graded / "summary.md").read_text(), "Look-alike uploads").replace("\\", "")
    row = next(line for line in pairs.splitlines() if "Isle, Ivy" in line)
    assert row.index("Isle, Ivy") < row.index("Jade, Jack") and "#1009" in row and "#1012" in row


def test_report_html_is_one_page_with_its_pictures_inside(graded):
    page = (graded / "report.html").read_text()
    assert page.startswith("<!doctype html>") and "<svg" in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing fetched
    assert page.count('class="score"') == 8 * 4  # a dot per graded upload and chapter
    for who in ("Cole, Carl", "Dove, Dina", "East, Eddy", "Fox, Fern", "Keel, Kim"):
        assert who in page


def test_a_hang_and_a_runner_failure_are_said_in_one_line():
    from grader.grade_class.class_report import attention_cause

    def record(*verdicts):
        return {"status": "graded", "checks": [{"verdict": v} for v in verdicts]}

    hung = {"kind": "timeout", "task": "decode", "during": "probe"}
    assert attention_cause(record(hung, hung, None)) == "hung in decode (no answer within the time limit)"
    assert attention_cause(record({"kind": "timeout", "task": "decode", "during": "import"})).startswith(
        "did not load: importing the package took too long")
    assert attention_cause(record({"kind": "runner_failed"})).startswith("some checks could not be run by the grader")
    assert attention_cause(record({"kind": "mistake", "task": "gelu", "mistake": "tanh"}, None)) == ""
    table = {"kind": "public_only", "task": "gelu", "on": [matches_reference.name]}
    assert attention_cause(record(table, table, {"kind": "crash", "task": "gelu"})).startswith(
        "passes the published inputs only in gelu")


# ------------------------------------------------------------------ as a TA sees it

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# What the page looks like once laid out, written into the page by the browser itself.
LAYOUT_PROBE = """<script>
window.addEventListener("load", () => {
  const wide = [...document.querySelectorAll("table, svg, p, h1, h2")]
    .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1).map(e => e.tagName + (e.id ? "#" + e.id : ""));
  const dots = [...document.querySelectorAll("circle.score")]
    .filter(c => { const r = c.getBoundingClientRect(); return r.width > 0 && r.height > 0; }).length;
  const rows = [...document.querySelectorAll("#mistakes tr")].slice(1).map(r => r.innerText.replace(/\\s+/g, " "));
  const pre = document.createElement("pre"); pre.id = "layout";
  pre.textContent = JSON.stringify({wide, dots, rows, scroll: document.documentElement.scrollWidth,
                                    width: document.documentElement.clientWidth});
  document.body.appendChild(pre);
});
</script>"""


def _laid_out(page: Path, tmp_path: Path, width: int = 1000) -> dict:
    probed = tmp_path / page.name
    probed.write_text(page.read_text().replace("</body>", LAYOUT_PROBE + "</body>"))
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update", "--disable-sync",
                          f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={width},900",
                          "--virtual-time-budget=5000", "--dump-dom", probed.as_uri()],
                         capture_output=True, text=True, timeout=300)
    found = re.search(r'<pre id="layout">(.*?)</pre>', dom.stdout, re.S)
    assert found, dom.stdout[-2000:] + dom.stderr[-2000:]
    return json.loads(html.unescape(found[1]))


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here: .ci/run installs Debian's chromium where it can "
                                              "(apt-get, as root); `apt-get install chromium` does it by hand")
def test_the_report_and_a_feedback_page_as_a_browser_lays_them_out(graded, tmp_path):
    report = _laid_out(graded / "report.html", tmp_path)
    assert report["wide"] == [] and report["scroll"] <= report["width"], report  # nothing runs off the page
    assert report["dots"] == 8 * 4  # the strip plot is drawn: a dot per graded upload and chapter
    assert len(report["rows"]) == 3 and any("no causal mask" in row and "Dove, Dina" in row for row in report["rows"])
    narrow = _laid_out(graded / "report.html", tmp_path, width=640)  # a laptop's half screen
    assert narrow["wide"] == [], narrow
    feedback = _laid_out(graded / "feedback" / "carlcole.html", tmp_path)
    assert feedback["wide"] == [], feedback
    assert "Fix first" in (graded / "feedback" / "carlcole.md").read_text()
