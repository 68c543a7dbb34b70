"""SIGINT and SIGTERM in every phase of a command: between two steps of a study, while a target
is filled, in the middle of a verification pass. Each once exited silently or stored the work as
failed (issue 28); now each says so, stores what it did as interrupted and exits 128 + signal."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tilemark.cli import main

from .rigs import (
    in_cgroup,
    ram_loop_device,
    throttled_cgroup,
    tilemark_exe,
)

STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143}
BOTH = pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [tilemark_exe(), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "160"},
    )


def signal_after_line(proc: subprocess.Popen, text: str, signum: int, timeout: float = 60) -> str:
    """Read stderr until a line holding `text`, then send `signum` at once; stderr so far."""
    seen = []
    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not sel.select(timeout=0.5):
            assert proc.poll() is None, (proc.returncode, "".join(seen))
            continue
        line = proc.stderr.readline()
        assert line, f"{text!r} never came: {''.join(seen)}"
        seen.append(line)
        if text in line:
            proc.send_signal(signum)
            return "".join(seen)
    raise AssertionError(f"{text!r} did not come within {timeout} s: {''.join(seen)}")


def finish(proc: subprocess.Popen, before: str) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, before + err


def run_docs(results: Path) -> list[dict]:
    """The runs in the order they started: a run id is its start second plus a random suffix,
    so two runs of one second sort by id in either order."""
    docs = [json.loads(p.read_text()) for p in results.glob("2*/run.json")]
    return sorted(docs, key=lambda d: (d["started_at"], d["run_id"]))


@BOTH
def test_a_signal_between_two_steps_of_a_scale_study_stores_the_step_interrupted(
    tmp_path, signum, capsys
):
    results = tmp_path / "results"
    proc = start(
        "scale", "--target", str(tmp_path / "t.dat"), "--capacity", "64m", "--tiles", "1,2,3",
        "--duration", "0.5", "--warmup", "0", "--interval", "0.1", "--backend", "null",
        "--no-report", "--no-settle", "--results", str(results),
    )  # fmt: skip
    before = signal_after_line(proc, "scale: 2 tiles", signum)
    status, out, err = finish(proc, before)
    assert status == STATUS[signum], err
    assert "Traceback" not in err
    assert "interrupted: the study so far is kept, marked incomplete" in err
    docs = run_docs(results)
    assert [d["status"] for d in docs][:1] == ["complete"]
    # The second step's run, if it started, is stored as interrupted, never failed or running.
    assert all(d["status"] == "incomplete" for d in docs[1:]), [d["status"] for d in docs]
    assert all(d["error"] is None for d in docs), [d["error"] for d in docs]
    assert not list(results.glob("2*/.reserve"))
    (study,) = [json.loads(p.read_text()) for p in results.glob("studies/*/study.json")]
    assert study["complete"] is False
    assert [s["tiles"] for s in study["steps"]] == [1, 2][: len(docs)]
    # The listing in this process: its output is the point here, not a signal.
    capsys.readouterr()
    assert main(["runs", "--results", str(results), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {r["status"] for r in listed} <= {"complete", "incomplete"}


def test_sigterm_while_a_target_is_filled_keeps_the_fill_and_says_so(tmp_path):
    # Writes to the device are held to 8 MB/s: filling 32 MiB takes 4 s, SIGTERM comes in it.
    with (
        ram_loop_device("tilemark-fill", 32 << 20) as dev,
        throttled_cgroup(dev, write_bps=8_000_000) as cg,
    ):
        proc = subprocess.Popen(
            in_cgroup(cg, [
                tilemark_exe(), "run", "--target", dev, "--destroy-data", dev, "--fill",
                "--rw", "randread", "--duration", "1", "--results", str(tmp_path / "results"),
            ]),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        before = signal_after_line(proc, "so reads never hit holes", signal.SIGTERM)
        status, out, err = finish(proc, before)
    assert status == 143, err
    assert "Traceback" not in err
    assert "interrupted while preparing the target; the part already filled is kept" in err
    assert run_docs(tmp_path / "results") == []  # nothing was measured: no run is stored


def verified_run(dev: str, results: Path, capsys) -> Path:
    """A run that wrote and verified `dev`, run in this process (the signal comes later)."""
    capsys.readouterr()
    status = main(
        [
            "run",
            "--target",
            dev,
            "--destroy-data",
            dev,
            "--rw",
            "randwrite",
            "--bs",
            "64k",
            "--verify",
            "--duration",
            "0.5",
            "--interval",
            "0.1",
            "--results",
            str(results),
            "--json",
        ],  # fmt: skip
    )
    out, err = capsys.readouterr()
    assert status == 0, err
    return Path(json.loads(out)["run_dir"])


@BOTH
def test_a_signal_in_the_middle_of_a_verification_pass_stores_the_partial_pass(
    tmp_path, signum, capsys
):
    # Reads from the device are held to 8 MB/s: the pass over 32 MiB takes 4 s.
    with ram_loop_device("tilemark-verify", 32 << 20) as dev:
        run_dir = verified_run(dev, tmp_path / "results", capsys)
        with throttled_cgroup(dev, read_bps=8_000_000) as cg:
            proc = subprocess.Popen(
                in_cgroup(cg, [tilemark_exe(), "verify", str(run_dir), "--threads", "1"]),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            # Signal once the progress shows a MiB or more read ("0 B of 32 MiB" first).
            before = signal_after_line(proc, " MiB of 32 MiB", signum)
            status, out, err = finish(proc, before)
    assert status == STATUS[signum], err
    assert "Traceback" not in err
    name = signal.Signals(signum).name
    assert f"interrupted by {name}: the pass so far is kept, marked incomplete" in err
    (stored,) = json.loads((run_dir / "run.json").read_text())["verify_passes"]
    assert stored["complete"] is False and stored["interrupted_by"] == name
    assert 0 < stored["bytes"] < 32 << 20
