"""QoS verdicts for one application instance, from engine snapshots and result.

A criterion bounds a latency statistic (mean or a percentile, in ms) or requires a share of
the scheduled throughput. Latency uses response time for open-loop streams (free of
coordinated omission) and service time for closed-loop ones. Every criterion is checked over
the whole measurement window; `per_interval` ones also in each QoS interval (default 60 s,
methodology 11.2), built by merging the engine's 1-s snapshots - histograms are merged, never
percentiles averaged.

Throughput is judged against the *realized* schedule: IOs completed versus IOs that came due
(completed + failed + growth of the backlog that is behind schedule or in flight). So a Poisson
stream that happened to draw fewer arrivals is not failed for it, and a device that falls behind
is. A shortfall of up to max(1 IO per stream, 0.5%) is measurement tolerance: an IO that came
due at the very edge of a window is not a failure, and each stream can have one.

Latency criteria know their uncertainty (analysis/confidence.py): each carries a 95% confidence
interval and a decision. Over the whole window a criterion is `pass` when the interval lies at
or below the limit, `fail` when it lies above, and `inconclusive` when it straddles the limit;
an inconclusive criterion does not pass (a study measures longer to decide it, and at its time
limit it counts as failed, "within noise"). In a QoS interval only a decided failure fails: an
interval's data is fixed, and the whole-window check carries the decision with more samples.
Throughput and max are counts of what happened and are always decided.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from tilemark.analysis.confidence import BatchSeries, Interval, mean_interval, percentile_interval
from tilemark.analysis.merging import MergedSnapshot
from tilemark.hist import Histogram, latency_hist

LATENCY_STATS = {"mean", "p50", "p90", "p95", "p99", "p999", "max"}
STATS = LATENCY_STATS | {"throughput"}
OPS = ("read", "write", "sync")
TOLERANCE_FRACTION = 0.005


@dataclass(frozen=True)
class Criterion:
    """One QoS rule of an application profile."""

    id: str
    streams: tuple[str, ...]
    stat: str
    op: str | None = None  # None: reads and writes together
    max_ms: float | None = None
    min_fraction: float | None = None
    per_interval: bool = False

    def describe(self) -> str:
        who = "+".join(self.streams)
        if self.stat == "throughput":
            return f"{who} achieved >= {self.min_fraction:.0%} of target"
        what = f"{who} {self.op or 'IO'} {self.stat}"
        return f"{what} <= {self.max_ms:g} ms"


@dataclass
class Verdict:
    """Outcome of one criterion in one scope (the window, or one QoS interval)."""

    criterion: str
    description: str
    scope: str
    passed: bool
    value: float | None
    limit: float
    unit: str
    start_s: float | None = None
    end_s: float | None = None
    decision: str = ""  # pass | fail | inconclusive
    ci_low: float | None = None  # 95% confidence interval of `value`, same unit
    ci_high: float | None = None
    ci_bounded: bool = True  # False: too few samples to bound the statistic from above
    samples: int | None = None  # IOs the statistic is computed from

    def __post_init__(self) -> None:
        if not self.decision:
            self.decision = "pass" if self.passed else "fail"

    @property
    def margin_pct(self) -> float | None:
        """(value - limit) / limit in percent: above 0 a latency is over its limit, below 0 a
        throughput is short of it."""
        if self.value is None or not self.limit:
            return None
        return (self.value - self.limit) / self.limit * 100.0

    @property
    def badness(self) -> float:
        """How far on the failing side of its limit, in percent (larger is worse)."""
        m = self.margin_pct
        if m is None:
            return math.inf
        return -m if self.unit == "fraction" else m

    def to_json(self) -> dict:
        return {**self.__dict__, "margin_pct": self.margin_pct}


@dataclass
class Window:
    """Counters of a set of streams over a span of time."""

    start_s: float
    end_s: float
    ops: dict[str, int] = field(default_factory=dict)
    errors: int = 0
    latency: dict[str, Histogram] = field(default_factory=dict)
    backlog_start: int = 0
    backlog_end: int = 0

    def completed(self, op: str | None) -> int:
        return sum(self.ops.get(o, 0) for o in _ops(op))

    def hist(self, op: str | None) -> Histogram:
        return Histogram.merged(self.latency.get(o) for o in _ops(op))


def _ops(op: str | None) -> tuple[str, ...]:
    return ("read", "write") if op is None else (op,)


def _backlog(stream_snap: dict) -> int:
    return int(stream_snap.get("behind_ios", 0)) + int(stream_snap.get("inflight", 0))


# A span of run time in ns, [start, stop); stop None: to the end of the run.
Span = tuple[int, int | None]


def _outside(snap: dict, span: Span | None) -> bool:
    """A snapshot that ends before the span starts, or starts at or after its stop."""
    if span is None:
        return False
    start, stop = span
    return snap["end_ns"] <= start or (stop is not None and snap["start_ns"] >= stop)


def windows_from_snapshots(
    snapshots: Sequence[dict],
    indices: Sequence[int],
    qos_interval_s: float,
    span: Span | None = None,
) -> list[Window]:
    """Group measurement-phase snapshots into QoS intervals for the given plan streams.

    `span` is the phase of the streams (run time): snapshots outside it are left out, so a
    phased stream is judged over the time it ran, never over time it was idle. The last
    window is kept only if it spans at least half a QoS interval.
    """
    idx = set(indices)
    backlog = 0
    windows: list[Window] = []
    current: Window | None = None
    for snap in snapshots:
        rows = [s for s in snap["streams"] if s["stream"] in idx]
        level = sum(_backlog(s) for s in rows)
        if snap["phase"] != "measure" or _outside(snap, span):
            backlog = level
            continue
        start, end = snap["start_ns"] / 1e9, snap["end_ns"] / 1e9
        if current is None:
            current = Window(start_s=start, end_s=end, backlog_start=backlog)
        current.end_s = end
        for s in rows:
            for op in OPS:
                d = s[op]
                current.ops[op] = current.ops.get(op, 0) + d["ops"]
                current.errors += sum(d["errors"].values())
                current.latency.setdefault(op, Histogram()).merge(latency_hist(d))
        current.backlog_end = level
        if current.end_s - current.start_s >= qos_interval_s - 1e-6:
            windows.append(current)
            backlog, current = level, None
    if current is not None and current.end_s - current.start_s >= qos_interval_s / 2:
        windows.append(current)
    return windows


def window_from_result(result: dict, snapshots: Sequence[dict], indices: Sequence[int]) -> Window:
    """The whole measurement window for the given plan streams, from the engine result."""
    idx = set(indices)
    w = Window(start_s=result["measure_start_ns"] / 1e9, end_s=result["measure_end_ns"] / 1e9)
    for s in result["streams"]:
        if s["stream"] not in idx:
            continue
        for op in OPS:
            d = s[op]
            w.ops[op] = w.ops.get(op, 0) + d["ops"]
            w.errors += sum(d["errors"].values())
            w.latency.setdefault(op, Histogram()).merge(latency_hist(d))
    warm = [x for x in snapshots if x["phase"] == "warmup"]
    if warm:
        w.backlog_start = sum(_backlog(s) for s in warm[-1]["streams"] if s["stream"] in idx)
    if snapshots:
        w.backlog_end = sum(_backlog(s) for s in snapshots[-1]["streams"] if s["stream"] in idx)
    return w


def latency_value_ms(h: Histogram, stat: str) -> float | None:
    """A latency statistic of a merged histogram, in ms."""
    if h.n == 0:
        return None
    if stat == "mean":
        v = h.mean()
    elif stat == "max":
        v = float(h.max)
    else:
        v = h.percentile(float(stat[1:].replace("999", "99.9")))
    return None if v is None else v / 1e6


def throughput_fraction(w: Window) -> tuple[float, int, int]:
    """(completed / came due, completed, came due) for read+write+sync IOs of a window."""
    completed = sum(w.ops.values())
    due = completed + w.errors + max(0, w.backlog_end - w.backlog_start)
    return (completed / due if due else 1.0), completed, due


def latency_interval(h: Histogram, stat: str, batches: list[tuple[int, int]] | None) -> Interval:
    """95% CI of a latency statistic (ns); max is what happened, so its interval is a point."""
    if stat == "mean":
        ci = mean_interval(h, batches)
    elif stat == "max":
        ci = Interval(float(h.max), float(h.max))
    else:
        ci = percentile_interval(h, float(stat[1:].replace("999", "99.9")))
    assert ci is not None  # callers pass non-empty histograms
    return ci


def check(
    c: Criterion, w: Window, scope: str, batches: list[tuple[int, int]] | None = None
) -> Verdict:
    """Evaluate one criterion over one window (see the module doc for the decision rules).
    `batches` are (count, latency sum) per batch of snapshots, for the CI of a mean."""
    base = dict(
        criterion=c.id, description=c.describe(), scope=scope, start_s=w.start_s, end_s=w.end_s
    )
    if c.stat == "throughput":
        frac, completed, due = throughput_fraction(w)
        need = c.min_fraction or 0.0
        shortfall = need * due - completed
        ok = shortfall <= max(float(len(c.streams)), TOLERANCE_FRACTION * due)
        return Verdict(**base, passed=ok, value=frac, limit=need, unit="fraction", samples=due)
    limit = float(c.max_ms or 0.0)
    h = w.hist(c.op)
    value = latency_value_ms(h, c.stat)
    if value is None:
        # No IOs completed at all cannot meet a latency bound.
        return Verdict(**base, passed=False, value=None, limit=limit, unit="ms", samples=0)
    ci = latency_interval(h, c.stat, batches)
    decision = Interval(ci.low / 1e6, ci.high / 1e6).decide(limit)
    passed = decision == "pass" if scope == "window" else decision != "fail"
    return Verdict(
        **base,
        passed=passed,
        value=value,
        limit=limit,
        unit="ms",
        decision=decision,
        ci_low=ci.low / 1e6,
        ci_high=ci.high / 1e6,
        ci_bounded=ci.bounded,
        samples=h.n,
    )


def phase_span(
    plan: dict | None, indices: Iterable[int], spans: list[dict] | None = None
) -> Span | None:
    """The run time over which some plan streams were active: from the earliest start to the
    latest stop (None when all run for the whole run, or without a plan). A stream that waited
    for others (`after`) was active when the engine says (`spans` of the result)."""
    streams = (plan or {}).get("streams") or []
    spans = spans or []

    def phase(i: int, s: dict) -> tuple[int, int | None]:
        if s.get("after") and i < len(spans):
            started, ended = spans[i].get("started_ns"), spans[i].get("ended_ns")
            return int(started or 0), None if ended is None else int(ended)
        stop = s.get("stop_ms")
        return int(s.get("start_ms") or 0) * 1_000_000, None if stop is None else stop * 1_000_000

    phases = [phase(i, streams[i]) for i in indices if i < len(streams)]
    if not phases or all(start == 0 and stop is None for start, stop in phases):
        return None
    stops = [stop for _, stop in phases]
    stop = None if any(x is None for x in stops) else max(stops)  # type: ignore[type-var]
    return min(start for start, _ in phases), stop


def evaluate(
    criteria: Iterable[Criterion],
    stream_index: dict[str, int],
    snapshots: Sequence[dict],
    result: dict,
    qos_interval_s: float = 60.0,
    batches: BatchSeries | None = None,
    plan: dict | None = None,
) -> list[Verdict]:
    """Every verdict for one application instance; `stream_index` maps its stream names to
    plan indices. `batches` (from SnapshotCompactor) give means their batch-means CI. With
    the `plan`, per-interval criteria of phased streams cover their phase only."""
    verdicts: list[Verdict] = []
    for c in criteria:
        indices = [stream_index[name] for name in c.streams]
        series = None
        if batches is not None and c.stat == "mean":
            series = batches.series((i, op) for i in indices for op in _ops(c.op))
        window = window_from_result(result, snapshots, indices)
        verdicts.append(check(c, window, "window", series))
        if c.per_interval:
            span = phase_span(plan, indices, result.get("spans"))
            for k, w in enumerate(windows_from_snapshots(snapshots, indices, qos_interval_s, span)):
                verdicts.append(check(c, w, f"interval {k + 1}"))
    return verdicts


def failures(verdicts: Iterable[Verdict]) -> list[Verdict]:
    return [v for v in verdicts if not v.passed]


def undecided(verdicts: Iterable[Verdict]) -> list[Verdict]:
    """Whole-window criteria whose confidence interval straddles their limit."""
    return [v for v in verdicts if v.scope == "window" and v.decision == "inconclusive"]


def worst(verdicts: Iterable[Verdict]) -> Verdict | None:
    """The failed verdict furthest on the failing side of its limit: decided failures before
    those within noise."""
    failed = failures(verdicts)
    if not failed:
        return None
    return max(failed, key=lambda v: (v.decision == "fail", v.badness))


@dataclass(frozen=True)
class WindowFeed:
    """One measurement interval of a run whose engine merges the QoS windows itself
    (engine.Handle.set_window, a set with a group per stream): its span, its per (stream, op)
    count and latency sum (`[stream, op, ops, latency sum ns]`), and the window it closed (a
    snapshot of the window's intervals merged, as MergedSnapshot merges them), if it did."""

    start_ns: int
    end_ns: int
    batch: list
    window: dict | None


class SnapshotCompactor:
    """Merges measurement-phase snapshots into QoS-interval-sized ones as they arrive, so a
    long run's QoS evaluation holds one snapshot per QoS interval, not one per second.

    The merged snapshots have the engine's snapshot format (counts summed, histograms merged,
    backlog levels from the last second), and `windows_from_snapshots` cuts them into exactly
    the windows it would have cut from the originals. Of the warm-up only the last snapshot
    (its backlog level) is kept.

    It also keeps what a decision needs while the run is still going: the running totals of the
    measurement phase in the engine's result format (`result()`, the windows merged when asked),
    and per (stream, op) the latency count and sum of batches of snapshots (`batches`, for the
    CI of a mean). Memory is bounded by streams x histogram size, whatever the run's length.
    Each interval's streams are added in place (MergedSnapshot): a tile run of 1,200 streams
    merged every stream's histograms through JSON twice an interval before (issue 25).

    Or the engine merges the windows (WindowFeed): a measurement interval then brings only its
    counts, and the windows it closes come merged; the window still being filled comes from
    `filling` (engine.Handle.window_snapshot) when asked for. The same windows, counts and
    totals, without a document per stream per interval.
    """

    def __init__(self, window_s: float):
        self.window_s = window_s
        # Fed WindowFeeds: the engine's window being filled, as a snapshot (or None).
        self.filling: Callable[[], dict | None] | None = None
        self._warmup: dict | None = None
        self._done: list[MergedSnapshot] = []
        self._current: MergedSnapshot | None = None
        self._done_totals: MergedSnapshot | None = None  # the finished windows merged
        self._unmerged = 0  # finished windows not yet in _done_totals (merged when asked)
        self._span: tuple[int, int] | None = None  # (start_ns, end_ns) of the measurement
        self.batches = BatchSeries()

    def extend(self, snapshots: Iterable[dict]) -> None:
        for snap in snapshots:
            self.add(snap)

    def add(self, snap: dict | WindowFeed) -> None:
        if isinstance(snap, WindowFeed):
            self._add_feed(snap)
            return
        if snap["phase"] != "measure":
            self._warmup = snap
            return
        self.batches.add(
            {
                (s["stream"], op): (s[op]["ops"], _latency_sum(s[op]))
                for s in snap["streams"]
                for op in OPS
                if s[op]["ops"]
            }
        )
        start = snap["start_ns"] if self._span is None else self._span[0]
        self._span = (start, snap["end_ns"])
        if self._current is None:
            self._current = MergedSnapshot(snap)
        else:
            self._current.add(snap)
        current = self._current
        if (current.end_ns - current.start_ns) / 1e9 >= self.window_s - 1e-6:
            self._current = None
            self._close(current)

    def _add_feed(self, feed: WindowFeed) -> None:
        self.batches.add({(stream, op): (n, total) for stream, op, n, total in feed.batch})
        start = feed.start_ns if self._span is None else self._span[0]
        self._span = (start, feed.end_ns)
        if feed.window is not None:
            self._close(MergedSnapshot(feed.window))

    def _close(self, window: MergedSnapshot) -> None:
        self._done.append(window)
        self._unmerged += 1

    def _merged_done(self) -> MergedSnapshot | None:
        """The finished windows merged: the totals `result()` gives while a run is judged as
        it goes. Each window is merged in once, when first asked for: a run judged only at
        its end never merges them (1,200 streams' histograms, 12 ms a window)."""
        for window in self._done[len(self._done) - self._unmerged :]:
            if self._done_totals is None:
                self._done_totals = window.copy()
            else:
                self._done_totals.add_merged(window)
        self._unmerged = 0
        return self._done_totals

    def _filling(self) -> MergedSnapshot | None:
        if self.filling is None:
            return self._current
        snap = self.filling()
        return None if snap is None else MergedSnapshot(snap)

    def _windows(self) -> list[MergedSnapshot]:
        current = self._filling()
        return self._done + ([current] if current else [])

    def snapshots(self) -> list[dict]:
        out = [self._warmup] if self._warmup else []
        return out + [w.render() for w in self._windows()]

    def measured_s(self) -> float:
        """Seconds of the measurement phase seen so far."""
        if self._span is None:
            return 0.0
        return (self._span[1] - self._span[0]) / 1e9

    def result(self) -> dict | None:
        """The measurement phase so far in the engine's result format; None before it."""
        # Merging is associative (counts and sums added, extremes kept, levels from the last),
        # so the windows merged are the intervals merged.
        done, current = self._merged_done(), self._filling()
        if done is None and current is None:
            return None
        if done is None or current is None:
            t = (done or current).render()  # type: ignore[union-attr]
        else:
            totals = done.copy()
            totals.add_merged(current)
            t = totals.render()
        return {
            "complete": False,
            "measure_start_ns": t["start_ns"],
            "measure_end_ns": t["end_ns"],
            "streams": t["streams"],
        }


def _latency_sum(op: dict) -> int:
    """`latency_hist(op).sum` without building the histogram."""
    d = op.get("response")
    if d is None:
        d = op.get("service")
    return int(d.get("sum", 0)) if d else 0
