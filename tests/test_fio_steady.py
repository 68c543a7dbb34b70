"""fio's steady-state detection (HOWTO "Steady state"; fio commit f5344384 steadystate.c,
options.c, init.c): the criterion with fio's own arithmetic, the `[steadystate]` rule of a
workload, the monitor that ends a run on it, and the translation of `ss`, `ss_dur`, `ss_ramp`
and `ss_interval`. The e2e runs are tests/e2e/test_fio_steady_run.py."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from fio_examples import example
from tilemark.analysis.fio_steady import Criterion, judge, lat_sample, rate_sample
from tilemark.errors import UsageError
from tilemark.fio import toml_text, translate
from tilemark.run.fio_steady import FioSteadyMonitor
from tilemark.workload import plan
from tilemark.workload.steadyrule import parse_steadystate

# --- the criterion, against fio's formulas --------------------------------------------------


def fio_slope(ys: list[int]) -> float:
    """steadystate.c steadystate_slope: (sum_xy - sum_x * sum_y / n) / (sum_x_sq - sum_x^2 / n)
    with sum_x = n(n-1)/2 and sum_x_sq = (n-1)n(2n-1)/6 (td_steadystate_init)."""
    n = len(ys)
    sum_x, sum_x_sq = n * (n - 1) // 2, (n - 1) * n * (2 * n - 1) // 6
    sum_xy = sum(i * y for i, y in enumerate(ys))
    return (sum_xy - sum_x * sum(ys) / n) / (sum_x_sq - sum_x * sum_x / n)


def test_deviation_is_the_largest_distance_from_the_mean_as_a_share_of_it():
    # HOWTO iops: "Stop the job if all individual IOPS measurements are within the specified
    # limit of the mean IOPS"; steadystate_deviation: max |y - mean|, 100 * that / mean with %.
    window = [1000, 1125, 950, 1025]
    mean = sum(window) / 4  # 1025
    j = judge(window, Criterion("iops", False, 10.0, True))
    assert j.mean == mean and j.deviation == 100 and j.slope is None
    assert j.value == pytest.approx(100 * 100 / 1025) and j.met  # 9.76% < 10%
    assert not judge(window, Criterion("iops", False, 9.0, True)).met
    # Absolute: "iops:2 means that all individual IOPS values must be within 2 of the mean".
    assert judge([100, 101, 102], Criterion("iops", False, 2.0, False)).met
    # fio's test is strict: criterion < limit (a deviation of exactly the limit does not stop).
    assert not judge([100, 102], Criterion("iops", False, 1.0, False)).met


def test_slope_is_fios_least_squares_slope_over_the_integer_mean():
    # HOWTO iops_slope: "calculate the least squares regression slope. Stop the job if the
    # slope falls below the specified limit"; with %, 100 * slope / (sum_y / n), where fio
    # divides the uint64 sum by the int count in integers.
    window = [1000, 1010, 1021, 1029, 1041, 1049, 1062, 1071, 1080, 1093]
    j = judge(window, Criterion("bw", True, 1.0, True))
    slope = fio_slope(window)
    assert j.slope == pytest.approx(slope)
    assert j.value == pytest.approx(100 * slope / (sum(window) // 10))  # about 0.98%
    assert j.met
    assert not judge(window, Criterion("bw", True, 0.9, True)).met
    # A falling series: fio compares the absolute value (criterion * -1 when negative).
    falling = list(reversed(window))
    assert judge(falling, Criterion("bw", True, 1.0, True)).value == pytest.approx(-j.value)
    assert judge(falling, Criterion("bw", True, 1.0, True)).met
    # Absolute slope limit: per sample, in the metric's unit (the slope is 10.2 per sample).
    assert slope == pytest.approx(10.2060606)
    assert judge(window, Criterion("iops", True, 10.3, False)).met
    assert not judge(window, Criterion("iops", True, 10.2, False)).met


def test_a_window_with_a_zero_mean_never_meets_a_percentage():
    # C doubles: 100 * deviation / 0 is inf or NaN, and no limit is above either.
    assert not judge([0, 0, 0], Criterion("iops", False, 10.0, True)).met
    assert not judge([0, 0, 0], Criterion("iops", True, 10.0, True)).met
    assert judge([0, 0, 0], Criterion("iops", False, 1.0, False)).met  # absolute: 0 < 1


def test_samples_use_fios_integer_rate_arithmetic():
    # steadystate_check: group_iops += rate_time * (td_iops - prev_iops) /
    # (ss_check_interval * ss_check_interval / 1000), unsigned: 1234 IOs in a 1000 ms check
    # are 1234 IOPS; a check that came 1010 ms after the last scales up (fio's formula, not
    # a division by the time).
    assert rate_sample(1234, 1000, 1000) == 1234
    assert rate_sample(1234, 1010, 1000) == 1010 * 1234 // 1000
    assert rate_sample(5 * 1048576, 10_000, 10_000) == 5 * 1048576 // 10  # bytes per second
    # Latency: group_lat_sum / group_lat_samples, stored as uint64_t ns.
    assert lat_sample(1_000_001.0, 2) == 500_000
    assert lat_sample(0.0, 0) == 0


# --- the [steadystate] rule and the monitor -------------------------------------------------


def workload(rule: dict, **run) -> plan.Workload:
    doc = {
        "target": "/tmp/x.dat",
        "size": "1m",
        "interval": run.pop("interval", "1s"),
        "steadystate": rule,
        "stream": [{"name": "a", "copies": 2}, {"name": "b"}],
        **run,
    }
    return plan.parse_workload(doc, source="t.toml")


def test_the_rule_reads_fios_terms_and_names_its_streams():
    w = workload(
        {"criterion": "iops", "limit": "10%", "window": "30s", "ramp": "10s", "streams": ["a"]},
        warmup="5s",
    )
    rule = w.steadystate
    assert rule is not None and rule.samples == 30
    assert rule.judged([s.name for s in w.streams]) == [0, 1]  # a@0, a@1
    m = FioSteadyMonitor.for_workload(w)
    assert m.streams == [0, 1] and m.begin_s == 15.0  # after the warm-up, then ss_ramp
    assert w.to_json()["steadystate"]["window_s"] == 30.0


@pytest.mark.parametrize(
    "rule, words",
    [
        ({"criterion": "iops_drift", "limit": "1%", "window": "3s"}, "criterion must be one of"),
        ({"criterion": "iops", "window": "3s"}, "needs limit"),
        ({"criterion": "iops", "limit": "x", "window": "3s"}, "limit must be a number"),
        ({"criterion": "iops", "limit": "1%", "window": "1s"}, "more than one"),
        ({"criterion": "iops", "limit": "1%", "window": "3.5s"}, "whole number of samples"),
        ({"criterion": "iops", "limit": "1%", "window": "3s", "sample": "0.5s"}, "snapshot"),
        ({"criterion": "iops", "limit": "1%", "window": "3s", "streams": ["c"]}, "'c'"),
        ({"criterion": "iops", "limit": "1%", "window": "3s", "every": 1}, "unknown key"),
    ],
)
def test_a_bad_rule_is_one_sentence_naming_the_key(rule, words):
    with pytest.raises(UsageError, match=words.replace("(", r"\(")):
        workload(rule)


def snap(start_s: float, end_s: float, ops: list[int], lat_ns: int = 1000) -> dict:
    return {
        "phase": "measure",
        "start_ns": int(start_s * 1e9),
        "end_ns": int(end_s * 1e9),
        "streams": [
            {
                "stream": i,
                "read": {"ops": n, "bytes": n * 4096, "service": {"n": n, "sum": n * lat_ns}},
            }
            for i, n in enumerate(ops)
        ],
    }


def test_the_monitor_sums_the_groups_rates_and_stops_when_the_window_holds():
    # steadystate_check sums the group's jobs; fio_mark_td_terminate ends them once met.
    w = workload(
        {"criterion": "iops", "limit": "5%", "window": "3s", "ramp": "1s", "streams": ["a"]}
    )
    m = FioSteadyMonitor.for_workload(w)
    # Stream 2 (b) is not judged; the first second is ss_ramp.
    m.add([snap(0, 1, [5, 5, 999])])
    assert m.samples == []
    m.add([snap(1, 2, [400, 400, 1]), snap(2, 3, [500, 500, 1000])])
    assert m.samples == [800, 1000] and m.should_stop() is None  # window not full yet
    m.add([snap(3, 4, [500, 500, 7])])  # window 800, 1000, 1000: deviation 133 of 933
    assert m.last is not None and not m.last.met and m.should_stop() is None
    m.add([snap(4, 5, [495, 505, 0])])  # 1000, 1000, 1000
    assert m.should_stop() == "fio-steady" and m.met_at_s == 5.0
    record = m.record()
    assert record["met"] and record["window"] == [1000, 1000, 1000]
    assert record["judgement"]["max_deviation"] == 0.0
    m.add([snap(5, 6, [1, 1, 1])])  # nothing after it is met
    assert record["samples"] == [800, 1000, 1000, 1000]


def test_the_latency_criterion_uses_the_completion_latency_of_every_io():
    # HOWTO lat: "Collect completion latency data"; group_lat_sum / group_lat_samples.
    w = workload({"criterion": "lat", "limit": "10%", "window": "2s"})
    m = FioSteadyMonitor.for_workload(w)
    m.add([snap(0, 1, [100, 100, 200], lat_ns=2000), snap(1, 2, [100, 100, 0], lat_ns=2100)])
    assert m.samples == [2000, 2100]
    assert m.met_at_s == 2.0  # deviation 50 of 2050: 2.4%


def test_a_run_that_never_holds_says_so_in_a_note():
    w = workload({"criterion": "iops", "limit": "1%", "window": "2s"})
    m = FioSteadyMonitor.for_workload(w)
    m.add([snap(0, 1, [100, 100, 100]), snap(1, 2, [200, 200, 200])])
    summary: dict = {}
    m.analyze({}, {}, summary)
    assert summary["fio_steady_state"]["met"] is False
    assert "was not met by the end of the run" in summary["notes"][0]


# --- the translation --------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.fio"
    path.write_text(text)
    return path


BASE = "[global]\nfilename=/x\nsize=1m\ntime_based\nruntime=60\nrate_iops=100\n"


def test_ss_becomes_the_rule_with_fios_defaults(tmp_path):
    # HOWTO steadystate_duration: "The default is 0 which disables steady state detection";
    # options.c: steadystate's default is iops_slope:0.01%; ss_interval "Default is 1s".
    doc = translate(write(tmp_path, BASE + "[j]\nss_dur=30\n")).doc
    assert doc["steadystate"] == {
        "criterion": "iops_slope",
        "limit": "0.01%",
        "window": "30s",
        "sample": "1s",
    }
    # The long names are the same options; units as fio's times (bare numbers are seconds).
    doc = translate(
        write(
            tmp_path,
            BASE + "[j]\nsteadystate=bw:2m\nsteadystate_duration=2m\n"
            "steadystate_ramp_time=1500ms\nsteadystate_check_interval=10s\n",
        )
    ).doc
    # bw's absolute limit is bytes per second in fio's size units (str_to_decimal, kb_base).
    assert doc["steadystate"] == {
        "criterion": "bw",
        "limit": 2 * 1048576.0,
        "window": "120s",
        "sample": "10s",
        "ramp": "1500ms",
    }
    plan.parse_workload({**doc, "target": "/x"}, source="t")  # tilemark accepts it


def test_ss_without_ss_dur_is_ignored_as_fio_ignores_it(tmp_path):
    t = translate(write(tmp_path, BASE + "[j]\nss=iops:5%\n"))
    assert "steadystate" not in t.doc
    assert any("ss without ss_dur" in n for n in t.notes)


def test_a_group_with_group_reporting_is_judged_together(tmp_path):
    # HOWTO steadystate: "If group_reporting is enabled this will apply to all jobs in the
    # group" (steadystate_check sums them; all are ended together).
    text = BASE + "group_reporting\nss=iops:10%\nss_dur=30\nss_ramp=10\n[j]\nnumjobs=4\n"
    t = translate(write(tmp_path, text))
    assert t.doc["steadystate"]["criterion"] == "iops" and "streams" not in t.doc["steadystate"]
    assert any("the 4 jobs of j together (group_reporting)" in n for n in t.notes)
    # The rule's header table comes before the streams in the TOML file.
    text_out = toml_text(t)
    assert text_out.index("[steadystate]") < text_out.index("[[stream]]")


def test_a_judged_phase_after_timed_jobs_names_its_streams(tmp_path):
    text = BASE + "[fill]\nrw=write\n[ss]\nstonewall\nrw=randread\nss=iops:10%\nss_dur=5\n"
    doc = translate(write(tmp_path, text)).doc
    assert doc["steadystate"]["streams"] == ["ss"]
    w = plan.parse_workload({**doc, "target": "/x"}, source="t")
    assert FioSteadyMonitor.for_workload(w).begin_s == 60.0  # the phase's start


@pytest.mark.parametrize(
    "text, words",
    [
        # (A phase after the judged group waits for it: tests/test_fio_gates.py.)
        # A job beside the judged group runs on after fio ends the group.
        ("[a]\nss=iops:10%\nss_dur=5\n[b]\nnew_group\n", "runs beside job a"),
        # Without group_reporting every job is judged and ended alone.
        ("[a]\nss=iops:10%\nss_dur=5\nnumjobs=2\n", "without group_reporting"),
        # td_steadystate_init: "steadystate options must be consistent within reporting groups".
        ("[a]\nss=iops:10%\nss_dur=5\n[b]\nss=iops:20%\nss_dur=5\n", "consistent within"),
        # init.c: ss_check_interval "must be globally equal", at least 1s, ss_dur a multiple.
        ("[a]\nss_dur=5\nss_interval=500ms\n", "at least 1s"),
        ("[a]\nss_dur=5\nss_interval=2\n", "whole number of ss_interval"),
        ("[a]\nss_dur=3s\nss_interval=1500ms\n", "whole seconds"),
        # options.c: the lat limit is read in us and compared with ns latencies.
        ("[a]\nss=lat:500us\nss_dur=5\n", "compares it with latencies in nanoseconds"),
        ("[a]\nss=iops\nss_dur=5\n", "needs a limit"),
        ("[a]\nss=iopz:1%\nss_dur=5\n", "must be one of"),
        # libfio.c reset_all_stats: counters reset at the end of ramp_time, the check's not.
        ("[a]\nramp_time=5\nss=iops:1%\nss_dur=5\n", "ss_ramp of at least ramp_time"),
    ],
)
def test_what_fio_does_differently_is_refused_with_the_reason(tmp_path, text, words):
    with pytest.raises(UsageError, match=words):
        translate(write(tmp_path, BASE + text))


def test_ss_ramp_past_ramp_time_translates(tmp_path):
    # fio restarts the job's clock when ramp_time ends (reset_all_stats), so ss_ramp counts
    # from there, as the rule counts from the end of the run's warm-up.
    doc = translate(
        write(tmp_path, BASE + "[a]\nramp_time=5\nss=iops:1%\nss_dur=5\nss_ramp=5\n")
    ).doc
    w = plan.parse_workload({**doc, "target": "/x"}, source="t")
    assert w.warmup_s == 5.0 and FioSteadyMonitor.for_workload(w).begin_s == 10.0


def test_fios_examples(tmp_path):
    t = translate(example(tmp_path, "example_latency_steadystate"))
    assert t.doc["steadystate"] == {
        "criterion": "lat",
        "limit": "5%",
        "window": "300s",
        "sample": "10s",
        "ramp": "60s",
    }
    assert t.doc["duration"] == "3600s"
    # steadystate.fio: ss-read waits (stonewall) for ss-write, which its criterion ends
    # (a [[steadystate]] rule per group: tests/test_fio_gates.py).
    steady = example(tmp_path, "steadystate")
    rules = translate(steady).doc["steadystate"]
    assert [(r["streams"], r["ends"]) for r in rules] == [
        (["ss-write"], "streams"),
        (["ss-read"], "streams"),
    ]
    first = translate(steady, sections=("ss-write",)).doc
    assert first["steadystate"]["limit"] == "10%" and first["duration"] == "300s"


def test_the_rule_judges_a_whole_check_as_fio_does():
    # One sample per ss_interval of snapshots: 10 one-second snapshots make one 10s sample.
    w = workload({"criterion": "iops", "limit": "1%", "window": "20s", "sample": "10s"})
    m = FioSteadyMonitor.for_workload(w)
    m.add([snap(i, i + 1, [10, 10, 10]) for i in range(20)])
    # rate_time 10,000 ms x 300 IOs / (10,000^2 / 1000) = 30 IOPS per sample
    assert m.samples == [30, 30] and m.met_at_s == 20.0
    assert math.isclose(m.last.mean, 30.0)


def test_parse_steadystate_refuses_a_table_that_is_not_one():
    with pytest.raises(UsageError, match=r"\[steadystate\] must be a table"):
        parse_steadystate("iops:1%", ["a"], 1.0)


@pytest.mark.parametrize("args", [["repeat", "2"], ["run", "--until-steady"]])
def test_the_rule_is_for_one_run_alone(tmp_path, capsys, args):
    # repeat measures each repetition for its duration, and --until-steady is tilemark's
    # other rule (SNIA PTS rounds): neither ends on fio's criterion, so both are refused.
    from tilemark.cli import main

    path = tmp_path / "w.toml"
    path.write_text(
        f'target = "{tmp_path / "t.dat"}"\nsize = "1m"\n'
        '[steadystate]\ncriterion = "iops"\nlimit = "10%"\nwindow = "3s"\n'
        '[[stream]]\nrw = "randread"\n'
    )
    status = main([*args[:2], str(path), *args[2:], "--results", str(tmp_path / "r")])
    assert status == 2
    assert (
        "[steadystate] (fio's steady-state rule) ends a `tilemark run`" in capsys.readouterr().err
    )
    assert not (tmp_path / "t.dat").exists()


def test_export_writes_the_rule_back_as_fio_options():
    # `export --fio`: fio ends the exported job as the run ended (measured with fio 3.33 on
    # a 200 IOPS job: attained with samples [200, 200] after 1.89 s; docs/fio.md).
    from tilemark.fio.export import job_text

    w = workload({"criterion": "bw_slope", "limit": "1%", "window": "10s", "ramp": "5s"})
    plan_doc = {
        "backend": "psync",
        "targets": [{"path": "/x", "direct": True, "offset": 4096}],
        "duration_ms": 60_000,
        "streams": [
            {
                "name": n,
                "target": 0,
                "offset": 0,
                "length": 1 << 20,
                "read_pct": 100,
                "random_pct": 100,
                "sizes": [[4096, 1.0]],
                "align": 4096,
                "pattern": {"kind": "uniform"},
                "qd": 1,
                "arrival": {"kind": "closed"},
                "sync": {"kind": "none"},
            }
            for n in ("a@0", "a@1", "b")
        ],
    }
    text = job_text(plan_doc, title="t", steadystate=w.to_json()["steadystate"])
    head = text[text.index("[global]") : text.index("[a@0]")]
    # ss_interval is fio's default 1s, so it is left out (fio 3.33 does not know it).
    assert head.split("\n")[2:7] == [
        "ss=bw_slope:1%",
        "ss_dur=10000ms",
        "ss_ramp=5000ms",
        "group_reporting",
        "direct=1",
    ]
    # Judging only some streams cannot be said in fio (one reporting group, one setting).
    some = workload({"criterion": "iops", "limit": "5%", "window": "3s", "streams": ["a"]})
    text = job_text(plan_doc, title="t", steadystate=some.to_json()["steadystate"])
    assert "ss=" not in text and "not exported: it judged only some streams" in text
