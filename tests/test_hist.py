"""tilemark.hist mirrors the engine's histogram: buckets, error bound, merging, percentiles."""

import random

from tilemark.analysis.confidence import value_at_rank
from tilemark.hist import (
    MAX_VALUE_NS,
    Histogram,
    bucket_bounds,
    bucket_index,
    bucket_value,
    json_quantiles,
)


def test_bucket_bounds_round_trip_and_buckets_are_contiguous():
    last = bucket_index(MAX_VALUE_NS)
    previous_upper = 0
    for idx in range(last + 1):
        lower, upper = bucket_bounds(idx)
        assert lower == previous_upper, f"gap or overlap before bucket {idx}"
        assert upper > lower
        assert bucket_index(lower) == idx
        assert bucket_index(upper - 1) == idx
        previous_upper = upper


def test_bucket_index_is_monotonic():
    rng = random.Random(1)
    values = sorted(rng.randrange(0, MAX_VALUE_NS) for _ in range(20_000))
    indexes = [bucket_index(v) for v in values]
    assert indexes == sorted(indexes)


def test_values_below_128_ns_are_exact():
    for v in range(128):
        assert bucket_value(bucket_index(v)) == v


def test_relative_error_of_reported_value_is_at_most_1_in_128():
    rng = random.Random(2)
    lo, hi = 1_000, 60_000_000_000  # 1 us .. 60 s
    worst = 0.0
    for _ in range(50_000):
        v = int(lo * (hi / lo) ** rng.random())
        worst = max(worst, abs(bucket_value(bucket_index(v)) - v) / v)
    assert worst <= 1 / 128


def test_merge_equals_recording_everything_into_one():
    rng = random.Random(3)
    parts = [[rng.randrange(1, 10**9) for _ in range(rng.randrange(0, 500))] for _ in range(6)]
    one = Histogram()
    for values in parts:
        for v in values:
            one.record(v)
    merged = Histogram()
    for values in parts:
        h = Histogram()
        for v in values:
            h.record(v)
        merged.merge(Histogram.from_json(h.to_json()))
    assert merged.to_json() == one.to_json()
    assert (
        Histogram.merged([Histogram.from_json(one.to_json()), None, {}]).to_json() == one.to_json()
    )


def test_percentiles_of_known_data_within_1_percent():
    h = Histogram()
    for us in range(1, 100_001):  # 1 us .. 100 ms, one value each
        h.record(us * 1_000)
    for p, exact_us in [(50, 50_000), (90, 90_000), (99, 99_000), (99.9, 99_900)]:
        got_us = h.percentile(p) / 1_000
        assert abs(got_us - exact_us) / exact_us <= 0.01, (p, got_us)
    assert h.percentile(100) == 100_000_000
    assert h.mean() == sum(us * 1_000 for us in range(1, 100_001)) / 100_000


def test_empty_histogram_reports_none():
    h = Histogram.from_json(None)
    assert h.percentile(99) is None
    assert h.mean() is None


def test_the_reports_vectorised_bucket_values_are_the_histograms():
    import numpy as np

    from tilemark.report.data import _bucket_values

    idx = np.arange(0, 64 * 40, dtype=np.uint16)
    assert _bucket_values(idx).tolist() == [bucket_value(int(i)) for i in idx]


def reference_percentile(h: Histogram, p: float) -> float | None:
    """The value at percentile p, one bucket at a time: the bucket holding the ceil(p% * n)-th
    value, clamped to the exact least and largest (docs/engine-boundary.md)."""
    if h.n == 0:
        return None
    if p >= 100.0:
        return float(h.max)
    # confidence.py's rank reader walks the buckets on its own, apart from hist.py's one pass
    return value_at_rank(h, max(1, -(-h.n * p // 100)))


def test_quantiles_in_one_pass_equal_percentiles_one_at_a_time():
    rng = random.Random(5)
    for _ in range(300):
        h = Histogram()
        for _ in range(rng.choice([1, 2, 7, 50, 2000])):
            h.record(int(10 ** rng.uniform(0, 9)))
        ps = [rng.choice([0.0, 1.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0]) for _ in range(5)]
        assert h.quantiles(ps) == [reference_percentile(h, p) for p in ps]
        assert h.percentiles(ps) == {p: h.percentile(p) for p in ps}
        assert [h.percentile(p) for p in ps] == h.quantiles(ps)
    assert Histogram().quantiles([50.0, 99.0]) == [None, None]


def test_quantiles_read_from_a_document_equal_the_histograms():
    from tilemark.run.summary import _merged_quantiles

    rng = random.Random(9)
    ps = (0.0, 50.0, 99.0, 99.9, 100.0)
    for _ in range(200):
        hists = []
        for _ in range(rng.choice([1, 2, 3])):
            h = Histogram()
            for _ in range(rng.choice([0, 1, 3, 40, 500])):
                h.record(int(10 ** rng.uniform(0, 8)))
            hists.append(h)
        docs = [h.to_json() for h in hists]
        assert json_quantiles(docs[0], ps) == hists[0].quantiles(ps)
        merged = Histogram.merged(hists)
        assert _merged_quantiles([*docs, None], ps) == merged.quantiles(ps)
    assert json_quantiles(None, ps) == [None] * len(ps)
    assert json_quantiles(Histogram().to_json(), ps) == [None] * len(ps)
