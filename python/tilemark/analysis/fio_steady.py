"""fio's steady-state criterion, with fio's own arithmetic (fio commit f5344384).

fio (HOWTO "Steady state"; steadystate.c) samples a job's IOPS, bandwidth or mean completion
latency every `ss_interval` (default 1 s), keeps the last `ss_dur / ss_interval` samples as a
rolling window, and once the window is full judges it after every new sample:

- `iops`, `bw`, `lat` (steadystate_deviation): the largest |sample - mean| over the window;
  with a percentage, 100 x that / mean. Met when it is below the limit (`<`).
- `*_slope` (steadystate_slope): the least-squares slope per sample through the window
  (x = 0..n-1, "assumes that all x values are equally spaced"); with a percentage, 100 x slope
  / mean, where fio divides the window's integer sum by n in integers. Met when its absolute
  value is below the limit.

Samples are integers as fio keeps them (uint64_t): per job, IOs (bytes) done since the last
check x the check's length in ms / (ss_interval_ms^2 / 1000), truncated, summed over the jobs
of a reporting group (steadystate_check); latency is the group's summed completion latency
over its completions in the interval, in ns, truncated. This module is the arithmetic only;
run/fio_steady.py feeds it a run's snapshots and ends the run when it is met.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

METRICS = ("iops", "bw", "lat")
CRITERIA = ("iops", "iops_slope", "bw", "bw_slope", "lat", "lat_slope")
UNITS = {"iops": "IOPS", "bw": "B/s", "lat": "ns"}


@dataclass(frozen=True)
class Criterion:
    """One fio criterion: `iops:10%` is Criterion("iops", False, 10.0, True)."""

    metric: str  # iops, bw or lat
    slope: bool
    limit: float
    percent: bool  # the limit is a percentage of the window's mean

    @property
    def name(self) -> str:
        return self.metric + ("_slope" if self.slope else "")

    def describe(self) -> str:
        """As fio spells it: 'iops:10%', 'bw_slope:1048576'."""
        limit = f"{self.limit:g}%" if self.percent else f"{self.limit:g}"
        return f"{self.name}:{limit}"


def rate_sample(count: int, rate_time_ms: int, interval_ms: int) -> int:
    """One job's IOPS (count = IOs) or bandwidth in B/s (count = bytes) for one check, as
    steadystate_check computes it: rate_time * delta / (interval * interval / 1000), in
    unsigned integers."""
    return rate_time_ms * count // (interval_ms * interval_ms // 1000)


def lat_sample(lat_sum_ns: float, samples: int) -> int:
    """A group's mean completion latency over one check, ns (group_lat_sum / samples, then
    stored as uint64_t); 0 without completions."""
    return int(lat_sum_ns / samples) if samples else 0


@dataclass(frozen=True)
class Judgement:
    """The criterion applied to one full window."""

    mean: float  # the window's mean (for a slope's percentage fio uses its integer part)
    deviation: float | None  # iops, bw, lat: largest |sample - mean|
    slope: float | None  # *_slope: least-squares slope per sample
    value: float  # what is compared with the limit (percent or absolute)
    met: bool

    def to_json(self) -> dict[str, float | bool | None]:
        finite = self.value if math.isfinite(self.value) else None
        return {
            "mean": self.mean,
            "max_deviation": self.deviation,
            "slope": self.slope,
            "criterion": finite,
            "met": self.met,
        }


def judge(window: Sequence[int], criterion: Criterion) -> Judgement:
    """fio's test of one full window of samples (oldest first)."""
    n = len(window)
    sum_y = sum(window)
    if not criterion.slope:
        # steadystate_deviation: mean = (double) sum_y / intervals
        mean = sum_y / n
        deviation = max(abs(v - mean) for v in window)
        value = _divide(100.0 * deviation, mean) if criterion.percent else deviation
        return Judgement(mean, deviation, None, value, value < criterion.limit)
    # steadystate_slope: sum_x = n(n-1)/2, sum_x_sq = (n-1)n(2n-1)/6 (td_steadystate_init)
    sum_x = n * (n - 1) // 2
    sum_x_sq = (n - 1) * n * (2 * n - 1) // 6
    sum_xy = sum(i * v for i, v in enumerate(window))
    denominator = sum_x_sq - sum_x * sum_x / n
    slope = (sum_xy - sum_x * sum_y / n) / denominator if denominator else math.nan
    value = _divide(100.0 * slope, sum_y // n) if criterion.percent else slope
    return Judgement(sum_y / n, None, slope, value, abs(value) < criterion.limit)


def _divide(a: float, b: float) -> float:
    """a / b as C doubles divide: infinite (or NaN) when b is 0, which no limit passes."""
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a)
    return a / b


def window_samples(duration_s: float, interval_s: float) -> int:
    """How many samples the rolling window holds: ss_dur / ss_interval."""
    return int(round(duration_s / interval_s, 9))
