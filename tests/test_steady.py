"""The SNIA PTS steady-state rule (analysis/steady.py) on synthetic series."""

from __future__ import annotations

import random

import pytest

from tilemark.analysis.steady import check_window, least_squares, steady, trend_pct_per_round


def test_fewer_than_five_rounds_are_never_steady():
    assert check_window([100.0] * 4) is None
    assert not steady([100.0] * 4)


def test_a_flat_series_is_steady_with_zero_range_and_slope():
    check = check_window([1000.0] * 8)
    assert check is not None and check.steady
    assert (check.first, check.last) == (3, 7)
    assert check.range_pct == 0 and check.slope_pct == 0


def test_noise_within_the_band_is_steady():
    rng = random.Random(7)
    # +-8% uniform noise: the range stays under 20% of the mean, the fitted slope small.
    series = [1000.0 * (1 + rng.uniform(-0.08, 0.08)) for _ in range(12)]
    check = check_window(series)
    assert check is not None
    assert check.range_pct <= 16.0 + 1e-9
    assert check.steady == (abs(check.slope_pct) <= 10.0)
    assert check.steady  # this seed's last window: range 7.9%, slope -5.4%


def test_noise_beyond_the_band_is_not_steady():
    series = [1000, 1150, 880, 1120, 870]  # range 28% of the mean, no trend
    check = check_window(series)
    assert not check.range_ok and not check.steady


def test_a_ramp_is_not_steady_even_when_its_range_is_small():
    # +4.5% per round: range 18% (within 20%) but the line changes 18% over the window.
    series = [1000 * (1 + 0.045 * i) for i in range(5)]
    check = check_window(series)
    assert check.range_ok
    assert not check.slope_ok
    assert check.slope_pct == pytest.approx(0.045 * 4 / (1 + 0.09) * 100, rel=1e-9)
    assert trend_pct_per_round(series) == pytest.approx(check.slope_pct / 4)


def test_a_step_is_unsteady_until_five_rounds_after_it():
    series = [1000.0] * 6 + [700.0] * 6  # a 30% drop after round 6
    verdicts = [steady(series[: n + 1]) for n in range(len(series))]
    assert verdicts[:4] == [False] * 4  # too few rounds
    assert verdicts[4] and verdicts[5]  # five flat rounds before the step
    assert verdicts[6:10] == [False] * 4  # the step is inside the window
    assert verdicts[10] and verdicts[11]  # five rounds at the new level


def test_least_squares_recovers_a_line():
    slope, intercept = least_squares([3.0 + 2.0 * x for x in range(5)])
    assert slope == pytest.approx(2.0)
    assert intercept == pytest.approx(3.0)
