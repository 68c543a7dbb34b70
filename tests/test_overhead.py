"""summary.overhead (run/overhead.py): CPU per IO, issue lateness and service time above the
device, and the cases where the device's time per IO is not comparable."""

from __future__ import annotations

import pytest

from tilemark.run.overhead import overhead_line, tool_overhead
from tilemark.store.results import PollerModes


def stream(reads: int, read_ms: float, writes: int = 0, write_ms: float = 0.0) -> dict:
    def op(n: int, ms: float) -> dict | None:
        return {"ops": n, "service": {"mean_ms": ms}} if n else None

    return {"read": op(reads, read_ms), "write": op(writes, write_ms)}


def device(reads: int, r_await_ms: float, depth: int = 0, writes: int = 0) -> dict:
    return {"device": "loop7", "depth": depth, "reads": reads, "writes": writes,
            "r_await_ms": r_await_ms, "w_await_ms": None}  # fmt: skip


HOST = {"process_cpu_pct": 50.0, "engine_cpu_pct": 40.0}


def summary(*streams: dict, lateness: dict | None = None) -> dict:
    return {"duration_s": 10.0, "streams": list(streams), "issue_lateness": lateness}


def test_cpu_per_io_is_the_process_cpu_time_over_the_ios():
    # 50% of a CPU for 10 s = 5 s of CPU over 100,000 IOs: 50 us per IO, 40 of them the engine's.
    o = tool_overhead(summary(stream(60_000, 0.1, 40_000, 0.2)), HOST, [])
    assert o["ios"] == 100_000
    assert o["cpu_per_io_us"] == pytest.approx(50.0)
    assert o["engine_cpu_per_io_us"] == pytest.approx(40.0)
    assert o["front_end_cpu_pct"] == pytest.approx(10.0)
    # Both read in clock ticks: an engine a tick above the process is clamped to it.
    o = tool_overhead(summary(stream(1000, 0.1)), {"process_cpu_pct": 5, "engine_cpu_pct": 6}, [])
    assert o["engine_cpu_per_io_us"] == o["cpu_per_io_us"] and o["front_end_cpu_pct"] == 0


def test_the_aggregation_thread_is_neither_the_io_threads_nor_the_front_end():
    host = {**HOST, "aggregate_cpu_pct": 3.0}
    o = tool_overhead(summary(stream(60_000, 0.1, 40_000, 0.2)), host, [])
    assert o["engine_cpu_per_io_us"] == pytest.approx(40.0)
    assert o["aggregate_cpu_pct"] == pytest.approx(3.0)
    assert o["front_end_cpu_pct"] == pytest.approx(7.0)
    assert "its aggregation 3.0% of a CPU; front end 7.0% of a CPU" in overhead_line(o)
    # A tick apart: never more than the process leaves, never a negative front end.
    host = {"process_cpu_pct": 41.0, "engine_cpu_pct": 40.0, "aggregate_cpu_pct": 2.0}
    o = tool_overhead(summary(stream(1000, 0.1)), host, [])
    assert o["aggregate_cpu_pct"] == pytest.approx(1.0) and o["front_end_cpu_pct"] == 0


def test_the_io_threads_poller_modes_are_weighted_by_each_threads_time():
    # Two uring threads: 3 s with spinning allowed all along, 1 s never; batches 100% and 0%.
    poller = [
        PollerModes(seconds=3.0, spin_allowed_pct=100.0, batched_pct=100.0),
        PollerModes(seconds=1.0, spin_allowed_pct=0.0, batched_pct=0.0),
    ]
    o = tool_overhead(summary(stream(1000, 0.1)), HOST, [], poller)
    assert o["spin_allowed_pct"] == pytest.approx(75.0)
    assert o["batched_pct"] == pytest.approx(75.0)
    line = overhead_line(o)
    assert "IO threads spinning allowed 75% of the time, submitting in batches 75%" in line
    # Two threads at 100% are 100%, not a rounding error above it.
    full = [PollerModes(seconds=1.1, spin_allowed_pct=100.0, batched_pct=100.0)] * 3
    o = tool_overhead(summary(stream(1000, 0.1)), HOST, [], full)
    assert o["spin_allowed_pct"] <= 100.0 and o["batched_pct"] <= 100.0
    # Other backends have no poller: nothing said.
    for none in (None, []):
        o = tool_overhead(summary(stream(1000, 0.1)), HOST, [], none)
        assert "spin_allowed_pct" not in o and "spinning" not in overhead_line(o)


def test_service_above_the_device_weights_the_streams_by_their_ios():
    # Streams at 100 us (3,000 IOs) and 200 us (1,000): 125 us by tilemark's clock; the device 90.
    o = tool_overhead(summary(stream(3000, 0.1), stream(1000, 0.2)), HOST, [device(4000, 0.09)])
    (row,) = o["service"]
    assert (row["op"], row["device"], row["ios"], row["device_ios"]) == (
        "read",
        "loop7",
        4000,
        4000,
    )
    assert row["mean_us"] == pytest.approx(125.0)
    assert row["device_mean_us"] == pytest.approx(90.0)
    assert row["above_device_us"] == pytest.approx(35.0)
    line = overhead_line(o)
    assert (
        "reads served in 125 us on average, loop7 itself 90.0 us: 35.0 us above the device" in line
    )


@pytest.mark.parametrize(
    "devices",
    [
        [device(2000, 0.09)],  # a cache absorbed half the reads: its time is not theirs
        [device(4300, 0.09)],  # another tenant's IO is in the device's counts
        [device(4000, 0.09), device(4000, 0.05)],  # two devices serve the targets
        [device(4000, 0.09, depth=1)],  # only a device deeper down
    ],
    ids=["cache", "tenant", "two-devices", "deeper"],
)
def test_no_service_row_where_the_device_did_not_see_the_same_ios(devices):
    o = tool_overhead(summary(stream(4000, 0.1)), HOST, devices)
    assert o["service"] == []


def test_lateness_of_open_loop_ios_is_carried_and_nothing_without_ios():
    late = {"ios": 10, "p50_us": 1.5, "p99_us": 42.0}
    o = tool_overhead(summary(stream(10, 0.1), lateness=late), None, [])
    assert (o["issue_lateness_p50_us"], o["issue_lateness_p99_us"]) == (1.5, 42.0)
    assert "cpu_per_io_us" not in o  # no telemetry: no CPU figure, rather than a wrong one
    assert "issued 1.5 us (p50) / 42.0 us (p99) after their time" in overhead_line(o)
    assert tool_overhead(summary(), HOST, []) is None
    assert overhead_line(None) is None
