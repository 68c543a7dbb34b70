"""The SNIA PTS steady-state rule (analysis/steady.py) on synthetic series, and the rounds of
`run --until-steady` (steadyrun.RoundMonitor) from synthetic snapshots."""

from __future__ import annotations

import random

import pytest

from engine_data import op
from tilemark.analysis.steady import check_window, least_squares, steady, trend_pct_per_round
from tilemark.hist import Histogram
from tilemark.run.steady import RoundMonitor, SteadySettings


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


# -- RoundMonitor: snapshots into rounds -----------------------------------------------------


STEP_NS = 100_000_000  # 0.1 s intervals


def snapshot(i: int, reads: int, latency_ns: int, *, behind: int = 0, phase="measure") -> dict:
    return {
        "interval": i,
        "phase": phase,
        "start_ns": i * STEP_NS,
        "end_ns": (i + 1) * STEP_NS,
        "streams": [
            {
                "stream": 0,
                "read": op([latency_ns] * reads, 4096, response_ns=[latency_ns] * reads),
                "write": op([], 4096),
                "sync": op([], 0),
                "lag_max_ns": 0,
                "behind_ios": behind,
                "inflight": 0,
                "ios_issued_late": 0,
            }
        ],
    }


def open_plan(rate: float) -> dict:
    arrival = {"kind": "open", "rate_iops": rate, "dist": "constant"}
    return {"streams": [{"name": "r", "sizes": [[4096, 1]], "arrival": arrival}]}


def test_rounds_are_whole_intervals_and_the_window_is_their_merge():
    monitor = RoundMonitor(open_plan(100.0), SteadySettings(round_s=0.5, max_rounds=10))
    # Warm-up, then 7 rounds of 5 intervals (2 rounds at 50 reads/interval, then 5 at 10 with
    # 1 ms each), then 2 intervals that arrive while the steady run is being stopped.
    snaps = [snapshot(0, 99, 9_000_000, phase="warmup")]
    counts = [50] * 10 + [10] * 25 + [10, 10]
    snaps += [snapshot(i + 1, n, 1_000_000 if n == 10 else 5_000_000) for i, n in enumerate(counts)]
    for snap in snaps:
        monitor.add([snap])
    assert [r.ops for r in monitor.rounds] == [250, 250, 50, 50, 50, 50, 50]
    assert [r.value for r in monitor.rounds] == pytest.approx([500, 500, 100, 100, 100, 100, 100])
    assert monitor.steady and monitor.should_stop() == "steady"
    assert monitor.check.first == 2  # rounds 3-7: the five after the drop
    lines = monitor.messages()
    assert len(lines) == 7 and lines[-1].startswith("round 7/10: iops 100 IOPS; window rounds 3-7")
    window = monitor.window_result()
    assert window["measure_end_ns"] - window["measure_start_ns"] == 25 * STEP_NS
    read = window["streams"][0]["read"]
    assert read["ops"] == 250
    assert Histogram.from_json(read["response"]).percentile(99.0) == pytest.approx(1e6, rel=0.01)


def test_an_open_loop_schedule_falling_behind_is_not_steady_at_its_rate():
    monitor = RoundMonitor(open_plan(200.0), SteadySettings(round_s=0.5, max_rounds=10))
    # 10 IOs per 0.1 s completed while 20 came due: the backlog grows by 10 per interval.
    monitor.add([snapshot(i, 10, 1_000_000, behind=10 * (i + 1)) for i in range(25)])
    assert monitor.check is not None and monitor.check.steady  # 100 IOPS, flat
    summary = {"duration_s": 2.5, "total": {}, "streams": []}
    monitor.analyze(open_plan(200.0), {}, summary)
    st = summary["steady_state"]
    assert st["rule_met"] and not st["steady"]
    assert st["rate"]["achieved_pct"] == pytest.approx(50.0, abs=1)
    assert not st["rate"]["reached"]
    assert st["verdict"].startswith("the requested open-loop rate was not reached: 100 IOPS")


def test_a_steady_tile_run_is_judged_over_the_window_with_its_own_backlog_and_batches():
    from tilemark.analysis.qos import windows_from_snapshots
    from tilemark.run.tiles import SteadyTileMonitor

    settings = SteadySettings(round_s=0.5, max_rounds=10)
    monitor = SteadyTileMonitor(open_plan(100.0), settings, qos_interval_s=0.25)
    # 2 rounds at 50 reads/interval (backlog 7), then 5 steady rounds at 10 (backlog 3).
    snaps = [snapshot(0, 99, 9_000_000, phase="warmup")]
    counts = [50] * 10 + [10] * 25
    snaps += [
        snapshot(i + 1, n, 1_000_000, behind=7 if n == 50 else 3) for i, n in enumerate(counts)
    ]
    for snap in snaps:
        monitor.add([snap])
    assert monitor.should_stop() == "steady"
    judged, result, batches, over_window = monitor.judged({"unused": True})
    assert over_window
    # The window's QoS snapshots: the backlog as it began (the last interval of round 2, now a
    # warm-up snapshot), then its 25 intervals compacted into 0.25 s windows (whole rounds).
    assert judged[0]["phase"] == "warmup" and judged[0]["streams"][0]["behind_ios"] == 7
    measured = [s for s in judged if s["phase"] == "measure"]
    assert measured[0]["start_ns"] == 11 * STEP_NS and measured[-1]["end_ns"] == 36 * STEP_NS
    assert sum(s["streams"][0]["read"]["ops"] for s in measured) == 250
    windows = windows_from_snapshots(judged, [0], 0.25)
    assert windows[0].backlog_start == 7
    assert result["measure_end_ns"] - result["measure_start_ns"] == 25 * STEP_NS
    # Batch sums of the window only: 250 reads of 1 ms.
    series = batches.series([(0, "read")])
    assert sum(n for n, _ in series) == 250
    assert sum(s for _, s in series) == 250 * 1_000_000
    # The whole run, when the rule never held, is what a fixed-length run would judge.
    unsteady = SteadyTileMonitor(open_plan(100.0), settings, qos_interval_s=0.25)
    unsteady.add(snaps[:15])
    _, whole, _, over = unsteady.judged({"engine": "result"})
    assert not over and whole == {"engine": "result"}
