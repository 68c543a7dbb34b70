"""Jetstress's "tuning" as a knob search (docs/seeds.md): on a loop device whose reads a blkio
cgroup caps at 400 IOs/s, the jetstress-2010 profile alone, searched over its mailboxes, must
find the transfers/s the device sustains within Jetstress's latency limits.

The answer is known: the profile reads 0.6 x 0.12 = 0.072 DB pages per mailbox per second (its
BDM scan is slowed to 0.25 MB/s, about one 256 KiB read a second, so it does not blur the
figure), so at most about (400 - 1) / 0.072 = 5,540 mailboxes fit under the cap. Writes are not
capped. Queueing behind the cap costs latency before it costs throughput, so the answer may lie
below the cap, but never above it, and not far below.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from .engine_helpers import MiB
from .rigs import in_cgroup, ram_loop_device, throttled_cgroup, tilemark_exe

pytestmark = [pytest.mark.root, pytest.mark.loopdev, pytest.mark.blkio, pytest.mark.cost(25)]

CAP = 400
READS_PER_MAILBOX = 0.12 * 0.6
BDM_READS = 0.25e6 / (256 * 1024)


# Serial: in the parallel tier, beside another worker's tests, the 400 reads/s cap did not
# hold (twice on 2026-11-29: 12,000 mailboxes achieved 88.8% of their reads and writes, about
# 700 reads/s), so 6,000 passed above what the cap allows; alone it passed every time.
@pytest.mark.serial
def test_the_knob_search_finds_the_mailboxes_the_read_cap_allows(tmp_path):
    # The image is in RAM: the throttle is the only limit (not the shared disk's latency).
    with ram_loop_device("tilemark-test-jetstress", 64 * MiB) as dev:
        with throttled_cgroup(dev, read_iops=CAP) as cg:
            cmd = [
                tilemark_exe(), "scale", "jetstress-2010", "--knob", "mailboxes",
                "--set", "jetstress-2010.mailboxes=3000", "--set", "jetstress-2010.bdm_mbps=0.25",
                "--knob-precision", "10", "--confirm-runs", "0",
                "--target", dev, "--destroy-data", dev, "--capacity", "64m",
                "--duration", "2", "--max-duration", "3", "--warmup", "0.5",
                "--qos-interval", "1", "--results", str(tmp_path / "results"),
                "--json", "--no-report", "--no-settle",
            ]  # fmt: skip
            out = subprocess.run(
                in_cgroup(cg, cmd), capture_output=True, text=True, timeout=240, cwd=tmp_path
            )
    assert out.returncode == 0, out.stderr[-3000:]
    study = json.loads(out.stdout)
    steps = [(s["value"], s["passed"], s["failed"]) for s in study["steps"]]
    assert study["kind"] == "knob" and study["knob"] == "jetstress-2010.mailboxes", steps
    best, worst = study["max_passing_value"], study["first_failing_value"]
    ceiling = (CAP - BDM_READS) / READS_PER_MAILBOX
    # Never above what the cap allows (5% for the rate's measurement), and not far below it.
    assert 0.6 * ceiling <= best <= 1.05 * ceiling, steps
    assert worst is not None and (worst - best) / best <= 0.10, steps
    # The failing step failed for a Jetstress reason: transactional IOPS short of the target or
    # DB read latency over its limit.
    failed = " ".join(study["first_failure"]["failed"])
    assert "db_read" in failed, failed
    # At the answer the DB reads ran at what the mailboxes ask for, under the cap.
    at_best = next(s for s in study["steps"] if s["value"] == best and s["passed"])
    (app,) = at_best["applications"]
    assert app["metric_total"] >= 0.95 * best
    transfers = app["metric_total"] * 0.12
    assert transfers * 0.6 <= CAP * 1.05
