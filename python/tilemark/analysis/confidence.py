"""How sure a QoS verdict is: confidence intervals of latency statistics from histograms.

A percentile of a window is an estimate of the storage's percentile at that load. Its 95%
confidence interval is distribution-free: the true p-quantile lies between the l-th and u-th
smallest of n samples with probability >= 95%, where l and u come from the binomial(n, p)
distribution (exact for small n, normal approximation with continuity correction for large).
The values at those ranks are read from the histogram the same way a percentile is (bucket
midpoints, clamped to the observed min and max), so a CI and the percentile it brackets agree to
the histogram's resolution. When u exceeds n the data cannot bound the quantile from above; the
interval then ends at the observed maximum and is marked `bounded = False`.

A mean's interval uses batch means (the batches are consecutive 1-s snapshots, merged pairwise
so at most MAX_BATCHES are kept): latencies in one second are correlated, batches much less so.
The variance is that of a ratio estimator (sum of latencies / count) over the batches, with a
Student t quantile. Without batches, the IO-level standard error of the histogram is used, which
understates the uncertainty of correlated samples.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from tilemark.hist import Histogram, bucket_value

CONFIDENCE = 0.95
Z95 = 1.959963984540054
MAX_BATCHES = 64
MIN_BATCHES = 4  # fewer batches say too little about the spread; use the IO-level error
# Two-sided 95% Student t quantiles by degrees of freedom (1..30); z beyond.
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
_EXACT_LIMIT = 2000  # exact binomial ranks up to this many samples


@dataclass(frozen=True)
class Interval:
    """A 95% confidence interval of a statistic, in the statistic's unit (ns here)."""

    low: float
    high: float
    bounded: bool = True  # False: too few samples to bound the statistic from above

    def decide(self, limit: float) -> str:
        """`pass` when the whole interval is at or below `limit`, `fail` when it is entirely
        above, else `inconclusive`."""
        if self.high <= limit:
            return "pass"
        if self.low > limit:
            return "fail"
        return "inconclusive"

    def decide_at_least(self, limit: float) -> str:
        """The same for a minimum (a rate): `pass` when the whole interval is at or above
        `limit`, `fail` when it is entirely below, else `inconclusive`."""
        if self.low >= limit:
            return "pass"
        if self.high < limit:
            return "fail"
        return "inconclusive"


