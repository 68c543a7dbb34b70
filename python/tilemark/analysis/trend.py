"""Trend over repetitions: is a result stable, decaying or improving from run to run?

A metric measured once per repetition gets a least-squares line over the repetition numbers.
Its slope carries a 95% Student t confidence interval (n - 2 degrees of freedom, so at least
three repetitions), and slope and interval are stated as % of the first repetition's value per
repetition. The verdict (docs/studies.md, Repeated runs):

- `decaying`: the last repetition differs from the first by more than `NOISE_FLOOR_PCT` in the
  worse direction, **and** either the slope's interval lies wholly on the worse side of zero
  (below for throughput, above for latency) or the series shifted to a worse level: a change of
  level between two repetitions (at least two on each side) whose t test (pooled variance) is
  significant at 1% after a Bonferroni correction over every place the shift could be. A step
  (storage that falls from one level to another after a few runs, as tiering or a full cache
  does) is a poor straight line, so its slope interval can straddle zero however clear the step
  is; the level test sees it. A slope that is certain but tiny is not decay; neither is one
  noisy bad run. On eight repetitions of pure noise (+-4%) the slope test alone calls 2% of
  series a trend; with the level test at 1% it is still 2% (tests/test_decay.py).
- `improving`: the same on the better side.
- `inconclusive`: neither, but the slope's interval reaches beyond +-`NOISE_FLOOR_PCT` of the
  first repetition per repetition: the repetitions cannot tell a stable result from a trend
  (three noisy repetitions: "+166%, CI -332..+499%" is not "stable").
- `stable`: otherwise: no trend, and the interval rules out one beyond the noise floor.
- None: fewer than three repetitions, or a metric missing from some of them (two repetitions
  are compared as before and after instead: analysis/beforeafter.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tilemark.analysis.confidence import t95, t_sf

NOISE_FLOOR_PCT = 5.0
MIN_REPETITIONS = 3
MIN_SIDE = 2  # repetitions on each side of a level shift
SHIFT_ALPHA = 0.01
STABLE, DECAYING, IMPROVING, INCONCLUSIVE = "stable", "decaying", "improving", "inconclusive"


@dataclass
class Trend:
    """A least-squares line through (repetition, value) and its slope's 95% interval."""

    n: int
    slope: float  # per repetition, in the metric's unit
    ci_low: float | None
    ci_high: float | None
    first: float
    last: float
    shift: Shift | None = None

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
            "shift": self.shift.to_json(self.first) if self.shift else None,
        }


@dataclass
class Shift:
    """The most significant change of level in a series: from repetition `at` on, the mean is
    `after` instead of `before`; `p` is its pooled-variance t test's two-sided p-value,
    multiplied by the number of places tried (Bonferroni)."""

    at: int  # the first repetition (1-based) of the new level
    before: float
    after: float
    p: float

    @property
    def significant(self) -> bool:
        return self.p < SHIFT_ALPHA

    def to_json(self, first: float) -> dict[str, Any]:
        return {
            "at": self.at,
            "before": self.before,
            "after": self.after,
            "change_pct": (self.after / self.before - 1.0) * 100.0 if self.before else None,
            "p": self.p,
            "significant": self.significant,
        }


def _shift_p(a: list[float], b: list[float]) -> float:
    """Two-sided p-value of the t test that a and b have the same mean, with the variance
    pooled over both (the storage's run-to-run noise is one thing; two runs alone say little
    about it, and a pair that happens to agree closely must not make any difference look
    significant)."""
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    df = len(a) + len(b) - 2
    ss = sum((x - ma) ** 2 for x in a) + sum((x - mb) ** 2 for x in b)
    se = math.sqrt(ss / df * (1 / len(a) + 1 / len(b)))
    if se == 0:
        return 0.0 if ma != mb else 1.0
    return 2 * t_sf(abs(mb - ma) / se, df)


def level_shift(ys: list[float]) -> Shift | None:
    """The most significant single change of level, trying every split that leaves at least
    MIN_SIDE values on each side; None for a series too short to split."""
    splits = range(MIN_SIDE, len(ys) - MIN_SIDE + 1)
    if not splits:
        return None
    best: Shift | None = None
    for k in splits:
        before, after = ys[:k], ys[k:]
        p = min(1.0, _shift_p(before, after) * len(splits))
        if best is None or p < best.p:
            best = Shift(k + 1, sum(before) / len(before), sum(after) / len(after), p)
    return best


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
    return Trend(n, slope, low, high, ys[0], ys[-1], level_shift(ys))


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
    shift = trend.shift if trend.shift is not None and trend.shift.significant else None
    shifted = 0.0 if shift is None else sign * (shift.after - shift.before)
    if gain < -NOISE_FLOOR_PCT and (high < 0 or shifted < 0):
        return DECAYING
    if gain > NOISE_FLOOR_PCT and (low > 0 or shifted > 0):
        return IMPROVING
    widest = max(abs(trend.pct(trend.ci_low) or 0.0), abs(trend.pct(trend.ci_high) or 0.0))
    if widest > NOISE_FLOOR_PCT:
        return INCONCLUSIVE
    return STABLE


def overall(verdicts: list[str | None]) -> str | None:
    """The repeat's verdict from its headline metrics: decaying if any decays, else improving
    if any improves, else inconclusive if any cannot tell, else stable; None when none could
    be judged."""
    judged = [v for v in verdicts if v is not None]
    if not judged:
        return None
    for v in (DECAYING, IMPROVING, INCONCLUSIVE):
        if v in judged:
            return v
    return STABLE
