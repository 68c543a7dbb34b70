"""Confidence intervals of latency statistics on known distributions: percentile intervals
decide with enough samples and not with too few, cover the true quantile at their nominal
rate, and means use batch means; QoS criteria become pass / fail / inconclusive by them."""

from __future__ import annotations

import math
import random

import pytest

from tilemark.analysis.confidence import (
    BatchSeries,
    Interval,
    mean_interval,
    percentile_interval,
    quantile_ranks,
    value_at_rank,
)
from tilemark.analysis.qos import Criterion, Window, check
from tilemark.hist import Histogram, bucket_index

MS = 1_000_000


def exponential_hist(n: int, mean_ms: float = 1.0) -> Histogram:
    """n samples on an exact quantile grid of an exponential distribution (deterministic)."""
    counts: dict[int, int] = {}
    h = Histogram()
    lo = hi = None
    total = 0
    for i in range(n):
        v = int(-math.log(1 - (i + 0.5) / n) * mean_ms * MS)
        idx = bucket_index(v)
        counts[idx] = counts.get(idx, 0) + 1
        total += v
        lo = v if lo is None else min(lo, v)
        hi = v if hi is None else max(hi, v)
    h.counts, h.n, h.sum, h.min, h.max = counts, n, total, lo, hi
    return h


def p99_limit_1pct_above(h: Histogram) -> float:
    """A limit (ms) that the histogram's reported p99 sits 1% below."""
    return h.percentile(99) / MS / 0.99


def test_a_p99_1pct_below_its_limit_is_inconclusive_with_1000_samples():
    h = exponential_hist(1000)
    limit = p99_limit_1pct_above(h)
    ci = percentile_interval(h, 99)
    assert ci.low / MS < limit < ci.high / MS
    assert Interval(ci.low / MS, ci.high / MS).decide(limit) == "inconclusive"


def test_a_p99_1pct_below_its_limit_is_decided_with_a_million_samples():
    h = exponential_hist(1_000_000)
    limit = p99_limit_1pct_above(h)
    ci = percentile_interval(h, 99)
    assert ci.high / MS <= limit
    assert Interval(ci.low / MS, ci.high / MS).decide(limit) == "pass"
    # ... and a limit 3% below it a decided failure (a bucket is up to 1.6% wide, and the
    # lower bound may fall in the bucket below the p99's).
    assert Interval(ci.low / MS, ci.high / MS).decide(h.percentile(99) / MS / 1.03) == "fail"


@pytest.mark.parametrize("n", [50, 200, 1000, 1999, 2001, 50_000])
def test_order_statistic_ranks_bracket_n_p(n):
    lo, hi = quantile_ranks(n, 0.99)
    assert lo <= math.ceil(0.99 * n) <= hi
    assert lo >= 0


def test_too_few_samples_cannot_bound_a_p99_from_above():
    h = exponential_hist(100)
    ci = percentile_interval(h, 99)
    assert ci.bounded is False and ci.high == h.max


def test_percentile_intervals_cover_the_true_quantile_about_95_percent_of_the_time():
    rng = random.Random(7)
    true_p99 = -math.log(0.01) * MS  # exponential, mean 1 ms
    covered = 0
    trials = 300
    for _ in range(trials):
        h = Histogram()
        for _ in range(1500):
            h.record(int(rng.expovariate(1.0) * MS))
        ci = percentile_interval(h, 99)
        # The histogram reports bucket midpoints: allow its resolution (1/64 relative).
        if ci.low * (1 - 1 / 64) <= true_p99 <= ci.high * (1 + 1 / 64):
            covered += 1
    assert 0.90 <= covered / trials <= 1.0, covered


def test_value_at_rank_reads_the_histogram_like_a_percentile():
    h = exponential_hist(1000)
    assert value_at_rank(h, 990) == h.percentile(99)
    assert value_at_rank(h, 1) == h.percentile(0.1)


def test_batch_means_see_correlation_that_the_io_level_error_misses():
    # Latency that drifts slowly from second to second: IO-level error is tiny, batch means
    # honest.
    h = Histogram()
    batches = BatchSeries()
    rng = random.Random(3)
    for second in range(40):
        level = 5 + 3 * math.sin(second / 4)
        values = [int((level + rng.gauss(0, 0.2)) * MS) for _ in range(500)]
        for v in values:
            h.record(v)
        batches.add({("s", "read"): (len(values), sum(values))})
    iid = mean_interval(h)
    batched = mean_interval(h, batches.series([("s", "read")]))
    assert (batched.high - batched.low) > 5 * (iid.high - iid.low)
    assert batched.low < h.mean() < batched.high


def test_batch_series_stays_bounded_and_keeps_totals():
    b = BatchSeries(max_batches=8)
    for i in range(1000):
        b.add({"k": (1, i)})
    assert len(b) <= 8
    series = b.series(["k"])
    assert sum(n for n, _ in series) == 1000
    assert sum(s for _, s in series) == sum(range(1000))


def window(values_ms: list[float]) -> Window:
    h = Histogram()
    for v in values_ms:
        h.record(int(v * MS))
    return Window(0.0, 10.0, ops={"read": h.n}, latency={"read": h})


P99 = Criterion("read_p99", ("r",), "p99", op="read", max_ms=10)


def test_criteria_decide_pass_fail_or_inconclusive():
    ok = check(P99, window([1.0] * 5000), "window")
    assert ok.decision == "pass" and ok.passed and ok.margin_pct == pytest.approx(-90, abs=1)
    bad = check(P99, window([20.0] * 5000), "window")
    assert bad.decision == "fail" and not bad.passed and bad.margin_pct == pytest.approx(100, 1)
    edge = check(P99, window([1.0] * 990 + [50.0] * 10), "window")
    assert edge.decision == "inconclusive" and not edge.passed
    assert edge.ci_low < 10 < edge.ci_high


def test_an_inconclusive_interval_does_not_fail_a_per_interval_criterion():
    edge = window([1.0] * 990 + [50.0] * 10)
    v = check(P99, edge, "interval 3")
    assert v.decision == "inconclusive" and v.passed
    assert not check(P99, window([20.0] * 5000), "interval 3").passed


def test_a_mean_interval_stays_within_the_observed_values():
    # Few batches, wildly different: the t interval would reach below zero.
    h = Histogram()
    batches = []
    for level_ms in (1, 1, 1, 400):
        values = [int(level_ms * MS)] * 10
        for v in values:
            h.record(v)
        batches.append((10, sum(values)))
    ci = mean_interval(h, batches)
    assert h.min <= ci.low < h.mean() < ci.high <= h.max
