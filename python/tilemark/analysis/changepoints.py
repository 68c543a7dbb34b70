"""Change points inside a run: where the storage left the level it held (docs/results-schema.md).

A run that holds 1,000 IOPS for ten minutes and 690 after that has two results, not one mean.
`ChangeTracker` sees every interval snapshot of a run as it arrives and keeps, per measured
interval, its length and IO count (total IOPS) and, per window of `P99_WINDOW` intervals, the
p99 of the window's merged response-time histogram. At the end of the run `detect` looks for
shifts of level in both series with PELT (least-squares cost; `pelt_l2` below, the algorithm of
`ruptures.Pelt(model="l2", jump=1)` written out: importing ruptures, which imports scipy.stats,
took 1.3-2 s at the end of every run):

- **Penalty scaled to the noise.** The noise sigma of a series is estimated robustly from its
  first differences (median absolute deviation / 0.6745 / sqrt 2: a level shift moves one
  difference, noise moves all of them), floored at 1% of the series' median. The penalty is
  `PENALTY_BETA * sigma^2 * log(n)` (BIC-like), so a noisy series needs a bigger shift.
- **Only changes that matter.** A change is kept when the segments on both sides last at least
  `MIN_SEGMENT` points, their means differ by at least `MIN_CHANGE_PCT` percent and by at
  least `MIN_T` standard errors of that difference, and at least `MIN_CONSISTENT` of each
  side's points lie nearer their own side's mean (a level that lasts, not a short blip). The
  weakest change that fails is dropped and its neighbours' segments merged, until every change
  left passes. A steady run has none.
- **Long runs stay cheap.** Series longer than `MAX_POINTS` are binned (IOPS by summing IOs and
  time, p99 by merging windows), so detection is fast whatever the run's length; a change's
  time is then known to one bin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tilemark.hist import Histogram

P99_WINDOW = 5  # intervals merged for one p99 point
MIN_SEGMENT = 4  # points on each side of a change
MIN_CHANGE_PCT = 15.0
MIN_T = 4.0  # |after - before| / its standard error
MIN_CONSISTENT = 0.75  # share of a side's points nearer its own mean than the other side's
PENALTY_BETA = 2.0
MAX_POINTS = 600
NOISE_FLOOR = 0.01  # sigma at least 1% of the median: a flat series has no zero noise
METRIC_WORDS = {"iops": "IOPS", "p99_ms": "p99 latency"}


@dataclass
class _Point:
    start_ns: int
    end_ns: int
    value: float


def _pairs(points: list[Any], merge: Any) -> list[Any]:
    return [merge(points[i : i + 2]) for i in range(0, len(points), 2)]


class ChangeTracker:
    """Keeps the series of a run and finds its change points at the end (module doc).

    Memory is bounded whatever the run's length: at most 2 x MAX_POINTS IOPS points (three
    numbers each) and p99 windows, and one open histogram. When a series fills up, adjacent
    points are merged pairwise and later points cover twice as many intervals: IOPS by adding
    IOs and time; p99 windows keep the larger p99 of the two (the merged window's p99 lies
    between them, so this errs towards the tail)."""

    def __init__(self, p99_window: int = P99_WINDOW):
        self.p99_window = p99_window
        self.intervals: list[tuple[int, int, int]] = []  # (start_ns, end_ns, ops)
        self.p99: list[_Point] = []
        self._per_point = 1  # measured intervals per IOPS point
        self._pending: list[tuple[int, int, int]] = []
        self._window = Histogram()
        self._window_start: int | None = None
        self._window_count = 0
        self._last_end = 0

    def add(self, snapshots: list[dict[str, Any]]) -> None:
        for snap in snapshots:
            if snap.get("phase") != "measure":
                continue
            start, end = int(snap["start_ns"]), int(snap["end_ns"])
            ops = 0
            for s in snap.get("streams", []):
                for kind in ("read", "write"):
                    op = s.get(kind)
                    if op:
                        ops += int(op.get("ops", 0))
                        # latency_hist(op), merged without building it
                        latency = op.get("response")
                        if latency is None:
                            latency = op.get("service")
                        self._window.merge_json(latency)
            self._pending.append((start, end, ops))
            if len(self._pending) >= self._per_point:
                self.intervals.append(_merged_interval(self._pending))
                self._pending = []
                if len(self.intervals) >= 2 * MAX_POINTS:
                    self.intervals = _pairs(self.intervals, _merged_interval)
                    self._per_point *= 2
            if self._window_start is None:
                self._window_start = start
            self._window_count += 1
            self._last_end = end
            if self._window_count >= self.p99_window:
                self._close_window()

    def _close_window(self) -> None:
        p99 = self._window.percentile(99.0) if self._window.n else None
        if p99 is not None and self._window_start is not None:
            self.p99.append(_Point(self._window_start, self._last_end, p99 / 1e6))
            if len(self.p99) >= 2 * MAX_POINTS:
                self.p99 = _pairs(
                    self.p99,
                    lambda w: _Point(w[0].start_ns, w[-1].end_ns, max(p.value for p in w)),
                )
                self.p99_window *= 2
        self._window = Histogram()
        self._window_start = None
        self._window_count = 0

    def detect(self, started_at_ns: int | None = None) -> list[dict[str, Any]]:
        """The significant change points of the run, in time order."""
        rows = self.intervals + ([_merged_interval(self._pending)] if self._pending else [])
        found = find_changes(_binned_rates(rows), "iops", started_at_ns)
        found += find_changes(_binned(self.p99), "p99_ms", started_at_ns)
        return sorted(found, key=lambda c: (c["t_s"], c["metric"]))


def _merged_interval(rows: list[tuple[int, int, int]]) -> tuple[int, int, int]:
    return rows[0][0], rows[-1][1], sum(r[2] for r in rows)


def iops_series(rows: list[tuple[int, int, int]]) -> list[_Point]:
    """IOPS per measured interval; a last interval shorter than half the others (the run's
    end) is left out: its rate says little."""
    if not rows:
        return []
    lengths = sorted(e - s for s, e, _ in rows)
    typical = lengths[len(lengths) // 2]
    return [
        _Point(s, e, ops / ((e - s) / 1e9))
        for s, e, ops in rows
        if e > s and (e - s) >= typical / 2
    ]


def _binned_rates(rows: list[tuple[int, int, int]]) -> list[_Point]:
    points = iops_series(rows)
    if len(points) <= MAX_POINTS:
        return points
    k = math.ceil(len(points) / MAX_POINTS)
    out = []
    for i in range(0, len(points), k):
        chunk = points[i : i + k]
        seconds = sum(p.end_ns - p.start_ns for p in chunk) / 1e9
        ios = sum(p.value * (p.end_ns - p.start_ns) / 1e9 for p in chunk)
        out.append(_Point(chunk[0].start_ns, chunk[-1].end_ns, ios / seconds))
    return out


def _binned(points: list[_Point]) -> list[_Point]:
    # p99 windows binned further for very long runs: the median of each bin's windows.
    if len(points) <= MAX_POINTS:
        return points
    k = math.ceil(len(points) / MAX_POINTS)
    out = []
    for i in range(0, len(points), k):
        chunk = points[i : i + k]
        values = sorted(p.value for p in chunk)
        out.append(_Point(chunk[0].start_ns, chunk[-1].end_ns, values[len(values) // 2]))
    return out


def noise_sigma(values: list[float]) -> float:
    """Robust noise level of a series: the MAD of its first differences, as a sigma."""
    if len(values) < 3:
        return 0.0
    diffs = sorted(abs(b - a) for a, b in zip(values, values[1:], strict=False))
    mad = diffs[len(diffs) // 2]
    median = sorted(values)[len(values) // 2]
    return max(mad / 0.6745 / math.sqrt(2.0), NOISE_FLOOR * abs(median))


def _consistent(points: list[float], own: float, other: float) -> bool:
    near = sum(abs(p - own) < abs(p - other) for p in points)
    return near >= MIN_CONSISTENT * len(points)


def _segments_ok(values: list[float], breaks: list[int], sigma: float) -> int | None:
    """Index (into `breaks`) of the weakest change that is not significant, or None."""
    bounds = [0, *breaks, len(values)]
    worst: tuple[float, int] | None = None
    for i in range(1, len(bounds) - 1):
        left = values[bounds[i - 1] : bounds[i]]
        right = values[bounds[i] : bounds[i + 1]]
        before, after = sum(left) / len(left), sum(right) / len(right)
        rel = abs(after - before) / abs(before) * 100 if before else math.inf
        se = sigma * math.sqrt(1 / len(left) + 1 / len(right))
        t = abs(after - before) / se if se > 0 else math.inf
        ok = len(left) >= MIN_SEGMENT and len(right) >= MIN_SEGMENT
        ok = ok and rel >= MIN_CHANGE_PCT and t >= MIN_T
        # A level that lasts: most points of each side are nearer their own side's mean (a
        # two-interval blip inside a four-point segment is not a new level).
        ok = ok and _consistent(left, before, after) and _consistent(right, after, before)
        if not ok:
            strength = min(rel / MIN_CHANGE_PCT, t / MIN_T)
            if worst is None or strength < worst[0]:
                worst = (strength, i - 1)
    return None if worst is None else worst[1]


def pelt_l2(values: list[float], penalty: float, min_size: int) -> list[int]:
    """Optimal partition of `values` under a least-squares cost plus `penalty` per segment
    (Killick et al. 2012, PELT): the indices where segments start, without 0 and n.

    F(b) = min over admissible t of F(t) + C(t, b) + penalty, with C the sum of squared
    deviations from the segment's mean (from prefix sums); a t whose F(t) + C(t, b) exceeds
    F(b) can never start the last segment of a later optimum and leaves the admissible set.
    Candidates and ties are taken in the order ruptures takes them, so both give the same
    breakpoints (tests/test_decay.py compares them)."""
    n = len(values)
    mean = sum(values) / n if n else 0.0
    s1 = [0.0] * (n + 1)  # prefix sums of the centred series and of its squares
    s2 = [0.0] * (n + 1)
    for i, v in enumerate(values):
        d = v - mean
        s1[i + 1] = s1[i] + d
        s2[i + 1] = s2[i] + d * d

    def cost(a: int, b: int) -> float:
        s = s1[b] - s1[a]
        return max(s2[b] - s2[a] - s * s / (b - a), 0.0)

    best: dict[int, float] = {0: 0.0}  # F(t): the optimal total cost of values[:t]
    last: dict[int, int] = {0: 0}  # where the last segment of that optimum starts
    admissible: list[int] = []
    for b in [*range(min_size, n), n]:
        admissible.append(b - min_size)
        totals = [(t, best[t] + (cost(t, b) + penalty)) for t in admissible if t in best]
        t_min, f_min = min(totals, key=lambda pair: pair[1])
        best[b], last[b] = f_min, t_min
        admissible = [t for t, f in totals if f <= f_min + penalty]
    breaks = []
    b = n
    while b > 0:
        b = last[b]
        if b > 0:
            breaks.append(b)
    return sorted(breaks)


def change_points(values: list[float]) -> list[int]:
    """Indices where a significant change of level starts (module doc)."""
    n = len(values)
    if n < 2 * MIN_SEGMENT:
        return []
    sigma = noise_sigma(values)
    if sigma <= 0:
        return []
    penalty = PENALTY_BETA * sigma * sigma * math.log(n)
    breaks = pelt_l2([float(v) for v in values], penalty, MIN_SEGMENT)
    while breaks:
        weakest = _segments_ok(values, breaks, sigma)
        if weakest is None:
            break
        del breaks[weakest]
    return breaks


def find_changes(
    points: list[_Point], metric: str, started_at_ns: int | None = None
) -> list[dict[str, Any]]:
    """The change points of one series as run.json keeps them."""
    values = [p.value for p in points]
    breaks = change_points(values)
    bounds = [0, *breaks, len(values)]
    out = []
    for i in range(1, len(bounds) - 1):
        left = values[bounds[i - 1] : bounds[i]]
        right = values[bounds[i] : bounds[i + 1]]
        before, after = sum(left) / len(left), sum(right) / len(right)
        at_ns = points[bounds[i]].start_ns
        out.append(
            {
                "metric": metric,
                "t_s": at_ns / 1e9,
                "at": _iso(started_at_ns + at_ns) if started_at_ns else None,
                "before": before,
                "after": after,
                "change_pct": (after / before - 1.0) * 100.0 if before else None,
                "before_s": (points[bounds[i]].start_ns - points[bounds[i - 1]].start_ns) / 1e9,
                "after_s": (points[bounds[i + 1] - 1].end_ns - at_ns) / 1e9,
            }
        )
    return out


def _iso(ns: int) -> str:
    moment = datetime.fromtimestamp(ns / 1e9, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def change_text(c: dict[str, Any]) -> str:
    """'IOPS fell 31% at 14:02:10 UTC (12.3 s into the run): 1,000 -> 690'."""
    word = METRIC_WORDS.get(c["metric"], c["metric"])
    pct = c.get("change_pct")
    verb = "rose" if pct is not None and pct > 0 else "fell"
    amount = f" {abs(pct):.0f}%" if pct is not None else ""
    when = (
        f"at {c['at'][11:19]} UTC ({c['t_s']:.1f} s into the run)"
        if c.get("at")
        else (f"at {c['t_s']:.1f} s into the run")
    )
    unit = " ms" if c["metric"] == "p99_ms" else ""
    digits = ",.3g" if c["metric"] == "p99_ms" else ",.0f"
    return (
        f"{word} {verb}{amount} {when}: {c['before']:{digits}}{unit} -> {c['after']:{digits}}{unit}"
    )
