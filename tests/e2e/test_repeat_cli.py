"""`tilemark repeat` as a process: interrupted repetitions, pauses and --between commands keep
what ran; bad input is one sentence with exit 2 and nothing written."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from tilemark.cli import main
from tilemark.report import build_report
from tilemark.report.data import load_source

from .rigs import tilemark_exe

pytestmark = [pytest.mark.cost(15)]


def args(tmp: Path, *extra: str) -> list[str]:
    return [
        tilemark_exe(), "repeat", *extra, "--target", str(tmp / "t.dat"), "--size", "16m",
        "--rw", "randread", "--qd", "4", "--interval", "0.1", "--results", str(tmp / "results"),
        "--no-report",
    ]  # fmt: skip


def study(tmp: Path) -> dict:
    (path,) = (tmp / "results" / "studies").glob("*/study.json")
    return json.loads(path.read_text())


def interrupt_when(proc: subprocess.Popen, text: str, signum: int = signal.SIGINT) -> str:
    """Send `signum` once stderr shows `text`; all of stderr."""
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if text in line:
            proc.send_signal(signum)
            break
    return "".join(seen) + proc.stderr.read()


def test_ctrl_c_in_repetition_7_of_10_keeps_1_to_6(tmp_path):
    cmd = args(tmp_path, "10", "--duration", "0.6", "--backend", "null")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The live view's second interval line of repetition 7: the run is under way.
    stderr = interrupt_when(proc, "repeat: repetition 7 of 10")
    out = proc.stdout.read() if proc.stdout else ""
    assert proc.wait(timeout=60) == 130, stderr
    assert "Traceback" not in stderr
    doc = study(tmp_path)
    assert doc["complete"] is False
    steps = doc["steps"]
    assert [s["repetition"] for s in steps][:6] == [1, 2, 3, 4, 5, 6]
    assert all(s["complete"] for s in steps[:6])
    assert doc["repetitions_complete"] == [1, 2, 3, 4, 5, 6]
    # The seventh, if it started, is kept as an incomplete run and not in the trend.
    assert all(not s["complete"] for s in steps[6:]) and len(steps) <= 7
    iops = next(m for m in doc["metrics"] if m["metric"] == "IOPS")
    assert len(iops["values"]) == 6 and iops["trend"]["n"] == 6
    assert "incomplete: 6 of 10 repetitions complete" in out
    for s in steps:
        assert (tmp_path / "results" / s["run_id"] / "run.json").exists()


def test_a_failing_between_command_stops_with_its_status(tmp_path):
    cmd = args(tmp_path, "3", "--duration", "0.3", "--backend", "null")
    cmd += ["--between", "echo cleaning up; exit 5"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 5, done.stderr
    assert "cleaning up" in done.stderr
    assert (
        "repeat stopped: the --between command failed with exit status 5 before repetition 2"
        in done.stderr
    )
    doc = study(tmp_path)
    assert doc["complete"] is False and len(doc["steps"]) == 1 and doc["steps"][0]["complete"]
    assert "exit status 5" in doc["stopped"]


def test_ctrl_c_during_the_pause_keeps_what_ran(tmp_path):
    cmd = args(tmp_path, "3", "--duration", "0.3", "--backend", "null", "--pause", "1h")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stderr = interrupt_when(proc, "pausing 1:00:00 before repetition 2")
    assert proc.wait(timeout=30) == 130, stderr
    doc = study(tmp_path)
    assert doc["complete"] is False and [s["repetition"] for s in doc["steps"]] == [1]
    assert doc["stopped"] == "interrupted during the pause before repetition 2"


def test_the_repeat_report_draws_the_decay_curve_and_lists_labels(tmp_path, capsys, monkeypatch):
    cmd = args(tmp_path, "3", "--duration", "0.3", "--backend", "null", "--label", "before")
    cmd.remove("--no-report")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    doc = study(tmp_path)
    report = build_report(load_source(str(tmp_path / "results" / "studies" / doc["study_id"])))
    assert report.title.endswith(f"repeat study {doc['study_id']} (before)")
    assert report.verdict.headline.startswith(f"before: {doc['verdict']} over 3 repetitions")
    (curve,) = [f for f in report.figures() if f.id == "decay-curve"]
    rows = [r for rows in curve.spec()["datasets"].values() for r in rows]
    spec = json.dumps(curve.spec())
    assert "trend_pct" in spec and "% of the first repetition" in spec
    assert {r["repetition"] for r in rows if r.get("metric") == "IOPS"} == {1, 2, 3}
    assert (tmp_path / "results" / "studies" / doc["study_id"] / "report.html").stat().st_size
    # export, studies and runs in this process: their output is the point, not a process.
    capsys.readouterr()
    results = str(tmp_path / "results")
    status = main(["export", doc["study_id"], "--csv", str(tmp_path / "csv"), "--results", results])
    assert status == 0, capsys.readouterr().err
    trends = (tmp_path / "csv" / "trends.csv").read_text().splitlines()
    assert trends[0].startswith("study_id,metric,scope,unit,better,headline,repetitions")
    assert any(line.split(",")[1:3] == ["IOPS", "total"] for line in trends[1:])
    repetitions = (tmp_path / "csv" / "repetitions.csv").read_text().splitlines()
    assert sum(",IOPS,total," in line for line in repetitions) == 3
    monkeypatch.setenv("TILEMARK_COLUMNS", "80")
    capsys.readouterr()
    assert main(["studies", "--results", results]) == 0
    listed = capsys.readouterr().out
    assert "before" in listed and doc["verdict"] in listed
    assert main(["runs", "--results", results]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines if not line.startswith("run directories")) <= 80
    assert sum("before, repetition" in line for line in lines) == 3


@pytest.mark.parametrize(
    ("extra", "sentence"),
    [
        (["0"], "N (the number of repetitions) must be an integer from 1 to 1000, got 0."),
        (["-3"], "N (the number of repetitions) must be an integer from 1 to 1000, got -3."),
        (["many"], "N (the number of repetitions) must be an integer from 1 to 1000, got 'many'."),
        (["2", "--pause", "-1h"], "--pause must be a duration"),
        (["2", "--between", " "], "--between must be a shell command, got an empty string."),
        (["2", "--label", ""], "--label must be 1 to 80 printable characters on one line"),
        (["2", "--tiles", "1", "--rw", "read"], "--tiles runs emulated applications"),
    ],
)
def test_bad_input_is_one_sentence_and_writes_nothing(tmp_path, extra, sentence):
    done = subprocess.run(args(tmp_path, *extra), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("tilemark: error: ") and sentence in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "results").exists() and not (tmp_path / "t.dat").exists()
