"""`tilemark run --until-steady`: rounds, the SNIA PTS rule, the summary over the steady window,
rates that cannot be reached, a device whose capacity changes mid-run, and Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tilemark.cli import main

from .rigs import dev_numbers, loop_device, throttled_cgroup

pytestmark = [pytest.mark.root, pytest.mark.loopdev, pytest.mark.blkio, pytest.mark.cost(15)]

MiB = 1 << 20
TILEMARK = str(Path(sys.executable).with_name("tilemark"))
ROUNDS = ["--until-steady", "--round", "0.5s", "--interval", "0.1s"]


def cli(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def run_doc(out: str) -> dict:
    return json.loads((Path(json.loads(out)["run_dir"]) / "run.json").read_text())


def test_an_open_loop_run_is_steady_and_its_summary_covers_the_last_five_rounds(tmp_path, capsys):
    args = ["run", "--target", str(tmp_path / "t.dat"), "--size", "8m", "--rw", "randread"]
    args += ["--rate", "2000", *ROUNDS, "--max-rounds", "20"]
    status, out, err = cli(capsys, *args, "--results", str(tmp_path / "r"), "--json")
    assert status == 0, err
    doc = run_doc(out)
    assert doc["status"] == "complete"
    summary = doc["summary"]
    st = summary["steady_state"]
    assert st["steady"] and st["metric"] == "iops" and st["round_s"] == 0.5
    rounds = st["rounds"]
    assert 5 <= len(rounds) < 20
    assert [r["index"] for r in rounds] == list(range(1, len(rounds) + 1))
    for r in rounds:
        assert r["end_s"] - r["start_s"] == pytest.approx(0.5, abs=0.02)
        assert r["value"] == pytest.approx(2000, rel=0.05)
    window = st["window"]
    assert (window["first_round"], window["last_round"]) == (len(rounds) - 4, len(rounds))
    assert window["range_pct"] <= 20 and abs(window["slope_pct"]) <= 10
    assert window["mean"] == pytest.approx(sum(r["value"] for r in rounds[-5:]) / 5)
    # The summary is the window's: its IOs are exactly the last five rounds' IOs.
    reads = sum(s["read"]["ops"] for s in summary["streams"])
    assert reads == sum(r["ops"] for r in rounds[-5:])
    assert summary["duration_s"] == pytest.approx(2.5, abs=0.05)
    # The whole run also measured while it was being stopped (at most a poll or two).
    assert 0.5 * len(rounds) - 0.05 <= summary["whole_run"]["duration_s"] < 0.5 * len(rounds) + 0.5
    assert st["rate"]["reached"]
    assert doc["summary"]["ended_by"] == "steady"
    assert f"steady after {len(rounds)} rounds" in st["verdict"]

    # The report draws the rounds with the window, its band and slope line.
    from tilemark.report.data import RunData
    from tilemark.report.run_report import run_report

    report = run_report(RunData.load(Path(json.loads(out)["run_dir"])))
    figure = next(f for f in report.figures() if f.id == "steady-rounds")
    spec = json.dumps(figure.spec())
    assert "measurement window" in spec and "least-squares fit" in spec
    assert "110% of window mean" in spec and "90% of window mean" in spec
    first, last = window["first_round"], window["last_round"]
    assert f"(the steady window, rounds {first}-{last})" in report.verdict.headline
    assert st["verdict"] in report.verdict.notes


@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (["--until-steady", "--round", "0"], "--round must be above 0, got '0'."),
        (
            ["--until-steady", "--max-rounds", "4"],
            "--max-rounds must be an integer from 5 to 10000 (the steady-state window needs 5 "
            "rounds), got '4'.",
        ),
        (["--round", "1s"], "--round applies to steady-state runs; add --until-steady."),
        (["--max-rounds", "9"], "--max-rounds applies to steady-state runs; add --until-steady."),
        (["--metric", "p99"], "--metric applies to steady-state runs; add --until-steady."),
        (["--until-steady", "--metric", "mbps"], "--metric must be one of iops, p99, got 'mbps'."),
        (
            ["--until-steady", "--duration", "5"],
            "--duration does not apply with --until-steady: the run measures until it is "
            "steady, at most --max-rounds rounds of --round.",
        ),
        (
            ["--until-steady", "--round", "1.5s"],
            "--round 1.5s must be a whole number of snapshot intervals (--interval 1s), so every "
            "round has the same length.",
        ),
    ],
)
def test_bad_steady_state_options_are_one_sentence(tmp_path, capsys, args, sentence):
    target = tmp_path / "t.dat"
    status, _, err = cli(capsys, "run", "--target", str(target), "--size", "4m", *args)
    assert status == 2
    assert err.strip() == f"tilemark: error: {sentence}"
    assert not target.exists()


def _start(cg: Path, *args: str) -> subprocess.Popen:
    script = f"echo $$ > {cg}/cgroup.procs; exec {TILEMARK} " + " ".join(args)
    return subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


def _wait_for(proc: subprocess.Popen, text: str) -> list[str]:
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if text in line:
            return seen
    raise AssertionError("".join(seen))


def test_a_device_whose_capacity_drops_mid_run_is_steady_only_at_the_new_level(tmp_path):
    """A blkio-throttled loop device: 400 read IOPS, cut to 200 during round 3. No window with
    rounds from before the cut is steady; the run settles on 200 IOPS afterwards."""
    with loop_device(tmp_path / "img", 16 * MiB) as dev:
        with throttled_cgroup(dev, read_iops=400) as cg:
            proc = _start(cg, "run", "--target", dev, "--rw", "randread", "--qd", "4",
                          *ROUNDS, "--max-rounds", "20", "--results", str(tmp_path / "r"),
                          "--json")  # fmt: skip
            seen = _wait_for(proc, "round 2/20")
            (cg / "blkio.throttle.read_iops_device").write_text(f"{dev_numbers(dev)} 200\n")
            out, rest = proc.communicate(timeout=60)
    assert proc.returncode == 0, "".join(seen) + rest
    st = run_doc(out)["summary"]["steady_state"]
    rounds = st["rounds"]
    assert st["steady"], st["verdict"]
    assert rounds[0]["value"] == pytest.approx(400, rel=0.15)
    assert rounds[-1]["value"] == pytest.approx(200, rel=0.15)
    assert st["window"]["first_round"] >= 3  # never a window that holds a round at 400
    assert len(rounds) >= 7
    assert st["window"]["mean"] == pytest.approx(200, rel=0.10)


def test_an_unreachable_open_loop_rate_is_not_steady_at_that_rate(tmp_path):
    with loop_device(tmp_path / "img", 16 * MiB) as dev:
        with throttled_cgroup(dev, read_iops=200) as cg:
            proc = _start(cg, "run", "--target", dev, "--rw", "randread", "--rate", "1000",
                          *ROUNDS, "--max-rounds", "5", "--results", str(tmp_path / "r"),
                          "--json")  # fmt: skip
            out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    summary = run_doc(out)["summary"]
    st = summary["steady_state"]
    assert not st["steady"]
    assert not st["rate"]["reached"]
    assert st["rate"]["achieved_pct"] < 40
    assert st["verdict"].startswith("the requested open-loop rate was not reached")
    assert st["verdict"] in summary["notes"]


def test_ctrl_c_in_round_seven_keeps_rounds_one_to_six(tmp_path):
    """Poisson arrivals at 20 IO/s: about 10 IOs per round, far too noisy to be steady."""
    args = ["run", "--target", str(tmp_path / "t.dat"), "--size", "4m", "--rw", "randread",
            "--rate", "20", "--arrival", "poisson", *ROUNDS, "--max-rounds", "10",
            "--results", str(tmp_path / "r"), "--json"]  # fmt: skip
    proc = subprocess.Popen([TILEMARK, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    seen = _wait_for(proc, "round 6/10")
    proc.send_signal(signal.SIGINT)
    out, rest = proc.communicate(timeout=60)
    assert proc.returncode == 130, "".join(seen) + rest
    doc = run_doc(out)
    assert doc["status"] == "interrupted" or not doc["complete"]
    st = doc["summary"]["steady_state"]
    assert [r["index"] for r in st["rounds"]] == [1, 2, 3, 4, 5, 6]
    assert not st["steady"]
    assert st["verdict"].startswith("not steady after 6 rounds")


@pytest.mark.parametrize(
    "what", [["--size", "4m"], ["--tiles", "1", "--capacity", "16m"]], ids=["workload", "tiles"]
)
def test_a_repeat_refuses_until_steady_in_one_sentence(tmp_path, capsys, what):
    target = tmp_path / "t.dat"
    status, _, err = cli(capsys, "repeat", "2", "--target", str(target), *what,
                         "--until-steady")  # fmt: skip
    assert status == 2
    assert err.strip() == (
        "tilemark: error: --until-steady applies to `tilemark run` and `tilemark scale`; each "
        "repetition of a repeat measures for --duration."
    )
    assert not target.exists()
