"""RocksDB (db_bench) captured, learned, run as its learned profile on the
same device and compared (learn_rounds.py says what every round asserts)."""

from __future__ import annotations

import pytest

from . import learn_rounds as rounds
from .learn_rounds import MARKS, check, one_round, work_dir  # noqa: F401 (the `work` fixture)

pytestmark = [*MARKS, pytest.mark.cost(35)]


def test_rocksdb_db_bench_is_learned_and_its_profile_compared(work):
    r = one_round(rounds.bench.rocksdb_round, work, num=100_000, memcg_mb=48)
    check(r, {"db_bench_read"})
