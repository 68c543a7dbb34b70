"""bench/pg_capacity.py's parsing: pgbench's report and per-transaction logs, the WAL streams of
a learned profile, and the two curves of its report."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import pg_capacity as pc  # noqa: E402

REPORT = """
transaction type: <builtin: TPC-B (sort of)>
number of transactions actually processed: 2607
number of failed transactions: 0 (0.000%)
number of transactions skipped: 2 (0.077%)
number of transactions above the 100.0 ms latency limit: 3/2607 (0.115%)
latency average = 11.035 ms
latency stddev = 15.201 ms
rate limit schedule lag: avg 2.1 (max 95.3) ms
tps = 79.031752 (without initial connection time)
"""


def test_pgbench_report_gives_rate_latency_and_the_late_share():
    r = pc.parse_pgbench(REPORT)
    assert r["tps"] == pytest.approx(79.031752)
    assert (r["latency_ms"], r["latency_sd_ms"]) == (11.035, 15.201)
    assert (r["processed"], r["skipped"], r["late"], r["counted"]) == (2607, 2, 3, 2607)
    assert r["late_share"] == pytest.approx(5 / 2609)


def test_log_p95_counts_skipped_transactions_as_the_latest(tmp_path):
    # pgbench -l under -R: client, transaction, latency (us, from the scheduled start), script,
    # epoch s, us, schedule lag (us); a transaction skipped for being late says "skipped"
    lines = [f"0 {i} {1000 * (i + 1)} 0 1795786390 0 50" for i in range(90)]
    (tmp_path / "n1-i0.123").write_text("\n".join(lines) + "\n")
    skipped = [f"1 {i} skipped 0 1795786390 0 150000" for i in range(10)]
    (tmp_path / "n1-i0.123.1").write_text("\n".join(skipped) + "\n")
    assert pc.log_p95(tmp_path, "n1-i0") == float("inf")  # 10% skipped: p95 is one of them
    (tmp_path / "n1-i0.123.1").write_text("\n".join(skipped[:2]) + "\n")
    # 92 transactions: index 87 of the sorted latencies, 88 ms
    assert pc.log_p95(tmp_path, "n1-i0") == pytest.approx(88.0)
    assert pc.log_p95(tmp_path, "n2-i0") is None
    assert pc.tx_p95({"latency_ms": 10.0, "latency_sd_ms": 10.0}) == pytest.approx(26.45)
    assert pc.tx_p95({"p95_ms": 12.0, "latency_ms": 10.0}) == 12.0


def test_wal_streams_are_the_streams_that_fdatasync(tmp_path):
    profile = tmp_path / "learned.toml"
    profile.write_text(
        '[[stream]]\nname = "postgres_read"\nrw = "randread"\n'
        '[[stream]]\nname = "postgres_log"\nrw = "write"\nsync = "fdatasync:1"\n'
        '[[stream]]\nname = "postgres_writeback"\nrw = "randwrite"\nwriteback = true\n'
    )
    assert pc.wal_streams(profile) == ["postgres_log"]


def test_both_curves_are_latency_over_their_own_limit():
    r = {
        "measured": [
            {"n": 1, "instances": [{"p95_ms": 40.0}], "worst_late_share": 0.01, "passes": True},
            {
                "n": 2,
                "instances": [{"p95_ms": 50.0}, {"p95_ms": 120.0}],
                "worst_late_share": 0.07,
                "passes": False,
            },  # fmt: skip
        ],
        "predicted": {"limits_ms": {"log_p95": 30.0, "read_p95": 60.0}},
    }
    steps = [
        {"tiles": 1, "passed": True, "worst": {"log_p95": 12.0, "read_p95": 24.0}},
        {"tiles": 3, "passed": False, "worst": {"log_p95": 45.0, "read_p95": 30.0}},
    ]
    rows = pc.curves(r, steps, 100.0)
    assert rows[4] == "| 1 | 0.40 | 1.0% | True | 0.40 | True |"
    assert rows[5] == "| 2 | 1.20 | 7.0% | False | - | - |"
    assert rows[6] == "| 3 | - | - | - | 1.50 | False |"
