"""Compiling traces into replayed IO lists (tilemark.trace.iolist): selection, remapping,
alignment, flushes before writes, afap dependencies and duration cuts, on small traces
written with the trace schema; no IO beyond the files themselves."""

from __future__ import annotations

import numpy as np
import pytest

from tilemark.errors import UsageError
from tilemark.trace import iolist
from tilemark.trace.iolist import DepCounter, ListPlan, Remap
from tilemark.trace.schema import TraceMeta, TraceWriter, open_trace
from tilemark.trace.selection import Selection, parse_select

MiB = 1 << 20
EVERY_ROW = Selection()


def trace(tmp_path, **columns):
    path = tmp_path / "t.parquet"
    with TraceWriter(path, TraceMeta(source="synthetic")) as w:
        w.write(columns)
    return open_trace(path)


def compile_one(tmp_path, t, remap: Remap, *, selection=EVERY_ROW, split=None, speed=1.0,
                afap=False, cut_ns=None, count_before_ns=None, by_queue=False):  # fmt: skip
    scan = iolist.scan(t, selection, split, completions=afap)
    plans = [
        ListPlan(key, tmp_path / f"{i}.ios", remap, afap, cut_ns, count_before_ns)
        for i, key in enumerate(scan.groups)
    ]
    outs = iolist.write_lists(scan, selection, split, speed, plans, by_queue=by_queue)
    return scan, outs, [iolist.read_list(p.path) for p in plans]


def test_select_parses_keys_and_refuses_anything_else():
    s = parse_select("pid=1,pid=2, comm=postgres,op=write")
    assert s == Selection(frozenset({1, 2}), frozenset({"postgres"}), frozenset({"write"}))
    assert s.describe() == "pid=1,pid=2,comm=postgres,op=write"
    assert not parse_select(None) and not parse_select("")
    for bad, why in [
        ("pid", "KEY=VALUE"),
        ("pid=a", "process id"),
        ("op=trim", "one of read, write, flush, discard"),
        ("uid=0", "knows the keys pid, comm and op"),
    ]:
        with pytest.raises(UsageError, match=why):
            parse_select(bad)


def test_modulo_wraps_scale_maps_the_device_and_off_keeps_offsets():
    offsets = np.array([0, 4096, 10 * MiB, 15 * MiB - 4096], np.int64)
    sizes = np.full(4, 4096, np.int64)
    off, _, _ = Remap("off", 16 * MiB, 4096).apply(offsets, sizes)
    assert off.tolist() == offsets.tolist()
    mod, _, _ = Remap("modulo", 4 * MiB, 4096).apply(offsets, sizes)
    assert mod.tolist() == [0, 4096, 2 * MiB, 3 * MiB - 4096]
    scaled, _, _ = Remap("scale", 4 * MiB, 4096, extent=16 * MiB).apply(offsets, sizes)
    assert scaled.tolist() == [0, 0, int(2.5 * MiB), int(3.75 * MiB) - 4096]
    # An IO that would cross the region's end is moved back inside it.
    end, _, _ = Remap("modulo", 4 * MiB, 4096).apply(
        np.array([4 * MiB - 4096], np.int64), np.array([65536], np.int64)
    )
    assert end.tolist() == [4 * MiB - 65536]


def test_unaligned_ios_are_widened_to_the_blocks_that_cover_them_and_counted():
    start, size, rounded = Remap("off", MiB, 4096).apply(
        np.array([512, 8192, 4096], np.int64), np.array([1024, 4096, 5000], np.int64)
    )
    assert start.tolist() == [0, 8192, 4096]
    assert size.tolist() == [4096, 4096, 8192]
    assert rounded == 2


