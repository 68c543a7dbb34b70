"""QoS logic on synthetic engine output: pass, fail on latency, on throughput, in one interval."""

from __future__ import annotations

import pytest

from engine_data import hist_json
from tilemark.analysis import expr
from tilemark.analysis.qos import Criterion, SnapshotCompactor, evaluate, failures

MS = 1_000_000


def opdata(n: int, latency_ms: float, *, errors: dict | None = None) -> dict:
    lat = [int(latency_ms * MS)] * n
    return {
        "ops": n,
        "bytes": n * 8192,
        "errors": errors or {},
        "service": hist_json(lat),
        "response": hist_json(lat),
    }


def empty() -> dict:
    return {"ops": 0, "bytes": 0, "errors": {}, "service": hist_json([]), "response": hist_json([])}


def snap(k: int, reads: int, latency_ms: float, *, behind: int = 0, phase: str = "measure") -> dict:
    return {
        "interval": k,
        "phase": phase,
        "start_ns": k * 1_000_000_000,
        "end_ns": (k + 1) * 1_000_000_000,
        "streams": [
            {
                "stream": 0,
                "read": opdata(reads, latency_ms),
                "write": empty(),
                "sync": empty(),
                "lag_max_ns": 0,
                "behind_ios": behind,
                "inflight": 0,
            }
        ],
    }


def result_from(snaps: list[dict]) -> dict:
    measured = [s for s in snaps if s["phase"] == "measure"]
    from tilemark.hist import Histogram

    ops = sum(s["streams"][0]["read"]["ops"] for s in measured)
    h = Histogram.merged(s["streams"][0]["read"]["response"] for s in measured).to_json()
    read = {"ops": ops, "bytes": ops * 8192, "errors": {}, "service": h, "response": h}
    return {
        "complete": True,
        "started_at_ns": 0,
        "measure_start_ns": measured[0]["start_ns"],
        "measure_end_ns": measured[-1]["end_ns"],
        "streams": [
            {
                "stream": 0,
                "read": read,
                "write": empty(),
                "sync": empty(),
                "lag_max_ns": 0,
                "ios_issued_late": 0,
            }
        ],
    }


AVG = Criterion("read_avg", ("db",), "mean", op="read", max_ms=20)
P99 = Criterion("read_p99", ("db",), "p99", op="read", max_ms=50)
TPUT = Criterion("iops", ("db",), "throughput", min_fraction=0.95, per_interval=True)


def run_qos(snaps: list[dict], qos_interval_s: float = 2.0):
    return evaluate([AVG, P99, TPUT], {"db": 0}, snaps, result_from(snaps), qos_interval_s)


def test_everything_within_limits_passes():
    snaps = [snap(0, 100, 5, phase="warmup")] + [snap(k, 100, 5) for k in range(1, 7)]
    verdicts = run_qos(snaps)
    assert failures(verdicts) == []
    assert [v.scope for v in verdicts if v.criterion == "iops"] == [
        "window",
        "interval 1",
        "interval 2",
        "interval 3",
    ]


def test_latency_over_the_limit_fails_naming_the_criterion():
    snaps = [snap(k, 100, 5 if k != 3 else 200) for k in range(6)]
    failed = failures(run_qos(snaps))
    # The mean over the window is (5*5 + 200)/6 = 37.5 ms > 20 ms; p99 lands in the 200 ms ops.
    assert {v.criterion for v in failed} == {"read_avg", "read_p99"}
    avg = next(v for v in failed if v.criterion == "read_avg")
    assert avg.value == pytest.approx(37.5, rel=0.01) and avg.limit == 20 and avg.scope == "window"


def test_falling_behind_schedule_fails_throughput():
    # The backlog grows by 30 IOs every second while 100 complete: 100/130 of what came due.
    snaps = [snap(k, 100, 5, behind=30 * (k + 1)) for k in range(6)]
    failed = failures(run_qos(snaps))
    assert {v.criterion for v in failed} == {"iops"}
    window = next(v for v in failed if v.scope == "window")
    assert window.value == pytest.approx(600 / (600 + 180), rel=1e-6)


def test_one_bad_interval_fails_only_that_interval():
    behind = [0, 0, 0, 60, 60, 60]  # interval 2 (seconds 2-4) falls 60 IOs behind, then holds
    snaps = [snap(k, 100, 5, behind=b) for k, b in enumerate(behind)]
    verdicts = run_qos(snaps)
    failed = failures(verdicts)
    # Over the whole window 600 of 660 came due (91% < 95%), and interval 2 alone is at 77%;
    # intervals 1 and 3 kept up.
    assert [v.scope for v in failed] == ["window", "interval 2"], [
        (v.scope, v.value) for v in failed
    ]
    assert failed[1].value == pytest.approx(200 / 260)


