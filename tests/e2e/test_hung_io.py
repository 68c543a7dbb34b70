"""A device that stops answering: the engine stops the run by itself and names the hung IOs."""

from __future__ import annotations

import time

import pytest

from .engine_helpers import MiB, plan, run, stream
from .rigs import failing_storage

READ_DELAY_S = 4
IO_TIMEOUT_MS = 300


@pytest.mark.parametrize("backend", ["uring", "psync"])
def test_reads_slower_than_the_io_timeout_stop_the_run_as_hung(tmp_path, backend):
    with failing_storage(
        tmp_path / "mnt", "16M", f"rdelay={READ_DELAY_S}", nbd_filter="delay"
    ) as disk:
        target = [{"path": str(disk), "offset": 0, "length": 16 * MiB, "direct": True}]
        p = plan(
            disk,
            [stream("reader", length=16 * MiB, qd=1)],
            targets=target,
            backend=backend,
            threads=1,
            interval_ms=100,
            duration_ms=60_000,
            io_timeout_ms=IO_TIMEOUT_MS,
        )
        t0 = time.monotonic()
        snaps, result = run(p)
        elapsed = time.monotonic() - t0
    # Every read takes 4 s: the first one is still outstanding when it passes 0.3 s.
    assert result["stop_reason"] == "hung"
    assert result["complete"] is False
    assert result["hung_count"] == 1
    for io in result["hung"]:
        assert io["stream"] == 0 and io["op"] == "read" and io["len"] == 4096
        assert io["offset"] % 4096 == 0 and io["offset"] < 16 * MiB
        assert io["age_ns"] >= IO_TIMEOUT_MS * 1_000_000
    assert result["streams"][0]["read"]["ops"] == 0
    # The engine gave up on them and returned long before the device answered.
    assert elapsed < READ_DELAY_S - 1, elapsed
    # Snapshots showed the IOs ageing before the run stopped.
    ages = [s["streams"][0]["oldest_inflight_ns"] for s in snaps]
    assert ages[0] > 0
    assert ages == sorted(ages) and ages[-1] > ages[0], ages


@pytest.mark.parametrize("timeout_s", [1, 2])
def test_a_hung_io_stops_the_run_within_the_timeout_plus_one_interval(tmp_path, timeout_s):
    """Issue 28: the run stopped at twice --io-timeout (2, 3, 5 s -> 4, 6, 10 s): after the
    hang was seen, the drain waited a second full timeout for IOs already given up on."""
    interval_s = 0.25
    with failing_storage(tmp_path / "mnt", "16M", "rdelay=20", nbd_filter="delay") as disk:
        target = [{"path": str(disk), "offset": 0, "length": 16 * MiB, "direct": True}]
        p = plan(
            disk,
            [stream("reader", length=16 * MiB, qd=4)],
            targets=target,
            threads=1,
            interval_ms=int(interval_s * 1000),
            duration_ms=60_000,
            io_timeout_ms=timeout_s * 1000,
        )
        t0 = time.monotonic()
        _, result = run(p)
        elapsed = time.monotonic() - t0
    assert result["stop_reason"] == "hung" and result["hung_count"] == 4
    assert elapsed < timeout_s + interval_s + 0.2, elapsed