def test_a_write_with_preflush_becomes_a_flush_then_the_write_and_fua_is_kept(tmp_path):
    t = trace(
        tmp_path,
        issue_ns=[0, 10, 20],
        op=["write", "write", "read"],
        offset=[0, 4096, 8192],
        size=[4096] * 3,
        fua=[False, True, False],
        preflush=[True, False, True],  # a read's preflush means nothing
    )
    _, outs, (records,) = compile_one(tmp_path, t, Remap("off", MiB, 4096))
    assert records["op"].tolist() == [2, 1, 1, 0]
    assert records["time_ns"].tolist() == [0, 0, 10, 20]
    assert records["flags"].tolist() == [0, 0, iolist.FLAG_FUA, 0]
    assert outs[0].ops == {"read": 1, "write": 2, "flush": 1, "discard": 0}


def test_afap_dependencies_count_the_ios_completed_before_each_issue():
    counter = DepCounter()
    # Two batches: IOs 0 and 1 together, 2 once 0 completed, 3 once both had.
    first = counter.deps(np.array([0, 0]), np.array([10, 30]), np.array([1, 1]))
    second = counter.deps(np.array([15, 30, 40]), np.array([50, 45, 60]), np.array([1, 1, 2]))
    assert first.tolist() == [0, 0]
    assert second.tolist() == [1, 1, 2], "a completion at the issue instant is not before it"
    assert counter.max_inflight == 3


def test_split_and_select_make_streams_that_share_the_traces_clock(tmp_path):
    t = trace(
        tmp_path,
        issue_ns=[100, 200, 300, 400, 500],
        op=["read", "write", "read", "read", "write"],
        offset=[0, 4096, 8192, 12288, 16384],
        size=[4096] * 5,
        pid=[1, 2, 1, 3, 2],
    )
    sel = parse_select("pid=1,pid=2")
    scan, outs, lists = compile_one(tmp_path, t, Remap("off", MiB, 4096), selection=sel,
                                    split="pid", speed=2.0)  # fmt: skip
    assert list(scan.groups) == ["1", "2"]
    assert [list(r["time_ns"]) for r in lists] == [[0, 100], [50, 200]]
    assert [o.records for o in outs] == [2, 2]
    with pytest.raises(UsageError, match="selects no IO"):
        iolist.scan(t, parse_select("pid=9"), None, completions=False)


def test_a_timed_cut_keeps_the_ios_before_it_and_a_loop_counts_its_partial_pass(tmp_path):
    t = trace(
        tmp_path,
        issue_ns=[0, 1000, 2000, 3000],
        op=["read"] * 4,
        offset=[0] * 4,
        size=[4096] * 4,
    )
    _, cut, _ = compile_one(tmp_path, t, Remap("off", MiB, 4096), cut_ns=2000)
    assert cut[0].records == 2
    (tmp_path / "0.ios").unlink()
    _, looped, _ = compile_one(tmp_path, t, Remap("off", MiB, 4096), count_before_ns=2500)
    assert (looped[0].records, looped[0].before_cut) == (4, 3)


def test_damaged_rows_are_one_sentence(tmp_path):
    t = trace(tmp_path, issue_ns=[0, 5], op=["read", "write"], offset=[0, 0], size=[4096, 0])
    with pytest.raises(UsageError, match="a write of 0 bytes"):
        iolist.scan(t, Selection(), None, completions=False)


def _expect(name: str, expected: int | None, mode: str = "timed"):
    from tilemark.trace.accuracy import StreamExpectation

    return StreamExpectation(
        name=name, trace=f"/t/{name}.parquet", group=None, records=100, expected=expected,
        ops={"read": 100, "write": 0, "flush": 0, "discard": 0}, rounded=0, trace_iops=100.0,
        trace_span_s=0.99, mode=mode,
    )  # fmt: skip


def _counters(issued: int, late_ns: int = 2000) -> dict:
    from tilemark.hist import Histogram

    hist = Histogram()
    for _ in range(issued):
        hist.record(late_ns)
    gap = 10_000_000
    return {"issued": issued, "lateness": hist.to_json(), "first_submit_ns": late_ns,
            "last_submit_ns": late_ns + (issued - 1) * gap, "first_due_ns": 0,
            "last_due_ns": (issued - 1) * gap}  # fmt: skip


