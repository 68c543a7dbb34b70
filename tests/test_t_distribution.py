"""The Student t tail of analysis/confidence.py (the repeat study's level test) agrees with
scipy's, which the CLI no longer imports for it."""

from __future__ import annotations

import random

import pytest
from scipy import stats

from tilemark.analysis.confidence import t_sf


@pytest.mark.parametrize("df", [1, 2, 3, 5, 8, 13, 30, 100, 10_000])
def test_t_tail_matches_scipy_across_the_range(df):
    for t in (0.0, 1e-9, 0.3, 1.0, 2.0, 3.5, 7.0, 20.0, 1e3, -0.7, -4.0):
        assert t_sf(t, df) == pytest.approx(stats.t.sf(t, df), rel=1e-8, abs=1e-300), (t, df)


def test_t_tail_matches_scipy_at_random_points():
    rng = random.Random(7)
    for _ in range(2000):
        df, t = rng.randint(1, 200), rng.uniform(-40, 40)
        assert t_sf(t, df) == pytest.approx(stats.t.sf(t, df), rel=1e-8, abs=1e-300), (t, df)


def test_t_tail_limits():
    assert t_sf(0.0, 4) == 0.5
    assert t_sf(float("inf"), 4) == 0.0 and t_sf(float("-inf"), 4) == 1.0
