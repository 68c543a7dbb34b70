"""summarize() and interval_rows() give exact rates and histogram-accurate latencies."""

import math
import random

import pytest

from engine_data import (
    latencies,
    op,
    plan,
    result_for,
    snapshot,
    stream_counters,
)
from tilemark.run.summary import errno_name, interval_rows, summarize


def exact_percentile(values, p):
    """Nearest-rank percentile, the definition tilemark.hist uses."""
    ordered = sorted(values)
    rank = max(1, math.ceil(len(ordered) * p / 100))
    return ordered[rank - 1]


def assert_close(got, want, rel=0.01):
    assert got is not None
    assert abs(got - want) <= rel * abs(want), (got, want)


@pytest.fixture
def data():
    rng = random.Random(11)
    d = {
        "read0": latencies(rng, 1000, 100_000, 5_000_000),
        "write0": latencies(rng, 500, 200_000, 8_000_000),
        "svc1": latencies(rng, 400, 50_000, 1_000_000),
    }
    d["resp1"] = [v + rng.randrange(0, 3_000_000) for v in d["svc1"]]
    return d


def build_result(d):
    return result_for(
        [
            {
                "stream": 0,
                "read": op(d["read0"], 8192),
                "write": op(d["write0"], 8192, errors={"5": 3}),
                "sync": op([], 0),
                "lag_max_ns": 0,
                "ios_issued_late": 0,
            },
            {
                "stream": 1,
                "read": op(d["svc1"], 4096, response_ns=d["resp1"]),
                "write": op([], 0, response_ns=[]),
                "sync": op([], 0, errors={"28": 2}),
                "lag_max_ns": 2_500_000,
                "ios_issued_late": 17,
            },
        ],
        seconds=10.0,
    )


def test_rates_are_ops_and_bytes_over_the_measurement_window(data):
    s = summarize(plan(), build_result(data))
    assert s["duration_s"] == 10.0
    read0 = s["streams"][0]["read"]
    assert read0["ops"] == 1000
    assert read0["iops"] == 100.0
    assert read0["mbps"] == 1000 * 8192 / 10 / 1e6
    assert s["streams"][0]["write"]["errors"] == {"5": 3}
    assert s["streams"][0]["errors_by_name"] == {"EIO": 3}
    assert s["total"]["errors_by_name"] == {"EIO": 3, "ENOSPC": 2}
    assert s["streams"][0]["total"] == {
        "iops": 150.0,
        "mbps": 1500 * 8192 / 10 / 1e6,
    }
    total = s["total"]
    assert total["read_iops"] == 140.0
    assert total["write_iops"] == 50.0
    assert total["iops"] == 190.0
    assert total["read_mbps"] == (1000 * 8192 + 400 * 4096) / 10 / 1e6
    assert total["errors"] == 5


def test_a_stream_is_measured_over_the_window_unless_it_was_stopped_from_outside(data):
    # The engine reports every stream's end; one that ended with the run (its IOs drained a
    # moment before the window closed) is measured over the window, as the QoS windows and
    # the tile instances measure it. One stopped by stop_streams (a [[steadystate]] rule
    # ending its group) is measured until it stopped.
    result = build_result(data)
    start = result["measure_start_ns"]
    result["spans"] = [
        {"started_ns": 0, "ended_ns": start + 9_999_000_000, "stopped": False},
        {"started_ns": 0, "ended_ns": start + 5_000_000_000, "stopped": True},
    ]
    s = summarize(plan(), result)
    assert s["streams"][0]["active_s"] == 10.0
    assert s["streams"][0]["total"]["iops"] == 150.0
    assert s["streams"][1]["active_s"] == 5.0
    assert s["streams"][1]["read"]["iops"] == 400 / 5.0


def test_op_kinds_without_ops_or_errors_are_none(data):
    s = summarize(plan(), build_result(data))
    assert s["streams"][0]["sync"] is None
    assert s["streams"][1]["write"] is None
    sync1 = s["streams"][1]["sync"]
    assert sync1["ops"] == 0 and sync1["errors"] == {"28": 2}
    assert sync1["service"]["p99_ms"] is None


def test_latencies_match_the_data_within_histogram_error(data):
    s = summarize(plan(), build_result(data))
    service = s["streams"][0]["read"]["service"]
    values = data["read0"]
    assert_close(service["p50_ms"], exact_percentile(values, 50) / 1e6)
    assert_close(service["p99_ms"], exact_percentile(values, 99) / 1e6)
    assert_close(service["p999_ms"], exact_percentile(values, 99.9) / 1e6)
    assert service["mean_ms"] == pytest.approx(sum(values) / len(values) / 1e6, rel=1e-12)
    assert service["max_ms"] == max(values) / 1e6


