"""The trace file format: round trip, bounded writing, refusals (docs/traces.md)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tilemark.trace import schema
from tilemark.trace.schema import TraceError, TraceMeta, TraceWriter, open_trace


def rows(n: int, start: int = 0) -> dict:
    return {
        "issue_ns": [start + i * 1000 for i in range(n)],
        "op": ["read" if i % 3 else "write" for i in range(n)],
        "offset": [i * 4096 for i in range(n)],
        "size": [4096] * n,
        "pid": [42] * n,
    }


def test_round_trip_in_row_groups(tmp_path, monkeypatch):
    monkeypatch.setattr(schema, "ROW_GROUP_ROWS", 100)
    path = tmp_path / "t.parquet"
    meta = TraceMeta(source="synthetic", device="/dev/loop0", device_size=1 << 30)
    with TraceWriter(path, meta) as w:
        for k in range(5):
            w.write(rows(70, start=k * 70_000))
        w.meta.events_lost = 3  # learned at the end of a capture
    trace = open_trace(path)
    assert trace.rows == 350 and trace.meta.events_lost == 3
    assert trace.meta.device_size == 1 << 30
    # Written as rows came: a group once 100 rows were pending (140, 140), the rest at close.
    assert pq.ParquetFile(path).metadata.num_row_groups == 3
    table = trace.table()
    assert table.column("issue_ns").to_pylist()[:3] == [0, 1000, 2000]
    assert set(table.column("op").to_pylist()) == {"read", "write"}
    assert table.column("fua").to_pylist() == [False] * 350  # flags default to false
    assert table.column("latency_ns").null_count == 350  # unknown stays unknown


def test_nothing_is_left_when_writing_fails(tmp_path):
    path = tmp_path / "t.parquet"
    with pytest.raises(RuntimeError), TraceWriter(path, TraceMeta(source="synthetic")) as w:
        w.write(rows(10))
        raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []


def test_unreadable_traces_are_one_sentence(tmp_path):
    with pytest.raises(TraceError, match="does not exist"):
        open_trace(tmp_path / "missing.parquet")
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"not parquet at all")
    with pytest.raises(TraceError, match="not a tilemark trace"):
        open_trace(junk)
    other = tmp_path / "other.parquet"
    pq.write_table(pa.Table.from_batches([schema.batch(rows(3))]), other)
    with pytest.raises(TraceError, match="no tilemark.trace metadata"):
        open_trace(other)
    with pytest.raises(ValueError, match="differ in length"):
        schema.batch({"issue_ns": [1, 2], "op": ["read"]})