def test_poisson_shortfall_within_tolerance_passes():
    # One IO in flight at the end of a 1,000-IO window is not a failure of a 100% criterion.
    c = Criterion("all", ("db",), "throughput", min_fraction=1.0)
    snaps = [snap(0, 500, 1), snap(1, 500, 1, behind=1)]
    assert failures(evaluate([c], {"db": 0}, snaps, result_from(snaps))) == []


def test_no_completed_io_fails_a_latency_bound():
    snaps = [snap(0, 0, 1), snap(1, 0, 1)]
    assert {v.criterion for v in failures(run_qos(snaps))} >= {"read_avg"}


def test_expressions_are_arithmetic_only():
    assert expr.evaluate(
        "mailboxes * iops_per_mailbox / 10", {"mailboxes": 1000, "iops_per_mailbox": 0.12}
    ) == pytest.approx(12)
    assert expr.evaluate("2 * MiB", {}) == 2 * 1024 * 1024
    assert expr.evaluate("floor(iops('db') / 0.12)", {}, {"iops": lambda s: 121.0}) == 1008
    assert expr.names_in("mailboxes * iops_per_mailbox") == {"mailboxes", "iops_per_mailbox"}
    for bad, msg in [
        ("__import__('os')", "unknown function"),
        ("x.y", "not allowed"),
        ("mailbox * 2", "unknown name 'mailbox'"),
        ("1 +", "cannot parse"),
    ]:
        with pytest.raises(expr.ExprError, match=msg):
            expr.evaluate(bad, {"mailboxes": 1})


def test_compacted_snapshots_give_the_same_verdicts():
    from tilemark.analysis.qos import SnapshotCompactor

    behind = [0, 0, 5, 5, 60, 60, 60, 61, 61]
    snaps = [snap(0, 100, 5, phase="warmup")] + [
        snap(k + 1, 100, 3 + k, behind=b) for k, b in enumerate(behind)
    ]
    compactor = SnapshotCompactor(2.0)
    compactor.extend(snaps)
    compacted = compactor.snapshots()
    assert len(compacted) == 1 + 5  # the warm-up, four 2-s windows and a 1-s tail
    raw = run_qos(snaps)
    merged = evaluate([AVG, P99, TPUT], {"db": 0}, compacted, result_from(snaps), 2.0)
    assert [(v.scope, v.passed, v.value) for v in merged] == [
        (v.scope, v.passed, v.value) for v in raw
    ]


def test_a_phased_stream_is_judged_over_its_phase_only():
    # The stream runs from 3 s to 5 s of a 7-interval run; a per-interval latency criterion
    # would fail every idle interval (no IO can meet a latency bound) if they were judged.
    per_interval = Criterion("read_avg", ("db",), "mean", op="read", max_ms=20, per_interval=True)
    snaps = [snap(0, 0, 5, phase="warmup")]
    snaps += [snap(k, 100 if 3 <= k < 5 else 0, 5) for k in range(1, 7)]
    plan = {"streams": [{"name": "db", "start_ms": 3000, "stop_ms": 5000}]}
    verdicts = evaluate([per_interval], {"db": 0}, snaps, result_from(snaps), 1.0, plan=plan)
    assert failures(verdicts) == []
    assert [v.scope for v in verdicts] == ["window", "interval 1", "interval 2"]
    assert [(v.start_s, v.end_s) for v in verdicts[1:]] == [(3.0, 4.0), (4.0, 5.0)]
    # Without the phase the idle intervals fail: they are what the phase leaves out.
    unphased = evaluate([per_interval], {"db": 0}, snaps, result_from(snaps), 1.0)
    assert len(failures(unphased)) == 4


def test_a_phased_streams_rate_counts_its_active_time():
    from tilemark.analysis.tiles import _achieved

    snaps = [snap(k, 100 if 3 <= k < 5 else 0, 5) for k in range(1, 7)]  # 200 IOs in 2 s
    result = result_from(snaps)
    plan = {"streams": [{"name": "db", "start_ms": 3000, "stop_ms": 5000}]}
    assert _achieved(result, [0], plan)[0] == pytest.approx(100.0)
    assert _achieved(result, [0])[0] == pytest.approx(200 / 6)  # over the whole window


