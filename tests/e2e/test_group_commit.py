"""Group commit (`sync = "fdatasync:group"`, engine worker/group.rs) on a device of known
capacity: a log whose commits arrive faster than the device takes writes keeps up by joining
them, as a database's log does, where a write and flush per commit falls behind.

The device is a loop device over RAM behind a cgroup v1 blkio throttle of 200 direct writes a
second; the commits come at 600 a second.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .engine_helpers import MiB, hist
from .rigs import ram_loop_device, throttled_cgroup

pytestmark = [pytest.mark.root, pytest.mark.loopdev, pytest.mark.blkio]

WRITE_IOPS = 200
COMMITS = 600
SECONDS = 3

RUNNER = """
import json, sys
cg, plan, dev = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
with open(cg + "/cgroup.procs", "w") as f:
    f.write("0")  # this process joins the throttled group
from tilemark import engine

def writes():  # writes completed by the device (/sys/block/DEV/stat: field 5)
    return int(open(f"/sys/block/{dev}/stat").read().split()[4])

before = writes()
h = engine.start(plan)
while not h.wait(0.2):
    h.poll()
h.poll()
print(json.dumps({"result": h.result(), "device_writes": writes() - before}))
"""


def run_log(cg: Path, dev: str, sync: dict) -> dict:
    plan = {
        "backend": "uring",
        "threads": 1,
        "interval_ms": 1000,
        "duration_ms": SECONDS * 1000,
        "targets": [{"path": dev, "offset": 0, "length": 32 * MiB, "direct": True}],
        "streams": [
            {
                "name": "log",
                "regions": [{"target": 0, "length": 32 * MiB}],
                "read_pct": 0.0,
                "sizes": [[4096, 1.0]],
                "pattern": {"kind": "sequential"},
                "random_pct": 0.0,
                "align": 4096,
                "qd": 8,
                "arrival": {"kind": "open", "rate_iops": COMMITS, "dist": "constant"},
                "sync": sync,
                "seed": 3,
            }
        ],
    }
    out = subprocess.run(
        [sys.executable, "-c", RUNNER, str(cg), json.dumps(plan), Path(dev).name],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.serial  # the schedule is timed; another test's CPU burst would blur it
def test_a_log_faster_than_its_device_keeps_up_by_joining_its_commits():
    with ram_loop_device("tilemark-test-group", 32 * MiB) as dev:
        with throttled_cgroup(dev, write_iops=WRITE_IOPS) as cg:
            group = run_log(cg, dev, {"kind": "fsync", "every": 1, "data": True, "group": True})
            alone = run_log(cg, dev, {"kind": "fsync", "every": 1, "data": True})

    s = group["result"]["streams"][0]
    commits, flushes = s["write"]["ops"], s["sync"]["ops"]
    # Every commit is served (but the few waiting at the end), at its rate...
    assert commits >= 0.95 * COMMITS * SECONDS, commits
    assert s["write"]["bytes"] == commits * 4096
    # ...in fewer writes than commits. The throttle counts a flush as a write too (and so does
    # the device's stat), so a round is two of its 200 a second: about 100 rounds a second.
    assert not s["write"]["errors"] and not s["sync"]["errors"]
    assert flushes < 0.3 * commits, (flushes, commits)
    assert group["device_writes"] <= 1.15 * WRITE_IOPS * SECONDS + 10, group["device_writes"]
    assert group["device_writes"] >= 2 * flushes * 0.9, (group["device_writes"], flushes)
    # A commit waits for the round in flight and its own: a few rounds at most (the throttle
    # lets IOs through in bunches: p50 36 ms, p99 86 ms measured), not growing with the run.
    response = hist(s["write"]["response"])
    assert response.percentile(99) < 200e6, response.percentile(99)

    # Alone, each commit a write and a flush: about 100 of them a second are the most the
    # device does, and the commits behind wait longer and longer (seconds by the end).
    a = alone["result"]["streams"][0]
    assert a["write"]["ops"] <= 0.6 * WRITE_IOPS * SECONDS + 10, a["write"]["ops"]
    assert hist(a["write"]["response"]).percentile(99) > 1e9
