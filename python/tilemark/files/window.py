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

from collections.abc import Iterable, Sequence
from typing import Any

from tilemark.files.spec import OPS

FILE_INTERVALS = "file_intervals.parquet"


def in_window(snap: dict[str, Any], from_ns: int, until_ns: int | None) -> bool:
    """True when the interval's middle lies in [from_ns, until_ns)."""
    mid = (int(snap["start_ns"]) + int(snap["end_ns"])) / 2
    return mid >= from_ns and (until_ns is None or mid < until_ns)


class _OpSum:
    """One operation's counters summed interval by interval (histograms merged in place)."""

    def __init__(self) -> None:
        from tilemark.hist import Histogram

        self.ops = 0
        self.bytes = 0
        self.errors: dict[str, int] = {}
        self.service = Histogram()
        self.response: Any = None

    def add(self, d: dict[str, Any] | None) -> tuple[int, int]:
        """Add one interval's counters; (operations, their latency sum in ns) of the interval,
        the latency QoS reads (hist.latency_hist: response time open loop, else service)."""
        from tilemark.hist import Histogram

        if not d:
            return 0, 0
        self.ops += int(d.get("ops", 0))
        self.bytes += int(d.get("bytes", 0))
        for k, v in (d.get("errors") or {}).items():
            self.errors[k] = self.errors.get(k, 0) + v
        service = Histogram.from_json(d.get("service"))
        self.service.merge(service)
        if d.get("response") is None:
            return service.n, service.sum
        response = Histogram.from_json(d["response"])
        if self.response is None:
            self.response = Histogram()
        self.response.merge(response)
        return response.n, response.sum

    def doc(self) -> dict[str, Any]:
        return {
            "ops": self.ops,
            "bytes": self.bytes,
            "errors": dict(self.errors),
            "service": self.service.to_json(),
            "response": None if self.response is None else self.response.to_json(),
        }


class WindowTotals:
    """Per stream, the intervals added so far summed (memory: one set of histograms per
    stream and operation, however many intervals), and the batches their QoS criteria's
    confidence intervals are computed from (analysis/confidence.py BatchSeries, at most 64
    batches of consecutive intervals): per (stream index, op) the operations and their latency
    sum, per ("rate", stream index, op) the interval's ns and the operations it completed. Op
    "loop" is a sequence's whole loop."""

    def __init__(self, streams: int):
        from tilemark.analysis.confidence import BatchSeries

        self.seconds = 0.0
        self.batches = BatchSeries()
        self._ops = [{op: _OpSum() for op in OPS} for _ in range(streams)]
        self._skipped = [dict.fromkeys(OPS, 0) for _ in range(streams)]
        self._loops: list[_OpSum | None] = [None] * streams

    def add(self, snap: dict[str, Any]) -> None:
        ns = int(snap["end_ns"]) - int(snap["start_ns"])
        self.seconds += ns / 1e9
        batch: dict[object, tuple[int, int]] = {}
        for k, s in enumerate(snap["streams"]):
            for op in OPS:
                d = s["ops"].get(op)
                batch[(k, op)] = self._ops[k][op].add(d)
                batch[("rate", k, op)] = (ns, int((d or {}).get("ops", 0)))
                self._skipped[k][op] += s["skipped"].get(op, 0)
            if s.get("loops") is not None:
                if self._loops[k] is None:
                    self._loops[k] = _OpSum()
                batch[(k, "loop")] = self._loops[k].add(s["loops"])  # type: ignore[union-attr]
                batch[("rate", k, "loop")] = (ns, int(s["loops"].get("ops", 0)))
        self.batches.add(batch)

    def totals(self) -> list[dict[str, Any]]:
        """Per stream the engine-shaped totals: {ops: {op: doc}, skipped: {op: n}, loops}."""
        return [
            {
                "ops": {op: o.doc() for op, o in ops.items()},
                "skipped": dict(skipped),
                "loops": None if loops is None else loops.doc(),
            }
            for ops, skipped, loops in zip(self._ops, self._skipped, self._loops, strict=True)
        ]


def window_totals(
    intervals: Iterable[dict[str, Any]],
    streams: int,
    from_ns: int = 0,
    until_ns: int | None = None,
) -> WindowTotals:
    """The intervals in the window (in_window) summed: per stream the engine-shaped totals,
    the seconds they cover and their batches; `intervals` may be a generator (one interval in
    memory at a time)."""
    acc = WindowTotals(streams)
    for snap in intervals:
        if in_window(snap, from_ns, until_ns):
            acc.add(snap)
    return acc


def interval_rows(
    run_id: str,
    intervals: Iterable[dict[str, Any]],
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


def live_rows(snap: dict[str, Any], streams: Sequence[Any], warmup_ns: int) -> list[dict[str, Any]]:
    """An interval of the file streams as the live view's rows (run/summary.py interval_rows,
    with `stream` None and an `arrival` of their own): per stream its operations and bytes per
    second, and the p50/p99 of its loop (a sequence's application unit: one message, one page)
    or of all its operations; `arrival` says the loops per second in the stream's unit."""
    from tilemark.hist import Histogram, latency_hist

    start, end = int(snap["start_ns"]), int(snap["end_ns"])
    seconds = max((end - start) / 1e9, 1e-9)
    rows = []
    for spec, s in zip(streams, snap["streams"], strict=True):
        docs = [d for d in s["ops"].values() if d]
        loops = s.get("loops")
        h = latency_hist(loops) if loops is not None else Histogram.merged(map(latency_hist, docs))
        errors: dict[str, int] = {}
        for d in docs:
            for code, n in (d.get("errors") or {}).items():
                errors[code] = errors.get(code, 0) + n
        ms = lambda v: None if v is None else v / 1e6  # noqa: E731
        rows.append(
            {
                "interval": int(snap["index"]),
                "phase": "warmup" if end <= warmup_ns else "measure",
                "start_s": start / 1e9,
                "end_s": end / 1e9,
                "stream": None,
                "name": spec.name,
                "arrival": "files"
                if loops is None
                else f"files {loops['ops'] / seconds:,.0f} {spec.unit}/s",
                "iops": sum(int(d["ops"]) for d in docs) / seconds,
                "mbps": sum(int(d["bytes"]) for d in docs) / seconds / 1e6,
                "p50_ms": ms(h.percentile(50.0)),
                "p99_ms": ms(h.percentile(99.0)),
                "lag_max_ms": None,
                "behind_ios": 0,
                "errors": sum(errors.values()),
                "errors_by_name": errors,
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