def test_closed_loop_response_equals_service(data):
    stream0 = summarize(plan(), build_result(data))["streams"][0]
    assert stream0["arrival"] == "closed"
    assert stream0["read"]["response"] == stream0["read"]["service"]
    assert stream0["target_iops"] is None
    assert stream0["lag_max_ms"] is None


def test_open_loop_reports_response_time_separately(data):
    stream1 = summarize(plan(), build_result(data))["streams"][1]
    assert stream1["arrival"] == "open"
    read = stream1["read"]
    assert_close(read["response"]["p99_ms"], exact_percentile(data["resp1"], 99) / 1e6)
    assert_close(read["service"]["p99_ms"], exact_percentile(data["svc1"], 99) / 1e6)
    assert read["response"]["p50_ms"] > read["service"]["p50_ms"]
    assert stream1["lag_max_ms"] == 2.5
    assert stream1["ios_issued_late"] == 17
    # rate_bps 19,456,000 over a mix of 3 x 4 KiB : 1 x 64 KiB (mean 19,456 bytes)
    assert stream1["target_iops"] == pytest.approx(1000.0)


def test_rate_iops_is_the_target_as_given(data):
    p = plan()
    p["streams"][1]["arrival"] = {"kind": "open", "rate_iops": 4000.0, "dist": "poisson"}
    assert summarize(p, build_result(data))["streams"][1]["target_iops"] == 4000.0


def test_interval_rows_use_the_interval_length_and_merged_histograms():
    rng = random.Random(5)
    read1 = latencies(rng, 300, 100_000, 2_000_000)
    write1 = latencies(rng, 100, 100_000, 9_000_000)
    resp_read1 = [v + 1_000_000 for v in read1]
    resp_write1 = [v + 2_000_000 for v in write1]
    read0 = latencies(rng, 200, 100_000, 1_000_000)
    snap = snapshot(
        7,
        [
            stream_counters(0, read=op(read0, 8192), sync=op([], 0, errors={"5": 1})),
            stream_counters(
                1,
                lag_max_ns=4_000_000,
                behind_ios=12,
                read=op(read1, 4096, response_ns=resp_read1),
                write=op(write1, 65536, response_ns=resp_write1, errors={"28": 4}),
            ),
        ],
        length_ns=500_000_000,  # a short last interval
    )
    rows = interval_rows(plan(), snap)
    assert [r["name"] for r in rows] == ["oltp.0", "log.0"]
    r0, r1 = rows
    assert (r0["interval"], r0["phase"], r0["start_s"], r0["end_s"]) == (7, "measure", 7.0, 7.5)
    assert r0["iops"] == 400.0 and r0["read_iops"] == 400.0 and r0["write_iops"] == 0.0
    assert r0["mbps"] == 200 * 8192 / 0.5 / 1e6
    assert r0["errors"] == 1
    assert r0["lag_max_ms"] is None
    assert_close(r0["p99_ms"], exact_percentile(read0, 99) / 1e6)
    assert r0["service_p99_ms"] == r0["p99_ms"]

    assert r1["iops"] == 800.0 and r1["write_iops"] == 200.0
    assert r1["mbps"] == (300 * 4096 + 100 * 65536) / 0.5 / 1e6
    assert_close(r1["p99_ms"], exact_percentile(resp_read1 + resp_write1, 99) / 1e6)
    assert_close(r1["p50_ms"], exact_percentile(resp_read1 + resp_write1, 50) / 1e6)
    assert_close(r1["service_p99_ms"], exact_percentile(read1 + write1, 99) / 1e6)
    assert r1["lag_max_ms"] == 4.0
    assert r1["behind_ios"] == 12
    assert r1["errors"] == 4


def test_stream_with_no_completions_has_no_latency():
    snap = snapshot(0, [stream_counters(0, behind_ios=3)])
    (row,) = interval_rows(plan(), snap)
    assert row["iops"] == 0.0 and row["p99_ms"] is None and row["behind_ios"] == 3


def test_errno_names():
    assert errno_name(5) == "EIO"
    assert errno_name("28") == "ENOSPC"
    assert errno_name(99999) == "errno 99999"
