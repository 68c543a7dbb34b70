"""Fidelity: how closely two IO streams agree, property by property (docs/fidelity.md).

A stream (a trace: captured, imported, or a capture of a tilemark run) is first characterized
in one pass over its batches, in bounded memory: every property that moves storage is reduced
to a few numbers or a histogram over fixed bins (`Characterization`). Two characterizations are
then compared property by property: each accuracy is 1 - a normalized distance in [0, 1]
(Tarasov et al., FAST '12: "1 - relative error per property"), the overall score is their mean.
The formulas are in docs/fidelity.md; `PROPERTIES` lists them in the order reports show them.

Distances used:
- a scalar (a rate): relative error |a - b| / max(a, b);
- a share (read share, the share of syncs): absolute difference |a - b|;
- a distribution over fixed bins (sizes, seek distances, run lengths, outstanding IOs): total
  variation 1/2 * sum |p_i - q_i|, the share of IOs that would have to move to another bin;
- a distribution of times (inter-arrival gaps, latency): the Kolmogorov-Smirnov statistic over
  log-spaced bins, max |F_a - F_b|, which tolerates a small shift that total variation would
  count in full.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilemark.trace.columns import numbers, strings
from tilemark.trace.schema import Trace

# Inter-arrival gaps and latencies: log-spaced bins, 8 per power of two, 1 ns .. 2^40 ns (18 min).
_BINS_PER_OCTAVE = 8
_TIME_BINS = _BINS_PER_OCTAVE * 40 + 1
# Seek distances: 0 (sequential), then signed log2 bins of the gap in bytes.
_SEEK_OCTAVES = 52
# Run lengths (IOs in a sequential run) and outstanding IOs: log2 bins up to 2^20.
_COUNT_BINS = 22
# Burstiness: IO counts per window at these scales.
WINDOWS_NS = (10_000_000, 100_000_000, 1_000_000_000)
# Footprint and skew: 64 KiB blocks touched, IOs per 1 MiB region.
REGION = 1 << 20
BLOCK = 64 << 10
HOT_SHARES = (0.01, 0.10)
SIZES_KEPT = 64


def time_bin(ns: np.ndarray) -> np.ndarray:
    """Log-spaced bin of durations in ns (0 for anything up to 1 ns)."""
    v = np.maximum(np.asarray(ns, dtype=np.float64), 1.0)
    b = np.floor(np.log2(v) * _BINS_PER_OCTAVE).astype(np.int64) + 1
    return np.clip(b, 0, _TIME_BINS - 1)


def count_bin(n: np.ndarray) -> np.ndarray:
    """log2 bin of a count >= 1: 1 -> 0, 2 -> 1, 3..4 -> 2, 5..8 -> 3, ..."""
    v = np.maximum(np.asarray(n, dtype=np.float64), 1.0)
    return np.clip(np.ceil(np.log2(v)).astype(np.int64), 0, _COUNT_BINS - 1)


def seek_bin(gap: np.ndarray) -> np.ndarray:
    """0 for a sequential IO; 1 + log2 octave for a jump forward, -(1 + octave) backward."""
    gap = np.asarray(gap, dtype=np.int64)
    mag = np.abs(gap).astype(np.float64)
    octave = np.floor(np.log2(np.maximum(mag, 1.0))).astype(np.int64)
    octave = np.clip(octave, 0, _SEEK_OCTAVES - 1)
    return np.where(gap == 0, 0, np.sign(gap) * (octave + 1))


@dataclass
class Counts:
    """A histogram over integer bins (bounded by the bin ranges above)."""

    bins: dict[int, float] = field(default_factory=dict)

    def add(self, keys: np.ndarray, weights: np.ndarray | None = None) -> None:
        keys = np.asarray(keys)
        if keys.size == 0:
            return
        uniq, inverse = np.unique(keys, return_inverse=True)
        sums = np.bincount(inverse, weights=weights, minlength=len(uniq))
        for k, s in zip(uniq.tolist(), sums.tolist(), strict=True):
            self.bins[k] = self.bins.get(k, 0.0) + s

    def total(self) -> float:
        return sum(self.bins.values())


@dataclass
class Characterization:
    """What one IO stream does, in bounded numbers (module doc); `characterize` builds it."""

    name: str
    ios: int = 0
    reads: int = 0
    writes: int = 0
    flushes: int = 0
    discards: int = 0
    sync: int = 0
    fua: int = 0
    bytes: int = 0
    first_ns: int | None = None
    last_ns: int | None = None
    sizes: Counts = field(default_factory=Counts)
    gaps: Counts = field(default_factory=Counts)
    seeks: Counts = field(default_factory=Counts)
    runs: Counts = field(default_factory=Counts)  # weighted by the IOs in each run
    outstanding: Counts = field(default_factory=Counts)  # in flight as each IO is issued
    latency: Counts = field(default_factory=Counts)
    windows: dict[int, Counts] = field(default_factory=dict)  # width -> IOs-per-window hist
    blocks_touched: int = 0  # distinct 64 KiB blocks read or written (footprint)
    # data IOs per touched 1 MiB region, most first (skew)
    region_ios: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    has_completions: bool = False

    @property
    def duration_s(self) -> float:
        if self.first_ns is None or self.last_ns is None:
            return 0.0
        return max(self.last_ns - self.first_ns, 1) / 1e9

    @property
    def data_ios(self) -> int:
        return self.reads + self.writes


class _Growing:
    """A numpy array indexed by block or region number, grown as higher numbers appear."""

    def __init__(self, dtype: Any):
        self.array = np.zeros(1024, dtype=dtype)

    def ensure(self, top: int) -> None:
        if top >= len(self.array):
            size = len(self.array)
            while size <= top:
                size *= 2
            grown = np.zeros(size, dtype=self.array.dtype)
            grown[: len(self.array)] = self.array
            self.array = grown


@dataclass
class _Pass:
    """What characterize carries from one batch to the next."""

    last_issue: int | None = None
    prev_end: int | None = None  # end of the previous data IO
    run_len: int = 0  # data IOs in the sequential run still open
    issued: int = 0
    completed_before: int = 0
    pending: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.float64))
    windows: dict[int, tuple[int, int]] = field(default_factory=dict)  # width -> (index, IOs)
    blocks: _Growing = field(default_factory=lambda: _Growing(np.bool_))
    regions: _Growing = field(default_factory=lambda: _Growing(np.int64))


def _spans(first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Every integer in [first_i, last_i] for all i, concatenated."""
    counts = last - first + 1
    total = int(counts.sum())
    starts = np.repeat(first, counts)
    offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    return starts + offsets


