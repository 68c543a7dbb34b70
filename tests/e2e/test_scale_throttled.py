"""`tilemark scale` against a device with known capacity: a blkio-throttled loop device.

Each tile asks for 200 read IOPS. With the device capped at 700 IOPS, 3 tiles (600) fit and 4
(800) cannot; with the cap raised to 1,100, 5 fit and 6 do not. The study must find exactly
that, from QoS alone: with fixed-length steps, and with steps that measure until they are
steady (SNIA PTS rounds) and are judged over their steady window.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .engine_helpers import MiB
from .rigs import ram_loop_device, throttled_cgroup

pytestmark = [pytest.mark.root, pytest.mark.loopdev, pytest.mark.blkio, pytest.mark.cost(40)]

PROFILE = """
[profile]
name = "reader"
description = "4 KiB random reads at a fixed rate"
metric = "iops('r')"
metric_unit = "IOPS"

[scale]
iops = 200

[[stream]]
name = "r"
rw = "randread"
bs = "4k"
rate = "iops"
arrival = "constant"
qd = 16

[qos.iops]
stream = "r"
stat = "throughput"
min_fraction = 0.95
per_interval = true

[qos.read_avg]
stream = "r"
op = "read"
stat = "mean"
max_ms = 100
"""


def tilemark() -> str:
    exe = Path(sys.executable).with_name("tilemark")
    return str(exe) if exe.exists() else shutil.which("tilemark") or "tilemark"


# Two 1 s QoS intervals per step: 4 tiles (800 asked of 700) fall short in every interval.
FIXED = ["--tiles", "1..7", "--duration", "2", "--warmup", "0.5", "--qos-interval", "1"]
# Rounds of 1 s (two 0.5 s intervals), at least the 5 of the steady window per step.
UNTIL_STEADY = ["--tiles", "4..7", "--until-steady", "--round", "1s", "--interval", "0.5s",
                "--max-rounds", "12", "--warmup", "0.5"]  # fmt: skip


def scale_in_cgroup(cg: Path, dev: str, workdir: Path, how: list[str]) -> dict:
    cmd = [
        tilemark(), "scale", str(workdir / "tile.toml"), "--target", dev, "--destroy-data", dev,
        "--capacity", "64m", "--confirm", "0", *how, "--results", str(workdir / "results"),
        "--json",
    ]  # fmt: skip
    joined = f'echo 0 > "{cg}/cgroup.procs" && exec "$@"'
    out = subprocess.run(
        ["sh", "-c", joined, "sh", *cmd], capture_output=True, text=True, timeout=300, cwd=workdir
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def test_scale_finds_the_throttled_capacity(tmp_path):
    (tmp_path / "reader.toml").write_text(PROFILE)
    (tmp_path / "tile.toml").write_text(
        '[tile]\nname = "readers"\n[[app]]\nprofile = "reader.toml"\n'
    )
    # The image is in RAM: the throttle is the only limit (not the shared disk's latency).
    with ram_loop_device("tilemark-test-scale", 64 * MiB) as dev:
        with throttled_cgroup(dev, read_iops=700) as cg:
            low = scale_in_cgroup(cg, dev, tmp_path, FIXED)
        with throttled_cgroup(dev, read_iops=1100) as cg:
            high = scale_in_cgroup(cg, dev, tmp_path, UNTIL_STEADY)

    assert low["max_passing_tiles"] == 3, [(s["tiles"], s["failed"]) for s in low["steps"]]
    assert [s["tiles"] for s in low["steps"]] == [1, 2, 3, 4]
    assert any("achieved" in f for f in low["first_failure"]["failed"])
    assert high["max_passing_tiles"] == 5, [(s["tiles"], s["failed"]) for s in high["steps"]]
    # The failing step delivered what the device allows, not what was asked.
    four = low["steps"][-1]
    assert 600 < four["total"]["iops"] < 780, four["total"]
    for study in (low, high):
        for step in study["steps"]:
            assert (tmp_path / "results" / step["run_id"] / "run.json").exists()

    # Until steady: every step measured at least the 5 rounds of the window, and the steps
    # that reached the rule were judged over those 5 rounds only (the summary covers them too).
    assert [s["tiles"] for s in high["steps"]] == [4, 5, 6]
    assert high["until_steady"] == {"round_s": 1.0, "max_rounds": 12, "metric": "iops"}
    for step in high["steps"]:
        st = step["steady"]
        assert 5 <= st["rounds"] <= 12, st
        run = json.loads((tmp_path / "results" / step["run_id"] / "run.json").read_text())
        state = run["summary"]["steady_state"]
        assert len(state["rounds"]) == st["rounds"]
        if state["rule_met"]:
            assert st["judged_over"] == "steady window"
            assert run["summary"]["duration_s"] == pytest.approx(5.0, abs=0.05)
            w = st["window"]
            assert w["last_round"] - w["first_round"] == 4
    six = high["steps"][-1]
    # 1,200 IOPS asked of a 1,100 IOPS device: steady at the cap is not steady at the rate.
    assert not six["steady"]["steady"]
    assert "not reached" in six["steady"]["verdict"]
    assert 1000 < six["total"]["iops"] < 1150, six["total"]
