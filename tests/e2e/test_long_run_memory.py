"""The long-run memory check: a run of hours must keep its memory flat, so a run with 2.5 ms
intervals for 15 s (6,000 intervals: a 1-s-interval run of 100 minutes, as far as per-interval
work goes) samples the tilemark process's resident memory and allows no growth after its first
2,000 intervals (5 s) beyond GROWTH_BOUND. On the null backend at a low
open-loop rate, so the storage costs nothing; the interval log, the live view's plain lines,
and the snapshot path are the same as any run's.
Figures: bench/results/2026-11-23-long-run-memory.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

MiB = 1 << 20
DURATION_S = 15
INTERVAL_MS = 2.5
SETTLE_S = 5.0  # imports, first allocations, the allocator's and histograms' first fill
# Observed on the development VM with 10 ms intervals: 1.8 to 4.3 MiB between 10 s and 60 s,
# flat after about 50 s (bench/results/2026-11-23-long-run-memory.md). With 4,000 intervals
# after the first 2,000, a leak of 2 KiB per interval would exceed it.
GROWTH_BOUND = 8 * MiB


def rss(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


@pytest.mark.long_run_memory
@pytest.mark.serial
def test_memory_stays_flat_over_6000_intervals(tmp_path):
    results = tmp_path / "r"
    args = ["run", "--backend", "null", "--target", str(tmp_path / "m.dat"), "--size", "4m",
            "--rw", "randread", "--rate", "2000", "--interval", f"{INTERVAL_MS:g}ms",
            "--duration", str(DURATION_S), "--results", str(results), "--json"]  # fmt: skip
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("tilemark")), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    started = time.monotonic()
    samples: list[tuple[float, int]] = []
    while proc.poll() is None:
        value = rss(proc.pid)
        if value is not None:
            samples.append((time.monotonic() - started, value))
        time.sleep(0.25)
    out, _ = proc.communicate()
    assert proc.returncode == 0
    run_dir = Path(json.loads(out)["run_dir"])
    assert json.loads((run_dir / "run.json").read_text())["status"] == "complete"
    intervals = pq.read_table(run_dir / "intervals.parquet", columns=["interval"])
    assert (
        len(set(intervals.column("interval").to_pylist())) >= 0.99 * DURATION_S * 1000 / INTERVAL_MS
    )

    # While it measures: the process starts measuring a second or two after it starts, so
    # [SETTLE_S, DURATION_S] of its life is inside the measured time. (Sealing the interval
    # log afterwards memory-maps it, which RSS counts; that is the end of the run, not growth.)
    after = [v for t, v in samples if SETTLE_S <= t <= DURATION_S]
    assert len(after) >= 30, samples  # sampled throughout the measured time
    growth = max(after) - after[0]
    print(
        f"RSS at {SETTLE_S:g} s {after[0] / MiB:.1f} MiB, max to {DURATION_S} s "
        f"{max(after) / MiB:.1f} MiB, at {DURATION_S} s {after[-1] / MiB:.1f} MiB: growth "
        f"{growth / MiB:.2f} MiB"
    )
    print(" ".join(f"{t:.0f}s:{v // 1024}KiB" for t, v in samples[::4]))
    assert growth <= GROWTH_BOUND
