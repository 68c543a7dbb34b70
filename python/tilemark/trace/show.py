"""`tilemark trace show`: a trace's summary, and with --html the charts storage people read
traces with, as an offline report (report.Report exported by report.html.HtmlExporter).

The charts are aggregated while the trace streams past, batch by batch, into fixed grids: at
most MAX_BINS time slices (a "nice" width chosen from the trace's duration, which the Parquet
statistics give before reading), a size histogram by powers of two, an offset x time grid for
the LBA heatmap, an inter-arrival histogram (tilemark.hist buckets) and, for the outstanding
IOs, per slice the integral of issued-minus-completed requests. Memory and chart size do not
grow with the number of requests, so a 100M-row trace renders like a small one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tilemark.errors import UsageError
from tilemark.hist import Histogram, bucket_bounds
from tilemark.trace.schema import FLAGS, OPS, Trace, open_trace
from tilemark.trace.summary import (
    BATCH_ROWS,
    SUMMARY_COLUMNS,
    SummaryScan,
    TraceSummary,
    add_to_histogram,
    duration_text,
    op_codes,
)
from tilemark.units import format_size

MAX_BINS = 600  # time slices of the series charts
HEAT_TIME_BINS = 160
HEAT_OFFSET_BINS = 128
# Widths a time slice may have (ns): 1, 2, 5 x 10^k from 1 us, then minutes and hours.
NICE_NS = [m * 10**e for e in range(3, 12) for m in (1, 2, 5)] + [
    s * 1_000_000_000 for s in (30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 43200, 86400)
]
READ, WRITE = OPS.index("read"), OPS.index("write")


@dataclass(frozen=True)
class ShowResult:
    """What `trace show` found and wrote."""

    summary: TraceSummary
    html: Path | None


def show_trace(path: str | Path, *, html: Path | None = None, force: bool = False) -> ShowResult:
    """The summary of the trace at `path`; with `html`, also its report written there."""
    trace = open_trace(path)
    if trace.rows == 0:
        raise UsageError(f"trace {trace.path} has no requests.")
    scan = SummaryScan()
    charts = ChartScan(*_extent(trace)) if html is not None else None
    columns = SUMMARY_COLUMNS + (["offset"] if charts is not None else [])
    for b in trace.batches(columns, batch_rows=BATCH_ROWS):
        scan.add(b)
        if charts is not None:
            charts.add(b)
    summary = scan.result(trace)
    if html is None or charts is None:
        return ShowResult(summary=summary, html=None)
    from tilemark.report.html import HtmlExporter

    report = trace_report(trace, summary, charts)
    try:
        HtmlExporter().export(report, Path(html), force=force)
    except OSError as e:
        raise UsageError(f"--html {html} cannot be written: {e.strerror}.") from None
    return ShowResult(summary=summary, html=Path(html))


def _extent(trace: Trace) -> tuple[int, int]:
    """(last issue or completion, highest offset + size) from the row groups' statistics,
    or from a pass over those columns when a writer left no statistics."""
    meta = pq.ParquetFile(trace.path).metadata
    names = meta.schema.to_arrow_schema().names
    wanted = {"issue_ns": 0, "complete_ns": 0, "offset": 0, "size": 0}
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for name in wanted:
            stats = group.column(names.index(name)).statistics
            if stats is None or (not stats.has_min_max and stats.null_count < group.num_rows):
                return _extent_by_reading(trace)
            if stats.has_min_max:
                wanted[name] = max(wanted[name], int(stats.max))
    end = max(wanted["issue_ns"], wanted["complete_ns"])
    return end, wanted["offset"] + wanted["size"]


def _extent_by_reading(trace: Trace) -> tuple[int, int]:
    end = span = 0
    for b in trace.batches(["issue_ns", "complete_ns", "offset", "size"], BATCH_ROWS):
        for name in ("issue_ns", "complete_ns"):
            col = b.column(name).drop_null()
            if len(col):
                end = max(end, int(col.to_numpy().max()))
        span = max(
            span, int(b.column("offset").to_numpy().max() + b.column("size").to_numpy().max())
        )
    return end, span


def _nice_width(span_ns: int, bins: int) -> int:
    for width in NICE_NS:
        if span_ns / width < bins:
            return width
    return NICE_NS[-1] * math.ceil(span_ns / NICE_NS[-1] / bins)


class ChartScan:
    """The charts' grids, filled batch by batch."""

    def __init__(self, end_ns: int, offset_span: int):
        self.width = _nice_width(end_ns + 1, MAX_BINS)
        self.bins = end_ns // self.width + 1
        self.ios = np.zeros((len(OPS), self.bins), np.int64)
        self.bytes = np.zeros((len(OPS), self.bins), np.float64)
        self.sizes = np.zeros((len(OPS), 64), np.int64)  # by bit length of the size
        self.heat_width = _nice_width(end_ns + 1, HEAT_TIME_BINS)
        self.heat_bins = end_ns // self.heat_width + 1
        self.offset_width = 1 << max(9, (max(offset_span, 1) - 1).bit_length() - 7)
        self.offset_bins = max(offset_span, 1) // self.offset_width + 1
        self.heat = np.zeros((self.heat_bins, self.offset_bins), np.int64)
        self.gaps = Histogram()
        self.last_issue: int | None = None
        # Outstanding IOs: per slice, issues and completions and their time to the slice end.
        self.issued = np.zeros(self.bins, np.int64)
        self.issued_rest = np.zeros(self.bins, np.float64)
        self.completed = np.zeros(self.bins, np.int64)
        self.completed_rest = np.zeros(self.bins, np.float64)
        self.without_completion = 0

    def add(self, b: pa.RecordBatch) -> None:
        issue = b.column("issue_ns").to_numpy(zero_copy_only=False)
        ops = op_codes(b.column("op"))
        size = b.column("size").to_numpy(zero_copy_only=False)
        offset = b.column("offset").to_numpy(zero_copy_only=False)
        slot = np.minimum(issue // self.width, self.bins - 1)
        for op in np.unique(ops).tolist():
            mine = ops == op
            self.ios[op] += np.bincount(slot[mine], minlength=self.bins)
            self.bytes[op] += np.bincount(slot[mine], weights=size[mine], minlength=self.bins)
            bits = np.frexp(size[mine].astype(np.float64))[1]
            self.sizes[op] += np.bincount(bits, minlength=64)[:64]
        data = size > 0
        cells = np.minimum(issue[data] // self.heat_width, self.heat_bins - 1) * self.offset_bins
        cells += np.minimum(offset[data] // self.offset_width, self.offset_bins - 1)
        self.heat += np.bincount(cells, minlength=self.heat.size).reshape(self.heat.shape)
        previous = issue[:-1] if self.last_issue is None else np.r_[self.last_issue, issue[:-1]]
        add_to_histogram(self.gaps, issue[len(issue) - len(previous) :] - previous)
        self.last_issue = int(issue[-1])
        complete_col = b.column("complete_ns")
        known = complete_col.is_valid().to_numpy(zero_copy_only=False)
        self.without_completion += int((~known).sum())
        if known.any():
            start = issue[known]
            end = complete_col.drop_null().to_numpy()
            for times, count, rest in (
                (start, self.issued, self.issued_rest),
                (end, self.completed, self.completed_rest),
            ):
                where = np.minimum(times // self.width, self.bins - 1)
                count += np.bincount(where, minlength=self.bins)
                rest += np.bincount(
                    where, weights=(where + 1) * self.width - times, minlength=self.bins
                )

    # -- chart data ---------------------------------------------------------------------------
    def t_s(self, i: int, width: int | None = None) -> float:
        return i * (width or self.width) / 1e9

    def series(self) -> list[dict[str, Any]]:
        """IOPS and MB/s per slice and op (ops the trace has)."""
        seconds = self.width / 1e9
        rows = []
        for op in range(len(OPS)):
            if not self.ios[op].any():
                continue
            for i in range(self.bins):
                rows.append(
                    {
                        "t_s": self.t_s(i),
                        "op": OPS[op],
                        "iops": float(self.ios[op][i] / seconds),
                        "mbps": float(self.bytes[op][i] / seconds / 1e6),
                    }
                )
        return rows

    def read_share(self) -> list[dict[str, Any]]:
        rw = self.ios[READ] + self.ios[WRITE]
        return [
            {"t_s": self.t_s(i), "read_pct": float(100 * self.ios[READ][i] / rw[i])}
            for i in range(self.bins)
            if rw[i]
        ]

    def outstanding(self) -> list[dict[str, Any]]:
        """Mean outstanding IOs per slice: the integral of (issued - completed) over the slice
        divided by its width (requests without a completion are left out)."""
        net = np.cumsum(self.issued - self.completed)
        before = np.r_[0, net[:-1]]
        integral = before * self.width + self.issued_rest - self.completed_rest
        return [
            {"t_s": self.t_s(i), "outstanding": float(integral[i] / self.width)}
            for i in range(self.bins)
        ]

    def size_histogram(self) -> list[dict[str, Any]]:
        """IOs per size bucket and op; a bucket is named by its lower bound and holds the
        sizes up to just under twice that (4 KiB: 4096..8191 bytes)."""
        rows = []
        for op in range(len(OPS)):
            for bits in np.flatnonzero(self.sizes[op]).tolist():
                low = 0 if bits == 0 else 1 << (bits - 1)
                rows.append(
                    {
                        "bucket": bits,
                        "size": format_size(low),
                        "op": OPS[op],
                        "ios": int(self.sizes[op][bits]),
                    }
                )
        return rows

    def heatmap(self) -> list[dict[str, Any]]:
        gib = 1 << 30
        rows = []
        for t, o in zip(*np.nonzero(self.heat), strict=True):
            rows.append(
                {
                    "t_s": self.t_s(int(t), self.heat_width),
                    "t_end": self.t_s(int(t) + 1, self.heat_width),
                    "off_gib": int(o) * self.offset_width / gib,
                    "off_end": (int(o) + 1) * self.offset_width / gib,
                    "ios": int(self.heat[t, o]),
                }
            )
        return rows

    def interarrival_cdf(self) -> list[dict[str, Any]]:
        rows, seen = [], 0
        total = self.gaps.n
        for idx in sorted(self.gaps.counts):
            seen += self.gaps.counts[idx]
            upper = bucket_bounds(idx)[1]
            rows.append({"us": upper / 1000, "share": seen / total})
        return rows


# -- the report --------------------------------------------------------------------------------
def trace_report(trace: Trace, s: TraceSummary, c: ChartScan):
    """The format-free report of a trace: summary facts first, then the six charts."""
    from tilemark.report.base import Caution, Cell, Figure, Report, Section, Table, Verdict
    from tilemark.report.format import generated_by
    from tilemark.trace import charts

    def table(id_: str, title: str, what: str, counts: list[tuple[str, int]]) -> Table:
        rows = [
            [Cell(str(k)), Cell(f"{n:,}", "num"), Cell(f"{s.share(n):.1%}", "num")]
            for k, n in counts
        ]
        return Table(id_, title, [what, "IOs", "share of IOs"], rows)

    iops = "-" if s.iops_mean is None else f"{s.iops_mean:,.1f}"
    facts = [
        ("IOs", f"{s.ios:,}"),
        ("MB read", f"{s.bytes_read / 1e6:,.1f}"),
        ("MB written", f"{s.bytes_written / 1e6:,.1f}"),
        ("read share", "-" if s.read_share is None else f"{s.read_share:.1%}"),
        ("IOPS mean / peak", f"{iops} / {s.iops_peak:,}"),
        ("duration", duration_text(s.duration_s)),
    ]
    tested = [("trace", str(trace.path)), ("source", s.source)]
    if s.source_file:
        tested.append(("imported from", s.source_file))
    tested.append(("device", s.device or f"{s.device_count:,} devices"))
    if s.start_epoch_ns is not None:
        from datetime import UTC, datetime

        start = datetime.fromtimestamp(s.start_epoch_ns / 1e9, UTC)
        tested.append(("first issue", start.strftime("%Y-%m-%d %H:%M:%S.%f UTC")))
    notes = list(s.notes)
    if s.events_lost:
        notes.insert(0, Caution(f"{s.events_lost:,} events were lost while tracing."))
    headline = (
        f"{s.ios:,} IOs over {duration_text(s.duration_s)}: "
        f"{'-' if s.read_share is None else f'{s.read_share:.1%}'} reads, {iops} IOPS mean"
    )
    verdict = Verdict(headline=headline, status="info", facts=facts, tested=tested, notes=notes)
    slice_text = _duration_text(c.width)
    outstanding_caption = f"Mean outstanding IOs per {slice_text} slice (issued, not completed)."
    if c.without_completion:
        outstanding_caption += (
            f" {c.without_completion:,} IOs have no completion time in the trace and are left out."
        )
    load = Section(
        "load",
        "Load over time",
        [
            Figure(
                "throughput",
                "IOPS and MB/s over time",
                charts.throughput(c.series()),
                f"Per {slice_text} slice, by operation, from the first issue.",
            ),
            Figure(
                "read-share",
                "Read share over time",
                charts.read_share(c.read_share()),
                "Reads / (reads + writes) per slice, by IOs.",
            ),
            Figure(
                "outstanding",
                "Outstanding IOs over time",
                charts.outstanding(c.outstanding()),
                outstanding_caption,
            ),
        ],
    )
    where = Section(
        "where",
        "Sizes and offsets",
        [
            Figure(
                "sizes",
                "IO size histogram",
                charts.sizes(c.size_histogram()),
                "IOs by size; a bucket holds the sizes from its name to just under twice it.",
            ),
            Figure(
                "lba",
                "Offset over time (LBA heatmap)",
                charts.lba_heatmap(c.heatmap()),
                "IOs per offset range and time slice (colour: IOs, log scale)"
                + (" of all devices together." if s.device_count > 1 else "."),
            ),
            table(
                "size-mix",
                "Size mix (top sizes)",
                "size",
                [(format_size(size), n) for size, n in s.sizes],
            ),
        ],
    )
    arrivals = Section(
        "arrivals",
        "Arrivals",
        [
            Figure(
                "interarrival",
                "Inter-arrival time CDF",
                charts.interarrival(c.interarrival_cdf()),
                "Time between consecutive issues (log scale).",
            ),
        ],
    )
    who = Section(
        "who",
        "Devices, processes, flags",
        [
            table("devices", "Devices (most IOs)", "device", list(s.devices)),
            table("processes", "Processes (most IOs)", "process (pid)", list(s.processes)),
            table("flags", "Flags", "flag", [(f, s.flags.get(f, 0)) for f in FLAGS]),
        ],
    )
    return Report(
        kind="trace",
        title=f"Trace {trace.path.name}",
        verdict=verdict,
        sections=[load, where, arrivals, who],
        details={"trace metadata": asdict(trace.meta), "summary": summary_doc(s)},
        links=[("trace file", trace.path.resolve())],
        generated_by=generated_by(),
    )


def _duration_text(ns: int) -> str:
    if ns >= 1_000_000_000:
        return f"{ns / 1e9:g} s"
    if ns >= 1_000_000:
        return f"{ns / 1e6:g} ms"
    return f"{ns / 1e3:g} us"


def summary_doc(s: TraceSummary) -> dict[str, Any]:
    """The summary as JSON-able data (with the derived shares)."""
    doc = asdict(s)
    doc["read_share"] = s.read_share
    doc["flag_shares"] = {f: s.share(n) for f, n in s.flags.items()}
    doc["read_mb_s"] = s.mb_per_s(s.bytes_read)
    doc["write_mb_s"] = s.mb_per_s(s.bytes_written)
    return doc
