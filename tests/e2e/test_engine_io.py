"""The engine doing real IO on small files: counts, bytes on disk, rates, latency semantics."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest

from tilemark import engine

from .engine_helpers import MiB, hist, make_file, measured_s, open_loop, plan, run, stream


@pytest.fixture
def data_file(tmp_path):
    return make_file(tmp_path / "target.dat", 16 * MiB)


@pytest.mark.quick
def test_bytes_written_are_what_the_file_holds(data_file):
    before = data_file.read_bytes()
    region = (2 * MiB, 4 * MiB)
    s = stream(
        "seqwrite",
        offset=region[0],
        length=region[1],
        read_pct=0.0,
        sizes=[[65536, 1.0]],
        pattern={"kind": "sequential"},
        qd=4,
        io_limit=region[1],
    )
    _, result = run(plan(data_file, [s], duration_ms=30_000))
    w = result["streams"][0]["write"]
    assert w["ops"] == region[1] // 65536
    assert w["bytes"] == region[1]
    assert result["streams"][0]["read"]["ops"] == 0
    after = data_file.read_bytes()
    lo, hi = region[0], region[0] + region[1]
    assert after[:lo] == before[:lo] and after[hi:] == before[hi:], "only the region changes"
    changed = [after[i : i + 4096] != before[i : i + 4096] for i in range(lo, hi, 4096)]
    assert all(changed), "every 4 KiB block of the region was rewritten"
    blocks = {after[i : i + 4096] for i in range(lo, hi, 4096)}
    assert len(blocks) == region[1] // 4096, "written blocks never repeat (no dedupe)"


def cpu_stall_s() -> float:
    """Seconds in which some runnable task waited for a CPU (PSI), since boot."""
    line = Path("/proc/pressure/cpu").read_text().splitlines()[0]
    return int(line.rsplit("total=", 1)[1]) / 1e6


@pytest.mark.serial
def test_open_loop_rate_is_within_2_percent_when_unsaturated(data_file):
    s = stream("paced", arrival=open_loop(1500.0), qd=32)
    stalled = cpu_stall_s()
    started = time.monotonic()
    snaps, result = run(plan(data_file, [s], duration_ms=3000, interval_ms=500))
    # The share of the run in which runnable tasks waited for a CPU: an IO whose time falls
    # while the engine waits for a CPU cannot be issued on time (other work on the machine).
    stall_share = (cpu_stall_s() - stalled) / (time.monotonic() - started)
    r = result["streams"][0]["read"]
    achieved = r["ops"] / measured_s(result)
    assert abs(achieved - 1500) / 1500 < 0.02, achieved
    full = [x for x in snaps if x["end_ns"] - x["start_ns"] >= 499_000_000]
    for snap in full:
        rate = snap["streams"][0]["read"]["ops"] / ((snap["end_ns"] - snap["start_ns"]) / 1e9)
        assert abs(rate - 1500) / 1500 < 0.05, (snap["interval"], rate)
    # Late = submitted > 1 ms after its intended time; on a busy 2-core VM a few are, and
    # more while other tasks compete for the CPUs.
    late = result["streams"][0]["ios_issued_late"]
    assert late < r["ops"] * (0.05 + stall_share), (late, stall_share)


def _dispersion(snaps: list[dict], index: int) -> tuple[float, float]:
    counts = [x["streams"][index]["read"]["ops"] for x in snaps[1:-1]]
    return statistics.mean(counts), statistics.pvariance(counts) / statistics.mean(counts)


@pytest.mark.serial
def test_poisson_arrivals_have_poisson_counts(data_file):
    # Counts of a Poisson process in fixed windows have variance == mean (dispersion 1);
    # a constant-rate schedule has almost none. 100 ms windows at 2000 IOPS: mean 200.
    # Both streams in one run, one engine thread each: each keeps its own schedule and counts.
    streams = [stream("poisson", arrival=open_loop(2000, "poisson"), qd=64),
               stream("constant", arrival=open_loop(2000), qd=64)]  # fmt: skip
    snaps, _ = run(plan(data_file, streams, backend="null", duration_ms=6000, interval_ms=100))
    mean_p, disp_p = _dispersion(snaps, 0)
    mean_c, disp_c = _dispersion(snaps, 1)
    assert abs(mean_p - 200) < 10 and abs(mean_c - 200) < 2
    assert 0.6 < disp_p < 1.5, disp_p
    # A constant schedule is far below Poisson's 1: 0.02-0.08 on a quiet VM. When other work
    # holds the CPUs, IOs due in a stalled window go out in the next one (0.135 measured with
    # four builds running), still a quarter of the Poisson stream's lowest accepted value.
    assert disp_c < 0.25, disp_c


@pytest.mark.quick
def test_response_time_is_never_below_service_time(data_file):
    s = stream("mix", arrival=open_loop(3000, "poisson"), qd=8, read_pct=70.0)
    snaps, result = run(plan(data_file, [s], duration_ms=2000, interval_ms=500))
    for kind in ("read", "write"):
        tot = result["streams"][0][kind]
        svc, rsp = hist(tot["service"]), hist(tot["response"])
        assert svc.n == rsp.n == tot["ops"] > 0
        assert rsp.sum >= svc.sum
        assert rsp.percentile(50) >= svc.percentile(50) * 0.99
        assert rsp.percentile(99) >= svc.percentile(99) * 0.99
        assert rsp.min >= svc.min


def test_closed_loop_keeps_only_service_time(data_file):
    _, result = run(plan(data_file, [stream(qd=8)], duration_ms=1000))
    r = result["streams"][0]["read"]
    assert r["ops"] > 100 and r["response"] is None and hist(r["service"]).n == r["ops"]


@pytest.mark.serial
def test_thousand_streams_each_with_own_accounting(data_file):
    n = 1000
    streams = [
        stream(f"s{i}", offset=(i % 16) * MiB, length=MiB, arrival=open_loop(20.0), seed=i)
        for i in range(n)
    ]
    _, result = run(plan(data_file, streams, duration_ms=3000))
    assert len(result["streams"]) == n
    per_stream = [s["read"]["ops"] for s in result["streams"]]
    assert all(55 <= ops <= 65 for ops in per_stream), (min(per_stream), max(per_stream))
    assert all(hist(s["read"]["service"]).n == s["read"]["ops"] for s in result["streams"])
    assert abs(sum(per_stream) - 60 * n) / (60 * n) < 0.03


def test_warmup_is_excluded_and_intervals_add_up(data_file):
    snaps, result = run(
        plan(data_file, [stream(qd=4)], warmup_ms=600, duration_ms=1000, interval_ms=250)
    )
    phases = [s["phase"] for s in snaps]
    assert phases[:3] == ["warmup"] * 3 and "measure" in phases
    assert snaps[2]["end_ns"] == 600_000_000, "warm-up ends on its own boundary"
    measured = sum(s["streams"][0]["read"]["ops"] for s in snaps if s["phase"] == "measure")
    assert measured == result["streams"][0]["read"]["ops"] > 0
    assert [s["interval"] for s in snaps] == list(range(len(snaps)))
    assert abs(measured_s(result) - 1.0) < 0.05


def test_stop_keeps_what_was_measured(data_file):
    snaps, result = run(plan(data_file, [stream(qd=4)], duration_ms=None), stop_after_s=0.7)
    assert result["complete"] is False
    assert result["streams"][0]["read"]["ops"] > 0
    assert sum(s["streams"][0]["read"]["ops"] for s in snaps) == result["streams"][0]["read"]["ops"]


@pytest.mark.serial
def test_absolute_start_time_is_honoured(data_file):
    start_at = time.time_ns() + 800_000_000
    t0 = time.monotonic()
    _, result = run(plan(data_file, [stream()], duration_ms=300, start_at_ns=start_at))
    assert abs(result["started_at_ns"] - start_at) < 5_000_000
    assert time.monotonic() - t0 >= 1.0


@pytest.mark.parametrize("backend", ["uring", "psync", "null"])
@pytest.mark.quick
def test_fsync_cadence_and_backends(data_file, backend):
    s = stream(
        "log",
        read_pct=0.0,
        pattern={"kind": "sequential"},
        sync={"kind": "fsync", "every": 4},
        io_limit=400 * 4096,
    )
    _, result = run(plan(data_file, [s], backend=backend, duration_ms=30_000))
    st = result["streams"][0]
    assert st["write"]["ops"] == 400
    assert st["sync"]["ops"] == 100
    assert st["write"]["errors"] == {} and st["sync"]["errors"] == {}
    # The uring thread reports how long its poller ran in each mode; the others have none.
    if backend == "uring":
        (modes,) = result["poller"]
        assert 0 < modes["seconds"] < 30
        assert 0 <= modes["spin_allowed_pct"] <= 100 and 0 <= modes["batched_pct"] <= 100
    else:
        assert result["poller"] == []


def test_dsync_writes_complete(data_file):
    s = stream(
        "log",
        read_pct=0.0,
        pattern={"kind": "sequential"},
        sync={"kind": "dsync"},
        io_limit=64 * 4096,
    )
    _, result = run(plan(data_file, [s], duration_ms=30_000))
    assert result["streams"][0]["write"]["ops"] == 64


@pytest.mark.quick
def test_bad_plan_raises_engine_error_naming_the_field(data_file):
    with pytest.raises(engine.EngineError, match="qd must be 1..4096"):
        engine.start(plan(data_file, [stream(qd=0)]))
    with pytest.raises(engine.EngineError, match="cannot open target /nonexistent/x"):
        engine.start(
            plan(data_file, [stream()], targets=[{"path": "/nonexistent/x", "length": 16 * MiB}])
        )


def test_polling_mode_completes_the_same_work(data_file):
    s = stream("polled", qd=8, io_limit=2000 * 4096)
    _, result = run(plan(data_file, [s], duration_ms=30_000, poll_us=20))
    r = result["streams"][0]["read"]
    assert r["ops"] == 2000 and r["errors"] == {}
    with pytest.raises(engine.EngineError, match="poll_us must be 0..1000000"):
        engine.start(plan(data_file, [s], poll_us=5_000_000))
