"""PostgreSQL (pgbench) captured, learned, run as its learned profile on the
same device and compared (learn_rounds.py says what every round asserts)."""

from __future__ import annotations

import pytest

from . import learn_rounds as rounds
from .learn_rounds import MARKS, check, one_round, work_dir  # noqa: F401 (the `work` fixture)

pytestmark = [*MARKS, pytest.mark.cost(40)]


def test_postgresql_pgbench_is_learned_and_its_profile_compared(work):
    r = one_round(rounds.bench.pg_round, work, scale=4, clients=4, memcg_mb=64, port=54339,
               warmup_s=rounds.WARMUP_S)  # fmt: skip
    doc = check(r, {"postgres_read"})
    assert r.app_metric and r.app_metric > 0  # pgbench's tps
    assert doc["profile"]["metric_unit"] == "tps"
    # the WAL: sync writes of postgres with a flush cadence
    wal = [s for s in doc["stream"] if s["name"].startswith("postgres_") and "sync" in s]
    shown = [(s["name"], s.get("sync"), s.get("rw"), s.get("read_pct")) for s in doc["stream"]]
    assert wal and wal[0]["sync"].startswith("fdatasync:"), (shown, doc.get("notes"))
