"""Latency histograms, the Python mirror of the engine's (docs/engine-boundary.md, Histograms).

Values are nanoseconds. Buckets are log-linear (64 per power of two above 128 ns), so every
reported value is within 1/128 of the true one. Histograms merge exactly by adding counts;
percentiles of an aggregate are always computed from the merged histogram, never averaged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

SUB_BUCKET_BITS = 6
SUB_BUCKETS = 1 << SUB_BUCKET_BITS  # 64 buckets per power of two
MAX_VALUE_NS = 1 << 42
# The latency figures the results files keep per histogram (Histogram.stats), in this order.
LATENCY_STATS = ("mean", "p50", "p99", "p999", "max")


def bucket_index(value_ns: int) -> int:
    """Bucket index of a value (same formula as the engine)."""
    v = min(max(int(value_ns), 0), MAX_VALUE_NS)
    if v < 2 * SUB_BUCKETS:
        return v
    shift = v.bit_length() - 1 - SUB_BUCKET_BITS
    return SUB_BUCKETS * shift + (v >> shift)


def bucket_bounds(idx: int) -> tuple[int, int]:
    """[lower, upper) value range of bucket `idx`."""
    if idx < 2 * SUB_BUCKETS:
        return idx, idx + 1
    shift = idx // SUB_BUCKETS - 1
    lower = (idx - SUB_BUCKETS * shift) << shift
    return lower, lower + (1 << shift)


def bucket_value(idx: int) -> float:
    """The value a bucket reports: its midpoint (exact below 128 ns)."""
    lo, hi = bucket_bounds(idx)
    return float(lo) if hi - lo == 1 else (lo + hi) / 2.0


@dataclass
class Histogram:
    """A mergeable latency histogram (ns)."""

    counts: dict[int, int] = field(default_factory=dict)
    n: int = 0
    sum: int = 0
    min: int | None = None
    max: int | None = None

    @classmethod
    def from_json(cls, d: dict | None) -> Histogram:
        h = cls()
        if not d:
            return h
        h.counts = {int(i): int(c) for i, c in d.get("b", [])}
        h.n = int(d.get("n", 0))
        h.sum = int(d.get("sum", 0))
        h.min = d.get("min") if h.n else None
        h.max = d.get("max") if h.n else None
        return h

    @classmethod
    def merged(cls, hists: Iterable[Histogram | dict | None]) -> Histogram:
        out = cls()
        for h in hists:
            out.merge(h if isinstance(h, Histogram) else cls.from_json(h))
        return out

    def to_json(self) -> dict:
        return {
            "n": self.n,
            "sum": self.sum,
            "min": self.min if self.min is not None else 0,
            "max": self.max if self.max is not None else 0,
            "b": [[i, self.counts[i]] for i in sorted(self.counts)],
        }

    def record(self, value_ns: int, count: int = 1) -> None:
        idx = bucket_index(value_ns)
        self.counts[idx] = self.counts.get(idx, 0) + count
        self.n += count
        self.sum += int(value_ns) * count
        self.min = value_ns if self.min is None else min(self.min, value_ns)
        self.max = value_ns if self.max is None else max(self.max, value_ns)

    def merge(self, other: Histogram) -> Histogram:
        if other.n == 0:
            return self
        for i, c in other.counts.items():
            self.counts[i] = self.counts.get(i, 0) + c
        self.n += other.n
        self.sum += other.sum
        self.min = other.min if self.min is None else min(self.min, other.min)
        self.max = other.max if self.max is None else max(self.max, other.max)
        return self

    def merge_json(self, d: dict | None) -> Histogram:
        """`merge(Histogram.from_json(d))` without building the histogram in between: a run's
        QoS windows merge every stream's histograms every interval (analysis/qos.py)."""
        if not d:
            return self
        n = int(d.get("n", 0))
        if n == 0:
            return self
        counts = self.counts
        for i, c in d.get("b", []):
            counts[i] = counts.get(i, 0) + c
        self.n += n
        self.sum += int(d.get("sum", 0))
        low, high = d.get("min"), d.get("max")
        self.min = low if self.min is None else min(self.min, low)
        self.max = high if self.max is None else max(self.max, high)
        return self

    def mean(self) -> float | None:
        """Exact mean in ns (the engine sums exact values)."""
        return self.sum / self.n if self.n else None

    def percentile(self, p: float) -> float | None:
        """Value (ns) at percentile p in [0, 100]: the bucket holding the ceil(p% * n)-th value."""
        return self.quantiles((p,))[0]

    def percentiles(self, ps: Iterable[float]) -> dict[float, float | None]:
        ps = list(ps)
        return dict(zip(ps, self.quantiles(ps), strict=True))

    def quantiles(self, ps: Iterable[float]) -> list[float | None]:
        """`[percentile(p) for p in ps]` in one pass over the buckets, sorted once (a run of
        10,000 streams summarizes 20,000 histograms of hundreds of buckets, three percentiles
        each): the value at p is the bucket holding the ceil(p% * n)-th value, clamped to the
        exact least and largest; p >= 100 is the largest."""
        counts = self.counts
        buckets = ((idx, counts[idx]) for idx in sorted(counts))
        return _quantiles(buckets, self.n, self.min, self.max, list(ps))

    def stats(self) -> dict[str, float | None]:
        """The LATENCY_STATS in ns (None when empty)."""
        p50, p99, p999 = self.quantiles((50.0, 99.0, 99.9))
        return {
            "mean": self.mean(),
            "p50": p50,
            "p99": p99,
            "p999": p999,
            "max": float(self.max) if self.n else None,
        }


def _quantiles(
    buckets: Iterable, n: int, low: int | None, high: int | None, ps: list[float]
) -> list[float | None]:
    """Histogram.quantiles over (bucket, count) pairs in increasing bucket order."""
    if n == 0:
        return [None] * len(ps)
    out: list[float | None] = [float(high)] * len(ps)  # type: ignore[arg-type]
    # ceil(n * p / 100) without float drift for common p
    pending = sorted(
        ((max(1, -(-n * p // 100)), k) for k, p in enumerate(ps) if p < 100.0), reverse=True
    )
    seen = 0
    for idx, count in buckets:
        if not pending:
            break
        seen += count
        while pending and seen >= pending[-1][0]:
            v = bucket_value(idx)
            out[pending.pop()[1]] = float(min(max(v, low), high))  # type: ignore[type-var]
    return out


def json_quantiles(d: dict | None, ps: Iterable[float]) -> list[float | None]:
    """`Histogram.from_json(d).quantiles(ps)` read straight from the document, whose bucket
    pairs are in increasing bucket order as both the engine and `to_json` write them: the live
    view reads a few percentiles of every group each interval, and building each histogram's
    dict first was most of its work."""
    ps = list(ps)
    n = int(d.get("n", 0)) if d else 0
    if not n:
        return [None] * len(ps)
    return _quantiles(d.get("b", []), n, d.get("min"), d.get("max"), ps)  # type: ignore[union-attr]


def latency_hist(op: dict | None) -> Histogram:
    """An op kind's latency as QoS and reports use it: the response-time histogram (open loop,
    from each IO's intended issue time), else the service-time one. Closed-loop streams send no
    response histogram because there response time is service time."""
    if not op:
        return Histogram()
    response = op.get("response")
    return Histogram.from_json(response if response is not None else op.get("service"))