def t95(df: int) -> float:
    """Two-sided 95% Student t quantile with `df` degrees of freedom."""
    if df < 1:
        return math.inf
    return _T95[df - 1] if df <= len(_T95) else Z95


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with `df` degrees of freedom: scipy.stats.t.sf to 1e-9 relative,
    in pure Python so that a repeat study's level test does not import scipy (1.4 s)."""
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    # P(|T| > |t|) = I_x(df/2, 1/2) with x = df / (df + t^2)
    tail = 0.5 * _beta_regularized(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def _beta_regularized(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b): its continued fraction (modified
    Lentz) on the side of x where it converges fast."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = a * math.log(x) + b * math.log1p(-x)
    log_front += math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        for num in (
            m * (b - m) * x / ((a + m2 - 1.0) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _binomial_cdf_ranks(n: int, p: float, alpha: float) -> tuple[int, int]:
    """Exact ranks: l = largest with P(B < l) <= alpha/2, u = smallest with P(B < u) >= 1-a/2,
    for B ~ binomial(n, p); P(X_(l) <= q_p <= X_(u)) >= 1 - alpha."""
    # pmf by recurrence in log space, so large n and tiny p neither overflow nor underflow.
    log_q = math.log1p(-p)
    log_p = math.log(p)
    cdf = 0.0
    lo, hi = 0, n + 1
    for k in range(n + 1):
        log_pmf = (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log_p) + (
            n - k
        ) * log_q
        # cdf before adding k is P(B <= k - 1) = P(B < k): rank k's lower-tail probability.
        if cdf <= alpha / 2:
            lo = k
        if cdf >= 1 - alpha / 2 and hi == n + 1:
            hi = k
        cdf += math.exp(log_pmf)
    if hi == n + 1 and cdf >= 1 - alpha / 2:
        hi = n + 1  # the upper rank lies beyond the sample
    return max(lo, 0), hi


def quantile_ranks(n: int, p: float, confidence: float = CONFIDENCE) -> tuple[int, int]:
    """1-based ranks (l, u) of the order statistics bracketing the p-quantile of n samples with
    the given confidence; l may be 0 (no lower bound) and u may exceed n (no upper bound)."""
    if n <= 0:
        return 0, 1
    p = min(max(p, 1e-12), 1 - 1e-12)
    alpha = 1 - confidence
    if n <= _EXACT_LIMIT:
        return _binomial_cdf_ranks(n, p, alpha)
    z = Z95 if confidence == CONFIDENCE else _z(confidence)
    half = z * math.sqrt(n * p * (1 - p))
    lo = math.floor(n * p - half)
    hi = math.ceil(n * p + half) + 1
    return max(lo, 0), hi


def _z(confidence: float) -> float:
    # Inverse normal CDF by bisection on erf; only used for non-default confidence levels.
    target = (1 + confidence) / 2
    lo, hi = 0.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def value_at_rank(h: Histogram, rank: int) -> float:
    """The histogram's value of the rank-th smallest sample (1-based), as percentiles read it."""
    if h.n == 0:
        raise ValueError("empty histogram")
    rank = min(max(rank, 1), h.n)
    seen = 0
    for idx in sorted(h.counts):
        seen += h.counts[idx]
        if seen >= rank:
            return float(min(max(bucket_value(idx), h.min), h.max))
    return float(h.max)


def percentile_interval(h: Histogram, pct: float) -> Interval | None:
    """95% CI of the pct-th percentile (ns); None for an empty histogram."""
    if h.n == 0:
        return None
    if pct >= 100:
        return Interval(float(h.max), float(h.max))
    lo_rank, hi_rank = quantile_ranks(h.n, pct / 100.0)
    low = value_at_rank(h, lo_rank) if lo_rank >= 1 else float(h.min)
    if hi_rank > h.n:
        return Interval(low, float(h.max), bounded=False)
    return Interval(low, value_at_rank(h, hi_rank))


def _histogram_sd(h: Histogram) -> float:
    mean = h.sum / h.n
    ss = sum(c * (bucket_value(i) - mean) ** 2 for i, c in h.counts.items())
    return math.sqrt(ss / (h.n - 1)) if h.n > 1 else 0.0


def mean_interval(
    h: Histogram, batches: Iterable[tuple[int, int]] | None = None
) -> Interval | None:
    """95% CI of the mean (ns) from batch (count, sum) pairs, else from the histogram alone."""
    if h.n == 0:
        return None
    mean = h.sum / h.n
    by_batches = ratio_interval(batches or ())
    if by_batches is not None:
        return _within_observed(h, by_batches.low, by_batches.high)
    if h.n < 2:
        return Interval(mean, mean, bounded=False)
    half = Z95 * _histogram_sd(h) / math.sqrt(h.n)
    return _within_observed(h, mean - half, mean + half)


def ratio_interval(batches: Iterable[tuple[float, float]]) -> Interval | None:
    """95% CI of sum(s) / sum(n) over batches of (n, s) by batch means: a mean latency (n IOs,
    s their latency sum) or a rate (n the batch's seconds or ns, s what it completed). None
    with fewer than MIN_BATCHES batches with n > 0 (too few to say how they spread)."""
    used = [(n, s) for n, s in batches if n > 0]
    if len(used) < MIN_BATCHES:
        return None
    k = len(used)
    total = sum(n for n, _ in used)
    ratio = sum(s for _, s in used) / total
    # Variance of a ratio of sums over k batches (the delta method).
    var = k / (k - 1) * sum((s - ratio * n) ** 2 for n, s in used) / total**2
    half = t95(k - 1) * math.sqrt(var)
    return Interval(ratio - half, ratio + half)


def _within_observed(h: Histogram, low: float, high: float) -> Interval:
    # A mean lies between the smallest and largest value: a symmetric t interval over few,
    # spread-out batches can reach below zero, which no latency does.
    return Interval(max(low, float(h.min)), min(high, float(h.max)))


class BatchSeries:
    """Per key (e.g. (stream, op)), the (count, latency sum) of consecutive batches of snapshots,
    at most MAX_BATCHES of them: when full, neighbours merge and each batch holds twice as many
    snapshots. Every key shares the same batch boundaries, so batches of several keys add up."""

    def __init__(self, max_batches: int = MAX_BATCHES):
        self.max_batches = max_batches
        self.width = 1  # snapshots per batch
        self._filled = 0  # snapshots in the last batch
        self._batches: list[dict[object, list[int]]] = []

    def add(self, values: dict[object, tuple[int, int]]) -> None:
        """One snapshot: key -> (count, sum)."""
        if not self._batches or self._filled >= self.width:
            if len(self._batches) >= self.max_batches:
                self._halve()
            self._batches.append({})
            self._filled = 0
        batch = self._batches[-1]
        for key, (n, s) in values.items():
            cell = batch.setdefault(key, [0, 0])
            cell[0] += n
            cell[1] += s
        self._filled += 1

    def _halve(self) -> None:
        merged = []
        for i in range(0, len(self._batches), 2):
            into = {k: list(v) for k, v in self._batches[i].items()}
            for other in self._batches[i + 1 : i + 2]:
                for key, (n, s) in other.items():
                    cell = into.setdefault(key, [0, 0])
                    cell[0] += n
                    cell[1] += s
            merged.append(into)
        self._batches = merged
        self.width *= 2
        self._filled = self.width  # the last merged batch counts as full

    def series(self, keys: Iterable[object]) -> list[tuple[int, int]]:
        """(count, sum) per batch, summed over `keys`."""
        keys = list(keys)
        out = []
        for batch in self._batches:
            n = s = 0
            for key in keys:
                cell = batch.get(key)
                if cell:
                    n += cell[0]
                    s += cell[1]
            out.append((n, s))
        return out

    def __len__(self) -> int:
        return len(self._batches)

    @classmethod
    def joined(cls, parts: Iterable[BatchSeries]) -> BatchSeries:
        """The batches of consecutive series one after the other (the rounds of a steady-state
        window, each batched on its own)."""
        out = cls()
        for part in parts:
            out._batches += [{k: list(v) for k, v in b.items()} for b in part._batches]
        out.max_batches = max(out.max_batches, len(out._batches))
        out._filled = out.width
        return out
