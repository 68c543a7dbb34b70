"""What a trace holds, in numbers: `summarize(trace) -> TraceSummary`, `summary_lines(s)`.

One pass over the trace's batches, in bounded memory: counters of sizes, devices and processes
(as many as the trace has distinct ones), IOs per second of the trace (as many as it lasts) and
a latency histogram (tilemark.hist: within 1/128 of the true value). `trace show` prints it,
capture prints it when a capture ends. Definitions (docs/traces.md, "trace show"):

- duration: from the first issue to the last issue or completion, whichever is later;
- IOPS mean: IOs / duration; IOPS peak: the most IOs issued within one second of the trace
  (seconds counted from the first issue);
- read share: reads / (reads + writes), by IOs; flag shares are of all IOs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from tilemark.hist import SUB_BUCKET_BITS, SUB_BUCKETS, Histogram
from tilemark.trace.schema import FLAGS, OPS, Trace
from tilemark.units import format_size

TOP = 5  # sizes, devices and processes a summary names
SUMMARY_COLUMNS = [
    "issue_ns",
    "complete_ns",
    "latency_ns",
    "op",
    "size",
    *FLAGS,
    "pid",
    "comm",
    "device",
]
BATCH_ROWS = 256 * 1024
_OP_CODE = {name: i for i, name in enumerate(OPS)}


@dataclass(frozen=True)
class Latency:
    """Latency of the IOs whose completion the trace knows (ns; percentiles within 1/128)."""

    count: int
    mean_ns: float
    p50_ns: float
    p99_ns: float
    max_ns: int


@dataclass(frozen=True)
class TraceSummary:
    """A trace in numbers (see the module doc for the definitions)."""

    path: str
    source: str
    source_file: str | None
    device: str | None
    start_epoch_ns: int | None
    events_lost: int
    ios: int
    reads: int
    writes: int
    flushes: int
    discards: int
    bytes_read: int
    bytes_written: int
    bytes_discarded: int
    duration_s: float
    iops_mean: float | None
    iops_peak: int
    sizes: tuple[tuple[int, int], ...]  # (size in bytes, IOs), most IOs first
    size_count: int  # distinct sizes
    devices: tuple[tuple[str, int], ...]  # (device, IOs), most first
    device_count: int
    processes: tuple[tuple[str, int], ...]  # ("comm (pid)", IOs), most first
    process_count: int  # distinct (pid, comm); IOs without a pid are not counted
    flags: dict[str, int] = field(default_factory=dict)  # sync, fua, preflush, meta: IOs
    latency: Latency | None = None
    notes: tuple[str, ...] = ()

    @property
    def read_share(self) -> float | None:
        """Reads / (reads + writes), by IOs."""
        rw = self.reads + self.writes
        return self.reads / rw if rw else None

    def share(self, count: int) -> float:
        """`count` as a share of all IOs."""
        return count / self.ios if self.ios else 0.0

    def mb_per_s(self, n_bytes: int) -> float | None:
        return n_bytes / self.duration_s / 1e6 if self.duration_s > 0 else None


def bucket_indices(values: np.ndarray) -> np.ndarray:
    """tilemark.hist.bucket_index of each value, vectorised."""
    v = np.clip(values.astype(np.int64), 0, 1 << 42)
    bits = np.frexp(v.astype(np.float64))[1].astype(np.int64)  # bit_length, exact below 2^53
    shift = np.maximum(bits - 1 - SUB_BUCKET_BITS, 0)
    return np.where(v < 2 * SUB_BUCKETS, v, SUB_BUCKETS * shift + (v >> shift))


def add_to_histogram(hist: Histogram, values: np.ndarray) -> None:
    """Record many values at once (what Histogram.record does one by one)."""
    if len(values) == 0:
        return
    idx, counts = np.unique(bucket_indices(values), return_counts=True)
    for i, c in zip(idx.tolist(), counts.tolist(), strict=True):
        hist.counts[i] = hist.counts.get(i, 0) + c
    hist.n += len(values)
    hist.sum += int(values.sum())
    lo, hi = int(values.min()), int(values.max())
    hist.min = lo if hist.min is None else min(hist.min, lo)
    hist.max = hi if hist.max is None else max(hist.max, hi)


def op_codes(column: pa.Array) -> np.ndarray:
    """The op of each row as an index into OPS."""
    if pa.types.is_dictionary(column.type):
        table = np.array([_OP_CODE[s] for s in column.dictionary.to_pylist()], np.int8)
        indices = column.indices.to_numpy(zero_copy_only=False)
        return table[indices] if len(table) else indices.astype(np.int8)
    return np.array([_OP_CODE[s] for s in column.to_pylist()], np.int8)


def _counts(column: pa.Array) -> Iterable[tuple[Any, int]]:
    """Distinct non-null values of a column and how often each occurs."""
    counted = column.drop_null().value_counts()
    return zip(
        counted.field("values").to_pylist(), counted.field("counts").to_pylist(), strict=True
    )


class SummaryScan:
    """Accumulates a summary batch by batch (the charts of `trace show` ride along)."""

    def __init__(self) -> None:
        self.ios = 0
        self.by_op = np.zeros(len(OPS), np.int64)
        self.bytes_by_op = np.zeros(len(OPS), np.int64)
        self.per_second = np.zeros(0, np.int64)
        self.sizes: Counter[int] = Counter()
        self.devices: Counter[str] = Counter()
        self.processes: Counter[tuple[int, str | None]] = Counter()
        self.flags = dict.fromkeys(FLAGS, 0)
        self.latency = Histogram()
        self.last_ns = 0

    def add(self, b: pa.RecordBatch) -> None:
        n = b.num_rows
        if n == 0:
            return
        self.ios += n
        issue = b.column("issue_ns").to_numpy(zero_copy_only=False)
        ops = op_codes(b.column("op"))
        size = b.column("size").to_numpy(zero_copy_only=False)
        self.by_op += np.bincount(ops, minlength=len(OPS))
        self.bytes_by_op += np.bincount(ops, weights=size, minlength=len(OPS)).astype(np.int64)
        second = np.maximum(issue, 0) // 1_000_000_000
        first = int(second.min())
        seconds = np.bincount(second - first)
        end = first + len(seconds)
        if end > len(self.per_second):
            self.per_second = np.pad(self.per_second, (0, end - len(self.per_second)))
        self.per_second[first:end] += seconds
        self.last_ns = max(self.last_ns, int(issue.max()))
        complete = b.column("complete_ns").drop_null()
        if len(complete):
            self.last_ns = max(self.last_ns, int(complete.to_numpy().max()))
        self.sizes.update(dict(_counts(b.column("size"))))
        self.devices.update(dict(_counts(b.column("device"))))
        procs = pa.table({"pid": b.column("pid"), "comm": b.column("comm")})
        procs = procs.filter(procs.column("pid").is_valid())
        if procs.num_rows:
            grouped = procs.group_by(["pid", "comm"], use_threads=False).aggregate(
                [("pid", "count")]
            )
            for pid, comm, count in zip(
                grouped.column("pid").to_pylist(),
                grouped.column("comm").to_pylist(),
                grouped.column("pid_count").to_pylist(),
                strict=True,
            ):
                self.processes[(pid, comm)] += count
        for flag in FLAGS:
            self.flags[flag] += int(b.column(flag).to_numpy(zero_copy_only=False).sum())
        latency = b.column("latency_ns").drop_null()
        if len(latency):
            add_to_histogram(self.latency, latency.to_numpy())

    def result(self, trace: Trace) -> TraceSummary:
        meta = trace.meta
        reads, writes, flushes, discards = (int(x) for x in self.by_op)
        b_read, b_written, _, b_discarded = (int(x) for x in self.bytes_by_op)
        duration = self.last_ns / 1e9
        lat = self.latency
        latency = None
        if lat.n:
            latency = Latency(
                count=lat.n,
                mean_ns=lat.mean() or 0.0,
                p50_ns=lat.percentile(50.0) or 0.0,
                p99_ns=lat.percentile(99.0) or 0.0,
                max_ns=int(lat.max or 0),
            )
        return TraceSummary(
            path=str(trace.path),
            source=meta.source,
            source_file=meta.source_file,
            device=meta.device,
            start_epoch_ns=meta.start_epoch_ns,
            events_lost=meta.events_lost,
            ios=self.ios,
            reads=reads,
            writes=writes,
            flushes=flushes,
            discards=discards,
            bytes_read=b_read,
            bytes_written=b_written,
            bytes_discarded=b_discarded,
            duration_s=duration,
            iops_mean=self.ios / duration if duration > 0 else None,
            iops_peak=int(self.per_second.max()) if len(self.per_second) else 0,
            sizes=_top(self.sizes),
            size_count=len(self.sizes),
            devices=_top(self.devices),
            device_count=len(self.devices),
            processes=tuple(
                (f"{comm or '?'} ({pid})", count) for (pid, comm), count in _top(self.processes)
            ),
            process_count=len(self.processes),
            flags=dict(self.flags),
            latency=latency,
            notes=tuple(meta.notes),
        )


def _top(counter: Counter, n: int = TOP) -> tuple:
    """The n most frequent (value, count), ties by value, so the order is reproducible."""
    return tuple(sorted(counter.items(), key=lambda kv: (-kv[1], str(kv[0])))[:n])


def summarize(trace: Trace) -> TraceSummary:
    """The numbers of a trace, from one pass over it."""
    scan = SummaryScan()
    for b in trace.batches(SUMMARY_COLUMNS, batch_rows=BATCH_ROWS):
        scan.add(b)
    return scan.result(trace)


def duration_text(seconds: float) -> str:
    """12.345 s, 12.3 ms or 88.0 us: a trace may last microseconds or days."""
    if seconds >= 1 or seconds == 0:
        return f"{seconds:,.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} us"


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{share:.1%}"


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3g} ms"


def summary_lines(s: TraceSummary) -> list[str]:
    """The summary as a few lines of text (what capture prints when it ends)."""
    iops = "-" if s.iops_mean is None else f"{s.iops_mean:,.1f}"
    lines = [
        f"{s.ios:,} IOs in {duration_text(s.duration_s)}: {iops} IOPS mean, {s.iops_peak:,} in the "
        "busiest second",
        f"reads {s.reads:,} ({_pct(s.read_share)} of reads+writes) {s.bytes_read / 1e6:,.1f} MB, "
        f"writes {s.writes:,} {s.bytes_written / 1e6:,.1f} MB, flushes {s.flushes:,}, "
        f"discards {s.discards:,}",
    ]
    if s.sizes:
        shown = ", ".join(f"{format_size(size)} {s.share(c):.1%}" for size, c in s.sizes)
        lines.append(f"sizes: {shown} ({s.size_count:,} distinct)")
    lines.append(
        "flags: " + ", ".join(f"{flag} {s.share(s.flags.get(flag, 0)):.1%}" for flag in FLAGS)
    )
    if s.latency is not None:
        lat = s.latency
        lines.append(
            f"latency: mean {_ms(lat.mean_ns)}, p50 {_ms(lat.p50_ns)}, p99 {_ms(lat.p99_ns)}, "
            f"max {_ms(lat.max_ns)} ({lat.count:,} IOs with a completion)"
        )
    if s.devices:
        more = f" (of {s.device_count:,})" if s.device_count > len(s.devices) else ""
        lines.append("devices: " + ", ".join(f"{d} {c:,}" for d, c in s.devices) + more)
    if s.processes:
        more = f" (of {s.process_count:,})" if s.process_count > len(s.processes) else ""
        lines.append("processes: " + ", ".join(f"{p} {c:,}" for p, c in s.processes) + more)
    lines.append(f"events lost while tracing: {s.events_lost:,}")
    return lines
