"""The SNIA PTS steady-state rule over rounds of a tracked metric.

A measurement window of the last WINDOW rounds is steady when the range of the metric in the
window (max - min) is at most MAX_RANGE of the window's mean, and the least-squares line
through the window changes the metric across it (slope x (WINDOW - 1) rounds) by at most
MAX_SLOPE of the mean (SSS PTS 2.0, methodology section 7). Used by settling before a study
(study/settle.py) and by `run --until-steady` (steadyrun.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WINDOW = 5  # rounds in the measurement window
MAX_RANGE = 0.20  # of the window's mean
MAX_SLOPE = 0.10  # of the window's mean, over the window
RULE = (
    f"last {WINDOW} rounds: range <= {MAX_RANGE:.0%} of their mean, least-squares slope over "
    f"the window <= {MAX_SLOPE:.0%} of it"
)


def least_squares(values: Sequence[float]) -> tuple[float, float]:
    """(slope per round, intercept at round 0) of the least-squares line through values."""
    n = len(values)
    if n < 2:
        return 0.0, (values[0] if values else 0.0)
    x_mean = (n - 1) / 2
    y_mean = sum(values) / n
    sxx = sum((x - x_mean) ** 2 for x in range(n))
    slope = sum((x - x_mean) * (y - y_mean) for x, y in enumerate(values)) / sxx
    return slope, y_mean - slope * x_mean


@dataclass(frozen=True)
class WindowCheck:
    """The rule applied to one measurement window (rounds first..last, 0-based)."""

    first: int
    last: int
    mean: float
    range_pct: float  # (max - min) / mean, percent
    slope_pct: float  # change of the least-squares line over the window / mean, percent
    slope: float  # per round, in the metric's unit
    intercept: float  # the line's value at the window's first round

    @property
    def range_ok(self) -> bool:
        return self.range_pct <= MAX_RANGE * 100 + 1e-9

    @property
    def slope_ok(self) -> bool:
        return abs(self.slope_pct) <= MAX_SLOPE * 100 + 1e-9

    @property
    def steady(self) -> bool:
        return self.range_ok and self.slope_ok

    def to_json(self) -> dict[str, float | int | bool]:
        return {
            "first_round": self.first + 1,
            "last_round": self.last + 1,
            "mean": self.mean,
            "range_pct": self.range_pct,
            "slope_pct": self.slope_pct,
            "slope_per_round": self.slope,
            "intercept": self.intercept,
            "range_ok": self.range_ok,
            "slope_ok": self.slope_ok,
        }


def check_window(rounds: Sequence[float], window: int = WINDOW) -> WindowCheck | None:
    """The rule on the last `window` rounds; None while there are fewer."""
    if len(rounds) < window:
        return None
    values = list(rounds[-window:])
    mean = sum(values) / window
    slope, intercept = least_squares(values)
    if mean <= 0:
        # Nothing measured in the window (a metric of 0 everywhere): no change to speak of.
        spread = max(values) - min(values)
        range_pct = 0.0 if spread == 0 else float("inf")
        slope_pct = 0.0 if slope == 0 else float("inf")
    else:
        range_pct = (max(values) - min(values)) / mean * 100
        slope_pct = slope * (window - 1) / mean * 100
    first = len(rounds) - window
    return WindowCheck(first, len(rounds) - 1, mean, range_pct, slope_pct, slope, intercept)


def steady(rounds: Sequence[float]) -> bool:
    """True when the last WINDOW rounds meet the range and slope limits."""
    check = check_window(rounds)
    return check is not None and check.steady


def trend_pct_per_round(rounds: Sequence[float]) -> float | None:
    """The least-squares slope over the last WINDOW rounds (or all, if fewer), in percent of
    their mean per round: how a run that did not settle was still moving."""
    values = list(rounds[-WINDOW:])
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    if mean <= 0:
        return None
    return least_squares(values)[0] / mean * 100
