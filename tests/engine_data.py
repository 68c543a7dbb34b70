"""Synthetic engine output in the exact format of docs/engine-boundary.md, for unit tests."""

from __future__ import annotations

import random

from tilemark.hist import MAX_VALUE_NS, SUB_BUCKET_BITS, SUB_BUCKETS, Histogram


def hist_json(values_ns: list[int]) -> dict:
    """The engine's JSON histogram of these values.

    Histogram.record's buckets, counted in one pass: the synthetic runs and studies of the
    report tests record millions of values, and a record() call per value was most of their
    time."""
    if not all(type(v) is int and 2 * SUB_BUCKETS <= v <= MAX_VALUE_NS for v in values_ns):
        h = Histogram()
        for v in values_ns:
            h.record(v)
        return h.to_json()
    counts: dict[int, int] = {}
    for v in values_ns:
        shift = v.bit_length() - 1 - SUB_BUCKET_BITS  # tilemark.hist.bucket_index
        idx = SUB_BUCKETS * shift + (v >> shift)
        counts[idx] = counts.get(idx, 0) + 1
    return {
        "n": len(values_ns),
        "sum": sum(values_ns),
        "min": min(values_ns, default=0),
        "max": max(values_ns, default=0),
        "b": [[i, counts[i]] for i in sorted(counts)],
    }


def op(
    service_ns: list[int],
    size: int,
    *,
    response_ns: list[int] | None = None,
    errors: dict[str, int] | None = None,
) -> dict:
    """One op kind's counters: ops, bytes, errors, service and (open loop) response hists."""
    return {
        "ops": len(service_ns),
        "bytes": len(service_ns) * size,
        "errors": dict(errors or {}),
        "service": hist_json(service_ns),
        "response": hist_json(response_ns) if response_ns is not None else None,
    }


def latencies(rng: random.Random, n: int, lo_ns: int, hi_ns: int) -> list[int]:
    """n log-uniform latencies in [lo_ns, hi_ns]."""
    return [int(lo_ns * (hi_ns / lo_ns) ** rng.random()) for _ in range(n)]


def plan(streams: list[dict] | None = None) -> dict:
    """A plan_version 1 plan with one closed-loop and one open-loop (rate_bps) stream."""
    if streams is None:
        streams = [
            stream("oltp.0", arrival={"kind": "closed"}),
            stream(
                "log.0",
                arrival={"kind": "open", "rate_bps": 19456000.0, "dist": "constant"},
                sizes=[[4096, 3.0], [65536, 1.0]],
            ),
        ]
    return {
        "plan_version": 1,
        "backend": "psync",
        "threads": 1,
        "interval_ms": 1000,
        "start_at_ns": None,
        "warmup_ms": 0,
        "duration_ms": 10000,
        "targets": [{"path": "/tmp/tm.dat", "offset": 0, "length": 1 << 30, "direct": True}],
        "streams": streams,
    }


def stream(name: str, *, arrival: dict, sizes: list | None = None) -> dict:
    """One plan stream with the given arrival and size mix."""
    return {
        "name": name,
        "target": 0,
        "offset": 0,
        "length": 1 << 30,
        "read_pct": 70.0,
        "sizes": sizes or [[8192, 1.0]],
        "pattern": {"kind": "random"},
        "random_pct": 100.0,
        "align": 4096,
        "qd": 16,
        "arrival": arrival,
        "burst": None,
        "sync": {"kind": "none"},
        "compress_pct": 0.0,
        "seed": 1,
    }


def snapshot(interval: int, streams: list[dict], *, length_ns: int = 1_000_000_000) -> dict:
    """A measure-phase snapshot starting at interval * 1 s."""
    start = interval * 1_000_000_000
    return {
        "interval": interval,
        "phase": "measure",
        "start_ns": start,
        "end_ns": start + length_ns,
        "streams": streams,
    }


def stream_counters(index: int, lag_max_ns: int = 0, behind_ios: int = 0, **ops: dict) -> dict:
    """A snapshot stream entry; op kinds not given are absent."""
    return {"stream": index, **ops, "lag_max_ns": lag_max_ns, "behind_ios": behind_ios}


def simple_snapshots(count: int, seed: int = 7) -> list[dict]:
    """`count` one-second snapshots: stream 0 reads and writes, stream 1 reads (open loop)."""
    rng = random.Random(seed)
    snaps = []
    for i in range(count):
        read0 = latencies(rng, 50, 100_000, 2_000_000)
        write0 = latencies(rng, 20, 200_000, 4_000_000)
        read1 = latencies(rng, 30, 100_000, 1_000_000)
        snaps.append(
            snapshot(
                i,
                [
                    stream_counters(0, read=op(read0, 8192), write=op(write0, 8192)),
                    stream_counters(
                        1,
                        lag_max_ns=1000 * i,
                        read=op(read1, 4096, response_ns=[v + 50_000 for v in read1]),
                    ),
                ],
            )
        )
    return snaps


def result_for(streams: list[dict], *, seconds: float = 10.0) -> dict:
    """A complete result whose measurement window is `seconds` long, starting 5 s in."""
    start = 5_000_000_000
    return {
        "complete": True,
        "started_at_ns": 1_790_000_000_000_000_000,
        "measure_start_ns": start,
        "measure_end_ns": start + int(seconds * 1e9),
        "streams": streams,
    }
