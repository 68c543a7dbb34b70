"""File streams over a window of their interval snapshots: the engine's per-interval counters
(one OpStats document per stream and operation) merged into totals, and the rows of the
run store's file intervals (one per interval, stream and operation).

A file run measures from its start; the file applications of a tile run start with the block
engine and are judged over its measurement: the intervals whose middle lies between the end of
the warm-up and the end of the block run's measurement (intervals are cut on the block run's
interval a few milliseconds apart, so the boundaries agree; the file run's last, partial
interval, after the block run ended, is left out).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tilemark.files.spec import OPS

FILE_INTERVALS = "file_intervals.parquet"


def merge_op(docs: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
    """OpStats documents summed: ops, bytes, errors by errno, histograms merged."""
    from tilemark.hist import Histogram

    present = [d for d in docs if d]
    out: dict[str, Any] = {
        "ops": sum(int(d.get("ops", 0)) for d in present),
        "bytes": sum(int(d.get("bytes", 0)) for d in present),
        "errors": {},
    }
    for d in present:
        for k, v in (d.get("errors") or {}).items():
            out["errors"][k] = out["errors"].get(k, 0) + v
    out["service"] = Histogram.merged(d.get("service") for d in present).to_json()
    responses = [d.get("response") for d in present if d.get("response") is not None]
    out["response"] = Histogram.merged(responses).to_json() if responses else None
    return out


def in_window(snap: dict[str, Any], from_ns: int, until_ns: int | None) -> bool:
    """True when the interval's middle lies in [from_ns, until_ns)."""
    mid = (int(snap["start_ns"]) + int(snap["end_ns"])) / 2
    return mid >= from_ns and (until_ns is None or mid < until_ns)


def window_totals(
    intervals: Sequence[dict[str, Any]],
    streams: int,
    from_ns: int = 0,
    until_ns: int | None = None,
) -> tuple[list[dict[str, Any]], float]:
    """Per stream the engine-shaped totals ({ops: {op: doc}, skipped: {op: n}, loops: doc})
    of the intervals in the window (in_window), and the seconds they cover."""
    kept = [i for i in intervals if in_window(i, from_ns, until_ns)]
    seconds = sum(int(i["end_ns"]) - int(i["start_ns"]) for i in kept) / 1e9
    out = []
    for k in range(streams):
        docs = [i["streams"][k] for i in kept]
        out.append(
            {
                "ops": {op: merge_op([d["ops"][op] for d in docs]) for op in OPS},
                "skipped": {op: sum(d["skipped"][op] for d in docs) for op in OPS},
                "loops": merge_op([d.get("loops") for d in docs])
                if any(d.get("loops") is not None for d in docs)
                else None,
            }
        )
    return out, seconds


def interval_rows(
    run_id: str,
    intervals: Sequence[dict[str, Any]],
    names: Sequence[str],
    from_ns: int = 0,
    until_ns: int | None = None,
) -> list[dict[str, Any]]:
    """The run store's rows: per interval, stream and operation that did anything (and per
    sequence its loops, op "loop"): ops, ops/s, bytes and latency (service time, or response
    time open loop) in microseconds. Time is seconds since the measurement began."""
    from tilemark.hist import latency_hist

    rows = []
    for snap in intervals:
        start, end = int(snap["start_ns"]), int(snap["end_ns"])
        if not in_window(snap, from_ns, until_ns):
            continue
        seconds = (end - start) / 1e9
        for k, s in enumerate(snap["streams"]):
            ops = dict(s["ops"])
            if s.get("loops") is not None:
                ops["loop"] = s["loops"]
            for op, d in ops.items():
                skipped = s["skipped"].get(op, 0) if op != "loop" else 0
                if not (d["ops"] or skipped or d.get("errors")):
                    continue
                h = latency_hist(d)
                us = lambda v: None if v is None else v / 1e3  # noqa: E731
                rows.append(
                    {
                        "run_id": run_id,
                        "interval": int(snap["index"]),
                        "t_s": max(0.0, (start - from_ns) / 1e9),
                        "seconds": seconds,
                        "stream": names[k],
                        "op": op,
                        "ops": int(d["ops"]),
                        "ops_s": d["ops"] / seconds if seconds > 0 else None,
                        "bytes": int(d["bytes"]),
                        "skipped": int(skipped),
                        "errors": int(sum((d.get("errors") or {}).values())),
                        "mean_us": us(h.mean()),
                        "p50_us": us(h.percentile(50)),
                        "p99_us": us(h.percentile(99)),
                        "max_us": us(float(h.max) if h.n else None),
                    }
                )
    return rows


def write_intervals(path: Any, rows: list[dict[str, Any]]) -> None:
    """The rows as Parquet (zstd), written to a temporary name and renamed into place."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("run_id", pa.string()),
            ("interval", pa.int64()),
            ("t_s", pa.float64()),
            ("seconds", pa.float64()),
            ("stream", pa.string()),
            ("op", pa.string()),
            ("ops", pa.int64()),
            ("ops_s", pa.float64()),
            ("bytes", pa.int64()),
            ("skipped", pa.int64()),
            ("errors", pa.int64()),
            ("mean_us", pa.float64()),
            ("p50_us", pa.float64()),
            ("p99_us", pa.float64()),
            ("max_us", pa.float64()),
        ]
    )
    table = pa.Table.from_pylist(rows, schema=schema)
    tmp = f"{path}.tmp"
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


def read_intervals(path: Any) -> list[dict[str, Any]]:
    """The rows of a run's file intervals (none when the file is missing)."""
    import os

    import pyarrow.parquet as pq

    if not os.path.exists(path):
        return []
    return pq.read_table(path).to_pylist()