def _data_ios(c: Characterization, s: _Pass, offset: np.ndarray, size: np.ndarray) -> None:
    """Seek distances, sequential runs, footprint and skew of the batch's reads and writes."""
    n = len(offset)
    if n == 0:
        return
    ends = offset + size
    before = np.empty(n, dtype=np.int64)
    before[1:] = ends[:-1]
    before[0] = offset[0] if s.prev_end is None else s.prev_end
    gap = offset - before
    new_run = gap != 0
    if s.prev_end is None:
        new_run[0] = True  # the first IO of the stream opens the first run
        c.seeks.add(seek_bin(gap[1:]))
    else:
        c.seeks.add(seek_bin(gap))
    starts = np.flatnonzero(new_run)
    if starts.size == 0:
        s.run_len += n
    else:
        closed = s.run_len + int(starts[0])
        if closed:
            c.runs.add(count_bin([closed]), np.array([float(closed)]))
        lengths = np.diff(starts)
        c.runs.add(count_bin(lengths), lengths.astype(np.float64))
        s.run_len = n - int(starts[-1])
    s.prev_end = int(ends[-1])
    blocks = _spans(offset // BLOCK, (ends - 1) // BLOCK)
    s.blocks.ensure(int(blocks.max()))
    s.blocks.array[blocks] = True
    regions = offset // REGION
    s.regions.ensure(int(regions.max()))
    np.add.at(s.regions.array, regions, 1)


def _outstanding(c: Characterization, s: _Pass, issue: np.ndarray, complete: np.ndarray) -> None:
    """IOs in flight as each IO is issued (itself included), and completion latencies."""
    finite = np.isfinite(complete)
    if finite.any():
        c.has_completions = True
        c.latency.add(time_bin(complete[finite] - issue[finite]))
    s.pending = np.sort(np.concatenate((s.pending, complete)))
    done = np.searchsorted(s.pending, issue.astype(np.float64), side="left")
    in_flight = s.issued + np.arange(len(issue)) - (s.completed_before + done) + 1
    c.outstanding.add(count_bin(np.maximum(in_flight, 1)))
    passed = int(done[-1])
    s.pending = s.pending[passed:]
    s.completed_before += passed


def _windows(c: Characterization, s: _Pass, issue: np.ndarray) -> None:
    """IOs per window at every scale; a window closes when a later one receives an IO."""
    assert c.first_ns is not None
    for width in WINDOWS_NS:
        hist = c.windows.setdefault(width, Counts())
        idx, counts = np.unique((issue - c.first_ns) // width, return_counts=True)
        open_window = s.windows.get(width)
        if open_window is not None:
            if idx[0] == open_window[0]:
                counts[0] += open_window[1]
            else:
                idx = np.concatenate(([open_window[0]], idx))
                counts = np.concatenate(([open_window[1]], counts))
        empty = int((np.diff(idx) - 1).sum())
        hist.add(counts[:-1])
        if empty:
            hist.bins[0] = hist.bins.get(0, 0.0) + empty
        s.windows[width] = (int(idx[-1]), int(counts[-1]))


def characterize(
    trace: Trace, *, name: str | None = None, batch_rows: int = 256 * 1024
) -> Characterization:
    """One pass over `trace`, in issue order (module doc)."""
    c = Characterization(name=name or str(trace.path))
    s = _Pass()
    columns = ["issue_ns", "complete_ns", "op", "offset", "size", "sync", "fua"]
    for batch in trace.batches(columns, batch_rows=batch_rows):
        n = batch.num_rows
        if n == 0:
            continue
        # (tilemark.trace.columns: Arrow's to_numpy would import pandas, half the command)
        issue = numbers(batch.column("issue_ns"), np.int64)
        ops = strings(batch.column("op"))
        offset = numbers(batch.column("offset"), np.int64)
        size = numbers(batch.column("size"), np.int64)
        sync = numbers(batch.column("sync"), np.bool_, False)
        fua = numbers(batch.column("fua"), np.bool_, False)
        complete = numbers(batch.column("complete_ns"), np.float64, np.inf)
        is_read, is_write = ops == "read", ops == "write"
        data = is_read | is_write
        c.ios += n
        c.reads += int(is_read.sum())
        c.writes += int(is_write.sum())
        c.flushes += int((ops == "flush").sum())
        c.discards += int((ops == "discard").sum())
        c.sync += int((sync & is_write).sum())
        c.fua += int((fua & is_write).sum())
        c.bytes += int(size[data].sum())
        if c.first_ns is None:
            c.first_ns = int(issue[0])
        c.last_ns = max(c.last_ns or 0, int(issue.max()))
        c.sizes.add(size[data])
        previous = issue[0] if s.last_issue is None else s.last_issue
        gaps = np.diff(issue, prepend=previous)
        c.gaps.add(time_bin(gaps[1:] if s.last_issue is None else gaps))
        s.last_issue = int(issue[-1])
        _data_ios(c, s, offset[data], size[data])
        _outstanding(c, s, issue, complete)
        _windows(c, s, issue)
        s.issued += n
    if s.run_len:
        c.runs.add(count_bin([s.run_len]), np.array([float(s.run_len)]))
    for width, (_, count) in s.windows.items():
        c.windows[width].add(np.array([count]))
    if not c.has_completions:
        c.outstanding = Counts()
    c.blocks_touched = int(s.blocks.array.sum())
    touched = s.regions.array[s.regions.array > 0]
    c.region_ios = np.sort(touched)[::-1]
    if len(c.sizes.bins) > SIZES_KEPT:
        kept = dict(sorted(c.sizes.bins.items(), key=lambda kv: -kv[1])[:SIZES_KEPT])
        kept[-1] = c.sizes.total() - sum(kept.values())  # the rest, as one bin
        c.sizes.bins = kept
    return c


# -----------------------------------------------------------------------------------------------
# Comparing


def _tv(a: Counts, b: Counts) -> float | None:
    ta, tb = a.total(), b.total()
    if ta == 0 or tb == 0:
        return None
    keys = set(a.bins) | set(b.bins)
    return 0.5 * sum(abs(a.bins.get(k, 0.0) / ta - b.bins.get(k, 0.0) / tb) for k in keys)


def _ks(a: Counts, b: Counts) -> float | None:
    ta, tb = a.total(), b.total()
    if ta == 0 or tb == 0:
        return None
    fa = fb = worst = 0.0
    for k in sorted(set(a.bins) | set(b.bins)):
        fa += a.bins.get(k, 0.0) / ta
        fb += b.bins.get(k, 0.0) / tb
        worst = max(worst, abs(fa - fb))
    return worst


def _rel(a: float, b: float) -> float:
    top = max(abs(a), abs(b))
    return 0.0 if top == 0 else abs(a - b) / top


def _share(part: int, whole: int) -> float | None:
    return None if whole == 0 else part / whole


def _cv(hist: Counts) -> float | None:
    n = hist.total()
    if n == 0:
        return None
    mean = sum(k * v for k, v in hist.bins.items()) / n
    if mean == 0:
        return None
    var = sum(v * (k - mean) ** 2 for k, v in hist.bins.items()) / n
    return math.sqrt(var) / mean


def _hot_share(region_ios: np.ndarray, share: float) -> float | None:
    if region_ios.size == 0:
        return None
    top = max(1, int(round(len(region_ios) * share)))
    return float(region_ios[:top].sum() / region_ios.sum())


def _idle(c: Characterization) -> float | None:
    hist = c.windows.get(100_000_000)
    if hist is None or hist.total() == 0:
        return None
    return hist.bins.get(0, 0.0) / hist.total()


# property -> how it is measured and compared (docs/fidelity.md has the formulas)
PROPERTIES: dict[str, str] = {
    "rate": "IOs per second over the stream: relative error",
    "throughput": "bytes read and written per second: relative error",
    "read_share": "reads / (reads + writes): absolute difference",
    "size_mix": "IO sizes of reads and writes: total variation",
    "interarrival": "gaps between issues (8 log bins per octave): Kolmogorov-Smirnov",
    "burstiness": "coefficient of variation of IOs per 10 ms, 100 ms and 1 s window: mean "
    "|a - b| / max(a, b, 1)",
    "idle": "share of 100 ms windows without an IO: absolute difference",
    "seek_distance": "distance from the end of the previous IO (0, then signed octaves): total "
    "variation",
    "sequential_runs": "IOs by the length of the sequential run they are in (octaves): total "
    "variation",
    "footprint": "distinct 64 KiB blocks touched: relative error",
    "skew": "share of IOs to the hottest 1% and 10% of touched 1 MiB regions: mean absolute "
    "difference",
    "sync_share": "writes with the sync flag / writes: absolute difference",
    "fua_share": "writes with FUA / writes: absolute difference",
    "flush_share": "flushes / all IOs: absolute difference",
    "outstanding": "IOs in flight as each IO is issued (octaves): total variation",
    "latency": "completion latency (8 log bins per octave): Kolmogorov-Smirnov; streams on the "
    "same device only",
}


@dataclass(frozen=True)
class Accuracy:
    """One property's agreement: accuracy = 1 - distance; None and why when not comparable."""

    property: str
    a: Any
    b: Any
    distance: float | None
    why_not: str | None = None

    @property
    def accuracy(self) -> float | None:
        return None if self.distance is None else max(0.0, 1.0 - self.distance)

    @property
    def description(self) -> str:
        return PROPERTIES[self.property]


def compare(
    a: Characterization, b: Characterization, *, same_device: bool = False
) -> list[Accuracy]:
    """Every property of PROPERTIES, for A against B, in that order. UsageError when a stream
    has no reads or writes: then no property but the rate could be compared, and a score
    would say nothing."""
    for c in (a, b):
        if c.data_ios == 0:
            from tilemark.errors import UsageError

            raise UsageError(
                f"{c.name} has no reads or writes ({c.ios} requests): the two streams have no "
                "property in common to compare."
            )
    out: list[Accuracy] = []

    def add(prop: str, va: Any, vb: Any, dist: float | None, why: str | None = None) -> None:
        if dist is None and why is None:
            why = "a stream has nothing to measure it on"
        out.append(Accuracy(prop, va, vb, dist, why))

    rate_a = a.ios / a.duration_s if a.ios else 0.0
    rate_b = b.ios / b.duration_s if b.ios else 0.0
    add("rate", rate_a, rate_b, _rel(rate_a, rate_b))
    tp_a = a.bytes / a.duration_s if a.ios else 0.0
    tp_b = b.bytes / b.duration_s if b.ios else 0.0
    add("throughput", tp_a, tp_b, _rel(tp_a, tp_b))
    ra, rb = _share(a.reads, a.data_ios), _share(b.reads, b.data_ios)
    add("read_share", ra, rb, None if ra is None or rb is None else abs(ra - rb))
    add("size_mix", None, None, _tv(a.sizes, b.sizes))
    add("interarrival", None, None, _ks(a.gaps, b.gaps))
    cvs = []
    for width in WINDOWS_NS:
        ca, cb = _cv(a.windows.get(width, Counts())), _cv(b.windows.get(width, Counts()))
        if ca is not None and cb is not None:
            cvs.append((ca, cb))
    # Below a CV of 1 a stream is smooth (Poisson at 20 IOs per window has 0.22): differences
    # there matter less than between bursty streams, so the error is relative to at least 1.
    burst = sum(abs(x - y) / max(x, y, 1.0) for x, y in cvs) / len(cvs) if cvs else None
    add("burstiness", [x for x, _ in cvs], [y for _, y in cvs], burst)
    ia, ib = _idle(a), _idle(b)
    add("idle", ia, ib, None if ia is None or ib is None else abs(ia - ib))
    add("seek_distance", None, None, _tv(a.seeks, b.seeks))
    add("sequential_runs", None, None, _tv(a.runs, b.runs))
    fa, fb = a.blocks_touched * BLOCK, b.blocks_touched * BLOCK
    add("footprint", fa, fb, _rel(fa, fb))
    hot_a = [_hot_share(a.region_ios, s) for s in HOT_SHARES]
    hot_b = [_hot_share(b.region_ios, s) for s in HOT_SHARES]
    pairs = [(x, y) for x, y in zip(hot_a, hot_b, strict=True) if x is not None and y is not None]
    add("skew", hot_a, hot_b, sum(abs(x - y) for x, y in pairs) / len(pairs) if pairs else None)
    for prop, pa_, pb_ in (("sync_share", a.sync, b.sync), ("fua_share", a.fua, b.fua)):
        sa, sb = _share(pa_, a.writes), _share(pb_, b.writes)
        if sa is None and sb is None:
            add(prop, sa, sb, 0.0)  # neither writes: they agree
        elif sa is None or sb is None:
            add(prop, sa, sb, 1.0)  # one writes and the other does not
        else:
            add(prop, sa, sb, abs(sa - sb))
    fla, flb = _share(a.flushes, a.ios), _share(b.flushes, b.ios)
    add("flush_share", fla, flb, None if fla is None or flb is None else abs(fla - flb))
    if a.has_completions and b.has_completions:
        add("outstanding", None, None, _tv(a.outstanding, b.outstanding))
    else:
        add("outstanding", None, None, None, "a stream without completion times")
    if not same_device:
        add("latency", None, None, None, "not compared: the streams ran on different devices")
    elif a.has_completions and b.has_completions:
        add("latency", None, None, _ks(a.latency, b.latency))
    else:
        add("latency", None, None, None, "a stream without completion times")
    return out


def overall(accuracies: Iterable[Accuracy]) -> float | None:
    """The mean accuracy of the properties that could be compared."""
    values = [x.accuracy for x in accuracies if x.accuracy is not None]
    return sum(values) / len(values) if values else None
