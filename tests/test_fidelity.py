"""Fidelity of two IO streams (trace/fidelity.py, docs/fidelity.md): each property's accuracy
moves with exactly the difference it names, and characterizing is the same in any batch size."""

from __future__ import annotations

import numpy as np
import pytest

from tilemark.trace import fidelity
from tilemark.trace.schema import TraceMeta, TraceWriter, open_trace

MIB = 1 << 20


def write_trace(
    path, *, n=20_000, rate=2000.0, read_pct=70.0, sequential=False, size=8192, poisson=False,
    offset_shift=0, latency_ns=200_000, seed=1, sync_share=0.0, bursty=False,
):  # fmt: skip
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1e9 / rate, n) if poisson else np.full(n, 1e9 / rate)
    if bursty:  # the same mean rate, in 1000-IO bursts at 20x the rate with idle gaps between
        gaps = np.full(n, 1e9 / rate / 20)
        gaps[::1000] += 1000 * (1e9 / rate) * (19 / 20)
    issue = np.cumsum(gaps).astype(np.int64)
    issue -= issue[0]
    if sequential:
        offset = (np.arange(n) * size) % (256 * MIB)
    else:
        offset = rng.integers(0, 256 * MIB // size, n) * size
    reads = rng.random(n) < read_pct / 100
    ops = np.where(reads, "read", "write")
    sync = (~reads) & (rng.random(n) < sync_share)
    with TraceWriter(path, TraceMeta(source="synthetic")) as w:
        w.write({
            "issue_ns": issue,
            "complete_ns": issue + latency_ns,
            "latency_ns": np.full(n, latency_ns),
            "op": ops.tolist(),
            "offset": offset + offset_shift,
            "size": np.full(n, size),
            "sync": sync,
        })  # fmt: skip
    return open_trace(path)


def scores(a, b, **kw) -> dict[str, float | None]:
    accs = fidelity.compare(fidelity.characterize(a), fidelity.characterize(b), **kw)
    return {x.property: x.accuracy for x in accs}


def test_a_stream_against_itself_scores_one_everywhere(tmp_path):
    t = write_trace(tmp_path / "a.parquet", poisson=True)
    s = scores(t, t, same_device=True)
    assert set(s) == set(fidelity.PROPERTIES)
    assert all(v == pytest.approx(1.0) for v in s.values()), s


def test_characterizing_in_small_batches_gives_the_same_numbers(tmp_path):
    t = write_trace(tmp_path / "a.parquet", n=5000, poisson=True, sequential=False)
    whole = fidelity.characterize(t)
    pieces = fidelity.characterize(t, batch_rows=333)
    for attr in ("ios", "reads", "writes", "bytes", "blocks_touched"):
        assert getattr(whole, attr) == getattr(pieces, attr), attr
    for attr in ("sizes", "gaps", "seeks", "runs", "outstanding", "latency"):
        assert getattr(whole, attr).bins == getattr(pieces, attr).bins, attr
    for width in fidelity.WINDOWS_NS:
        assert whole.windows[width].bins == pieces.windows[width].bins, width
    assert whole.region_ios.tolist() == pieces.region_ios.tolist()


def test_each_property_sees_its_own_difference(tmp_path):
    base = write_trace(tmp_path / "base.parquet")
    # Offsets moved by a constant: placement is the same shape, so it scores 1.
    shifted = write_trace(tmp_path / "shift.parquet", offset_shift=64 * MIB)
    s = scores(base, shifted)
    assert s["seek_distance"] == s["sequential_runs"] == s["footprint"] == pytest.approx(1.0)
    assert s["latency"] is None  # different devices unless said otherwise
    # Read share 70% against 30%: accuracy 1 - 0.4, and nothing else about placement moves.
    mix = scores(base, write_trace(tmp_path / "mix.parquet", read_pct=30.0))
    assert mix["read_share"] == pytest.approx(0.6, abs=0.02)
    assert mix["rate"] == pytest.approx(1.0, abs=1e-3)
    # Poisson against constant arrivals at the same rate: the gaps differ, both are smooth.
    poisson = scores(base, write_trace(tmp_path / "p.parquet", poisson=True))
    assert poisson["rate"] > 0.97
    assert poisson["interarrival"] < 0.7 and poisson["burstiness"] > 0.85
    # Bursts at 20x the rate with idle gaps: the same mean rate, very different bursts.
    bursts = scores(base, write_trace(tmp_path / "b.parquet", bursty=True))
    assert bursts["rate"] > 0.93  # its last idle gap is after its last IO: not in its duration
    assert bursts["burstiness"] < 0.5 and bursts["idle"] < 0.9 and bursts["interarrival"] < 0.2
    # Sequential against random placement: seeks and runs are as far apart as can be.
    seq = scores(base, write_trace(tmp_path / "s.parquet", sequential=True))
    assert seq["seek_distance"] < 0.05 and seq["sequential_runs"] < 0.05
    # Half the rate: rate and throughput accuracy 0.5.
    slow = scores(base, write_trace(tmp_path / "slow.parquet", rate=1000.0))
    assert slow["rate"] == pytest.approx(0.5, abs=0.01)
    assert slow["throughput"] == pytest.approx(0.5, abs=0.01)
    # Sync writes: half of the writes carry the flag.
    synced = scores(base, write_trace(tmp_path / "sync.parquet", sync_share=0.5))
    assert synced["sync_share"] == pytest.approx(0.5, abs=0.03)
    # Latency on the same device: 0.2 ms against 2 ms moves it all.
    lat = scores(
        base, write_trace(tmp_path / "lat.parquet", latency_ns=2_000_000), same_device=True
    )
    assert lat["latency"] == pytest.approx(0.0, abs=1e-9)


def test_outstanding_counts_ios_in_flight(tmp_path):
    # 1000 IOs/s each taking 3.5 ms: every IO is issued with 3 others in flight (4 with itself).
    t = write_trace(tmp_path / "q.parquet", n=2000, rate=1000.0, latency_ns=3_500_000)
    c = fidelity.characterize(t, batch_rows=100)
    settled = {k: v for k, v in c.outstanding.bins.items() if v > 10}
    assert settled == {2: pytest.approx(1997, abs=1)}  # bin 2: 3..4 in flight