def _snap(k: int, streams: list[int]) -> dict:
    """A measured 1 s snapshot with some histograms, errors and levels per stream."""
    from tilemark.hist import Histogram

    def op(seed: int, ops: int, open_loop: bool) -> dict:
        h = Histogram()
        for v in range(ops):
            h.record(1_000 + (seed * 7919 + v * 104_729) % 5_000_000)
        errors = {"5": seed % 3} if seed % 3 else {}
        doc = h.to_json() if ops else {"n": 0, "sum": 0, "min": 0, "max": 0, "b": []}
        return {"ops": ops, "bytes": ops * 4096, "errors": errors, "service": doc,
                "response": doc if open_loop else None}  # fmt: skip

    return {
        "interval": k, "phase": "measure", "start_ns": k * 10**9, "end_ns": (k + 1) * 10**9,
        "streams": [
            {"stream": i, "read": op(k + i, (k * 3 + i) % 7, i % 2 == 0),
             "write": op(k * i + 1, i % 2, i % 2 == 0), "sync": op(0, 0, False),
             "lag_max_ns": k * i, "behind_ios": k + i, "inflight": i, "ios_issued_late": k,
             "oldest_inflight_ns": 3 * k}
            for i in streams
        ],
    }  # fmt: skip


def _merge_json_by_json(into: dict, snap: dict) -> None:
    """merge_snapshot as it was before the compactor added up in place (every histogram
    merged through its JSON): the reference the compactor must equal."""
    from tilemark.hist import Histogram

    into["end_ns"], into["interval"] = snap["end_ns"], snap["interval"]
    by_stream = {s["stream"]: s for s in into["streams"]}
    for s in snap["streams"]:
        mine = by_stream.get(s["stream"])
        if mine is None:
            into["streams"].append(dict(s))
            continue
        for op in ("read", "write", "sync"):
            a, b = mine[op], s[op]
            errors = dict(a["errors"])
            for errno, n in b["errors"].items():
                errors[errno] = errors.get(errno, 0) + n
            merged = {
                "ops": a["ops"] + b["ops"],
                "bytes": a["bytes"] + b["bytes"],
                "errors": errors,
            }
            for kind in ("service", "response"):
                if a.get(kind) is None and b.get(kind) is None:
                    merged[kind] = None
                else:
                    merged[kind] = Histogram.merged([a.get(kind), b.get(kind)]).to_json()
            mine[op] = merged
        mine["lag_max_ns"] = max(mine.get("lag_max_ns", 0), s.get("lag_max_ns", 0))
        mine["ios_issued_late"] = mine.get("ios_issued_late", 0) + s.get("ios_issued_late", 0)
        for level in ("behind_ios", "inflight"):
            mine[level] = s.get(level, 0)


def _copy(snap: dict) -> dict:
    return {**snap, "streams": [dict(s) for s in snap["streams"]]}


def test_compacted_windows_and_totals_are_the_snapshots_merged_one_by_one():
    # Streams 3 and 4 join later; windows of 3 snapshots; 8 snapshots: 2 windows and a part.
    snaps = [
        _snap(k, [0, 1, 2] + ([3] if k >= 2 else []) + ([4] if k == 7 else [])) for k in range(8)
    ]
    c = SnapshotCompactor(window_s=3.0)
    c.extend(snaps)
    windows, totals = [], None
    for k, snap in enumerate(snaps):
        if k % 3 == 0:
            windows.append(_copy(snap))
        else:
            _merge_json_by_json(windows[-1], snap)
        if totals is None:
            totals = _copy(snap)
        else:
            _merge_json_by_json(totals, snap)
    assert c.snapshots() == windows
    assert c.result() == {"complete": False, "measure_start_ns": 0, "measure_end_ns": 8 * 10**9,
                          "streams": totals["streams"]}  # fmt: skip
    assert c.measured_s() == 8.0
    assert any(s["read"]["errors"] for s in totals["streams"]), "errors were merged"
    # Judged as it goes: the totals after whole windows only, then with a window open.
    six = SnapshotCompactor(window_s=3.0)
    six.extend(snaps[:6])
    expected = _copy(snaps[0])
    for snap in snaps[1:6]:
        _merge_json_by_json(expected, snap)
    assert six.result()["streams"] == expected["streams"]
    six.add(snaps[6])
    _merge_json_by_json(expected, snaps[6])
    assert six.result()["streams"] == expected["streams"]
    # A window closed after the totals were first asked for is merged into them once.
    for snap in (snaps[7], _snap(8, [0, 1, 2, 3])):
        six.add(snap)
        _merge_json_by_json(expected, snap)
    assert six.result()["streams"] == expected["streams"]
    assert six.result()["streams"] == expected["streams"], "asking twice merges nothing twice"
