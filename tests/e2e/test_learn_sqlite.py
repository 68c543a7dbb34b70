"""SQLite (an order-entry loop) captured, learned, run as its learned profile on the
same device and compared (learn_rounds.py says what every round asserts)."""

from __future__ import annotations

import pytest

from . import learn_rounds as rounds
from .learn_rounds import MARKS, check, one_round, work_dir  # noqa: F401 (the `work` fixture)

pytestmark = [*MARKS, pytest.mark.cost(30)]


def test_sqlite_order_entry_is_learned_and_its_profile_compared(work):
    r = one_round(rounds.bench.sqlite_round, work, items=50_000, memcg_mb=32)
    doc = check(r, set())
    assert any(s.get("sync", "").startswith("fdatasync:") for s in doc["stream"])
