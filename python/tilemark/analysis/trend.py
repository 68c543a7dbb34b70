"""Trend over repetitions: is a result stable, decaying or improving from run to run?

A metric measured once per repetition gets a least-squares line over the repetition numbers.
Its slope carries a 95% Student t confidence interval (n - 2 degrees of freedom, so at least
three repetitions), and slope and interval are stated as % of the first repetition's value per
repetition. The verdict (docs/studies.md, Repeated runs):

- `decaying`: the interval lies wholly on the worse side of zero (below for throughput, above
  for latency) **and** the last repetition differs from the first by more than `NOISE_FLOOR_PCT`
  in the worse direction. A slope that is certain but tiny is not decay; neither is one noisy
  bad run.
- `improving`: the same on the better side.
- `stable`: otherwise.
- None: fewer than three repetitions, or a metric missing from some of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tilemark.analysis.confidence import t95

NOISE_FLOOR_PCT = 5.0
MIN_REPETITIONS = 3
STABLE, DECAYING, IMPROVING = "stable", "decaying", "improving"


@dataclass
class Trend:
    """A least-squares line through (repetition, value) and its slope's 95% interval."""

    n: int
    slope: float  # per repetition, in the metric's unit
    ci_low: float | None
    ci_high: float | None
    first: float
    last: float

    def pct(self, value: float | None) -> float | None:
        """`value` as % of the first repetition's value."""
        if value is None or not self.first:
            return None
        return value / self.first * 100.0

    @property
    def change_pct(self) -> float | None:
        """Last vs first, in %."""
        return (self.last / self.first - 1.0) * 100.0 if self.first else None

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "slope": self.slope,
            "slope_ci": [self.ci_low, self.ci_high],
            "slope_pct": self.pct(self.slope),
            "slope_ci_pct": [self.pct(self.ci_low), self.pct(self.ci_high)],
            "last_vs_first_pct": self.change_pct,
        }


def fit(xs: list[float], ys: list[float]) -> Trend | None:
    """The least-squares trend of ys over xs; None for fewer than two points."""
    n = len(xs)
    if n < 2 or n != len(ys):
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    low = high = None
    if n >= MIN_REPETITIONS:
        sse = sum((y - (my + slope * (x - mx))) ** 2 for x, y in zip(xs, ys, strict=True))
        half = t95(n - 2) * math.sqrt(sse / (n - 2) / sxx)
        low, high = slope - half, slope + half
    return Trend(n, slope, low, high, ys[0], ys[-1])


def verdict(trend: Trend | None, better: str) -> str | None:
    """stable, decaying or improving (module doc); `better` is "higher" or "lower"."""
    if trend is None or trend.ci_low is None or trend.ci_high is None:
        return None
    change = trend.change_pct
    if change is None:
        return STABLE
    sign = 1.0 if better == "higher" else -1.0
    # In "better" units: positive is improvement.
    low, high = sorted((sign * trend.ci_low, sign * trend.ci_high))
    gain = sign * change
    if high < 0 and gain < -NOISE_FLOOR_PCT:
        return DECAYING
    if low > 0 and gain > NOISE_FLOOR_PCT:
        return IMPROVING
    return STABLE


def overall(verdicts: list[str | None]) -> str | None:
    """The repeat's verdict from its headline metrics: decaying if any decays, else improving
    if any improves, else stable; None when none could be judged."""
    judged = [v for v in verdicts if v is not None]
    if not judged:
        return None
    if DECAYING in judged:
        return DECAYING
    if IMPROVING in judged:
        return IMPROVING
    return STABLE