def test_the_replay_section_counts_skipped_ios_and_fails_the_run_on_them():
    from tilemark.run.runner import storage_verdict
    from tilemark.trace import accuracy

    settings = {"mode": "timed", "speed": 1.0, "align": 4096}
    streams = [{"stream": 0, "replay": _counters(100)}, {"stream": 1, "replay": _counters(97)}]
    result = {"complete": True, "streams": streams}
    section = accuracy.summarize_replay(settings, [_expect("a", 100), _expect("b", 100)], result)
    assert [s["skipped"] for s in section["streams"]] == [0, 3]
    assert section["skipped"] == 3 and section["total"]["expected"] == 200
    a = section["streams"][0]
    assert a["rate_error_pct"] == pytest.approx(0.0) and a["lateness"]["p50_us"] == 2.0
    assert "3 skipped" in section["verdict"]
    assert accuracy.failure(section) == (
        "the replay skipped 3 of 200 IOs (b 3): every IO of the trace must be issued"
    )
    verdict = storage_verdict({}, {"replay": section, "total": {}})
    assert verdict == (None, accuracy.failure(section)), "stored failed, not as the storage's"
    # A run that did not finish counts nothing as skipped.
    cut = accuracy.summarize_replay(settings, [_expect("a", 100)], {"complete": False,
        "streams": [{"stream": 0, "replay": _counters(40)}]})  # fmt: skip
    assert cut["skipped"] is None and accuracy.failure(cut) is None
    assert "did not finish" in cut["verdict"]


def test_afap_is_judged_against_the_traces_rate_and_says_how_many_times_it():
    from tilemark.trace import accuracy

    fast = _counters(100)
    fast["last_submit_ns"] = fast["first_submit_ns"] + 99 * 1_000_000  # 1,000 IOPS
    section = accuracy.summarize_replay(
        {"mode": "afap", "speed": 1.0, "align": 4096},
        [_expect("a", None, "afap")],
        {"complete": True, "streams": [{"stream": 0, "replay": fast}]},
    )
    assert section["streams"][0]["rate_error_pct"] == pytest.approx(900.0)
    assert "10.00x the trace's 100.0" in section["verdict"]


def test_a_timed_replay_is_due_at_queue_times_where_the_trace_has_them(tmp_path):
    # Row 1 waited 400 ns for the traced device, row 2 has no queue time, row 3 was queued
    # before row 2 was issued (the device reordered them), row 0 before the trace's start.
    t = trace(
        tmp_path,
        issue_ns=[0, 1000, 2000, 3000],
        queue_ns=[-50, 600, None, 1500],
        op=["read", "write", "read", "read"],
        offset=[0, 4096, 8192, 12288],
        size=[4096] * 4,
    )
    _, _, by_queue = compile_one(tmp_path, t, Remap("off", MiB, 4096), by_queue=True)
    assert list(by_queue[0]["time_ns"]) == [0, 600, 2000, 2000]
    for f in tmp_path.glob("*.ios"):
        f.unlink()
    _, _, by_issue = compile_one(tmp_path, t, Remap("off", MiB, 4096))
    assert list(by_issue[0]["time_ns"]) == [0, 1000, 2000, 3000]


def test_a_trace_without_queue_times_replays_at_its_issue_times(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    # A file written before the queue_ns column existed (or by another writer): no column.
    old = tmp_path / "old.parquet"
    table = pa.table({"issue_ns": [0, 500, 900], "op": ["read"] * 3, "offset": [0, 4096, 8192],
                      "size": [4096] * 3})  # fmt: skip
    meta = {b"tilemark.trace": TraceMeta(source="synthetic").to_json().encode()}
    pq.write_table(table.replace_schema_metadata(meta), old)
    _, _, lists = compile_one(tmp_path, open_trace(old), Remap("off", MiB, 4096), by_queue=True)
    assert list(lists[0]["time_ns"]) == [0, 500, 900]
