"""Trace capture without the kernel: ring-buffer pages decoded, events paired into requests.

The kernel side is tested in tests/e2e/test_trace_capture.py (root); here the page format and
the pairing rules run on pages and events built byte by byte."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from tilemark.errors import UsageError
from tilemark.trace import pairing
from tilemark.trace.capture import check_output
from tilemark.trace.pairing import FUA, META, PREFLUSH, SYNC, C, D, Pairer, Q, parse_rwbs
from tilemark.trace.schema import TraceMeta, TraceWriter
from tilemark.trace.tracefs import (
    MISSED_EVENTS,
    MISSED_STORED,
    EventConverter,
    EventFormat,
    decode_pages,
    read_format,
)

ISSUE_FORMAT = """name: block_rq_issue
ID: 2104
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;
\tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;
\tfield:unsigned int nr_sector;\toffset:24;\tsize:4;\tsigned:0;
\tfield:unsigned int bytes;\toffset:28;\tsize:4;\tsigned:0;
\tfield:unsigned short ioprio;\toffset:32;\tsize:2;\tsigned:0;
\tfield:char rwbs[10];\toffset:34;\tsize:10;\tsigned:0;
\tfield:char comm[16];\toffset:44;\tsize:16;\tsigned:0;
\tfield:__data_loc char[] cmd;\toffset:60;\tsize:4;\tsigned:0;
"""
PAGE = 4096


@pytest.mark.parametrize(
    ("rwbs", "op", "flags"),
    [
        (b"RS", pairing.OP_READ, SYNC),
        (b"RA", pairing.OP_READ, 0),
        (b"RM", pairing.OP_READ, META),
        (b"WFS", pairing.OP_WRITE, FUA | SYNC),
        (b"FWFS", pairing.OP_WRITE, PREFLUSH | FUA | SYNC),
        (b"FF", pairing.OP_FLUSH, PREFLUSH),
        (b"FS", pairing.OP_FLUSH, SYNC),
        (b"D", pairing.OP_DISCARD, 0),
        (b"DE", pairing.OP_DISCARD, 0),
        (b"N", pairing.OP_OTHER, 0),
        (b"WS\x00\x00dd", pairing.OP_WRITE, SYNC),  # bytes after the NUL are not the string's
    ],
)
def test_rwbs_strings_become_op_and_flags(rwbs, op, flags):
    assert parse_rwbs(rwbs) == (op, flags)


def test_format_files_give_the_record_layout(tmp_path):
    path = tmp_path / "format"
    path.write_text(ISSUE_FORMAT)
    fmt = read_format(path, "block_rq_issue", ("dev", "sector", "nr_sector", "rwbs", "comm"))
    assert fmt.event_id == 2104
    assert fmt.dtype.itemsize == 64
    assert fmt.dtype.fields["sector"][1] == 16 and fmt.dtype.fields["comm"][1] == 44
    assert fmt.dtype.fields["common_pid"][0] == np.dtype("<i4")


def _issue_record(dev: int, sector: int, nsec: int, rwbs: bytes, comm: bytes, pid: int) -> bytes:
    rec = bytearray(68)  # 64 bytes of fields, the empty cmd string, 4-byte aligned
    struct.pack_into("<HBBi", rec, 0, 2104, 0, 0, pid)
    struct.pack_into("<I", rec, 8, dev)
    struct.pack_into("<QII", rec, 16, sector, nsec, nsec * 512)
    rec[34 : 34 + len(rwbs)] = rwbs
    rec[44 : 44 + len(comm)] = comm
    return bytes(rec)


def _page(ts: int, events: list[bytes], missed: int | None = None) -> bytes:
    data = b"".join(events)
    commit = len(data)
    tail = b""
    if missed is not None:
        commit |= MISSED_EVENTS | MISSED_STORED
        tail = struct.pack("<Q", missed)
    page = struct.pack("<QQ", ts, commit) + data + tail
    return page + bytes(PAGE - len(page))


def _data(delta: int, payload: bytes) -> bytes:
    return struct.pack("<I", (delta << 5) | (len(payload) // 4)) + payload


def _extend(delta: int) -> bytes:
    return struct.pack("<II", (delta & ((1 << 27) - 1)) << 5 | 30, delta >> 27)


def _padding(length: int) -> bytes:  # a discarded event: its space stays
    return struct.pack("<II", (1 << 5) | 29, length) + bytes(length - 4)


@pytest.fixture
def issue_format(tmp_path) -> dict[int, EventFormat]:
    path = tmp_path / "format"
    path.write_text(ISSUE_FORMAT)
    fmt = read_format(path, "block_rq_issue", ("dev", "sector", "nr_sector", "rwbs", "comm"))
    return {fmt.event_id: fmt}


def test_pages_decode_to_records_with_their_times(issue_format):
    dev = (7 << 20) | 3
    first = _page(
        1_000,
        [
            _data(5, _issue_record(dev, 8, 16, b"RS", b"fio", 42)),
            _padding(24),
            _extend(1 << 28),  # a long pause: the delta does not fit 27 bits
            _data(7, _issue_record(dev, 24, 8, b"WFS", b"kworker/0:1", 43)),
        ],
    )
    second = _page(5_000_000_000, [_data(0, _issue_record(dev, 0, 0, b"FF", b"jbd2", 44))], 17)
    decoded = decode_pages(first + second, PAGE, issue_format)
    rec = decoded.records["block_rq_issue"]
    assert rec["sector"].tolist() == [8, 24, 0]
    assert rec["nr_sector"].tolist() == [16, 8, 0]
    assert rec["common_pid"].tolist() == [42, 43, 44]
    assert decoded.times["block_rq_issue"].tolist() == [1_005, 1_005 + (1 << 28) + 7, 5e9]
    assert decoded.lost == 17 and decoded.lost_unknown == 0

    converter = EventConverter({})
    events = converter.events(decoded)
    assert [converter.comms[i] for i in events["comm"]] == ["fio", "kworker/0:1", "jbd2"]
    assert events["op"].tolist() == [pairing.OP_READ, pairing.OP_WRITE, pairing.OP_FLUSH]
    assert events["flags"].tolist() == [SYNC, FUA | SYNC, PREFLUSH]
    assert (events["kind"] == D).all()


def _ev(t, kind, sector=8, op=pairing.OP_READ, nsec=8, pid=1, comm=0, dev=1):
    e = np.zeros(1, pairing.EVENT_DTYPE)
    e[0] = (t, kind, op, 0, dev, sector, nsec, pid, comm, 0)
    return e


def _events(*evs):
    return np.concatenate(evs)


def test_issue_and_completion_pair_across_batches_and_leave_in_issue_order():
    p = Pairer()
    p.add(_events(_ev(10, D, sector=8), _ev(11, D, sector=100), _ev(12, C, sector=100)))
    # sector 8 is still in flight: the row of sector 100 (issued later) must wait for it.
    assert len(p.advance(watermark=15)) == 0
    p.add(_events(_ev(20, C, sector=8)))
    rows = p.advance(watermark=25)
    assert rows["sector"].tolist() == [8, 100]
    assert rows["issue"].tolist() == [10, 11] and rows["complete"].tolist() == [20, 12]
    assert len(p.finish()) == 0


def test_two_requests_of_one_block_in_flight_pair_first_in_first_out():
    p = Pairer()
    p.add(_events(_ev(1, D), _ev(2, D), _ev(3, C), _ev(4, C)))
    rows = p.finish()
    assert list(zip(rows["issue"].tolist(), rows["complete"].tolist(), strict=True)) == [
        (1, 3),
        (2, 4),
    ]


def test_requests_issued_before_or_still_in_flight_are_counted():
    p = Pairer()
    p.add(_events(_ev(1, C, sector=5), _ev(2, D, sector=5), _ev(3, C, sector=5), _ev(4, D)))
    rows = p.finish()
    assert rows["issue"].tolist() == [2, 4]
    assert rows["complete"].tolist() == [3, -1]
    assert p.counts.completions_without_issue == 1
    assert p.counts.in_flight_at_end == 1


def test_the_submitter_comes_from_the_queue_event_and_flush_echoes_are_ignored():
    w = pairing.OP_WRITE
    p = Pairer()
    p.add(
        _events(
            _ev(1, Q, op=w, pid=100, comm=1),
            _ev(2, D, op=w, pid=7, comm=2),  # issued by a kworker
            _ev(3, C, op=w, pid=0),
            _ev(4, C, op=w, nsec=0, pid=0),  # the flush sequence finishing the request
            _ev(5, D, sector=0, op=pairing.OP_FLUSH, nsec=0, pid=7, comm=2),
            _ev(6, C, sector=0, op=pairing.OP_FLUSH, nsec=0),
        )
    )
    rows = p.finish()
    assert rows["pid"].tolist() == [100, 7] and rows["comm"].tolist() == [1, 2]
    assert rows["op"].tolist() == [w, pairing.OP_FLUSH]
    assert p.counts.completions_without_issue == 0


def test_a_request_keeps_its_queue_time_while_it_waits_for_its_completion():
    w = pairing.OP_WRITE
    p = Pairer()
    # sector 8: queued at 5, issued at 10, completed in the next batch; sector 100: no Q (a
    # request the block layer made); sector 200: in flight when the capture ends.
    p.add(
        _events(_ev(5, Q, op=w), _ev(10, D, op=w), _ev(12, D, sector=100), _ev(13, C, sector=100))
    )
    assert len(p.advance(watermark=15)) == 0  # sector 8 still waits for its completion
    p.add(_events(_ev(20, C, op=w), _ev(30, Q, sector=200), _ev(31, D, sector=200)))
    rows = p.advance(watermark=25)
    assert rows["sector"].tolist() == [8, 100]
    assert rows["queue"].tolist() == [5, -1] and rows["issue"].tolist() == [10, 12]
    last = p.finish()
    assert last["queue"].tolist() == [30] and last["complete"].tolist() == [-1]


def test_a_flush_completed_at_sector_2_to_the_64_minus_1_pairs_with_its_issue_at_0():
    # What the kernel reports (block_rq_issue: "7,1 FF 0 () 0 + 0", block_rq_complete:
    # "7,1 FF () 18446744073709551615 + 0"): unpaired, every flush lost its completion and held
    # the rows behind it back for max_pending_ns.
    f = pairing.OP_FLUSH
    p = Pairer()
    p.add(
        _events(
            _ev(1, D, sector=0, op=f, nsec=0),
            _ev(2, C, sector=(1 << 64) - 1, op=f, nsec=0),
            _ev(3, D, sector=0, op=f, nsec=0),
            _ev(5, C, sector=(1 << 64) - 1, op=f, nsec=0),
        )
    )
    rows = p.finish()
    assert rows["complete"].tolist() == [2, 5]
    assert p.counts.completions_without_issue == 0 and p.counts.in_flight_at_end == 0


def test_a_request_that_never_completes_does_not_hold_the_trace_back_forever():
    p = Pairer(max_pending_ns=100)
    p.add(_events(_ev(10, D, sector=1), _ev(20, D, sector=2), _ev(30, C, sector=2)))
    assert len(p.advance(watermark=50)) == 0
    rows = p.advance(watermark=200)
    assert rows["sector"].tolist() == [1, 2] and rows["complete"].tolist() == [-1, 30]
    assert p.counts.written_incomplete_early == 1


def test_an_existing_file_that_is_not_a_trace_is_not_replaced(tmp_path):
    mine = tmp_path / "notes.parquet"
    mine.write_text("my notes")
    with pytest.raises(UsageError, match="not written by tilemark"):
        check_output(mine, force=False)
    check_output(mine, force=True)
    ours = tmp_path / "old.parquet"
    with TraceWriter(ours, TraceMeta(source="capture")) as w:
        w.write({"issue_ns": [0], "op": ["read"], "offset": [0], "size": [4096]})
    check_output(ours, force=False)  # a trace tilemark wrote may be replaced
    with pytest.raises(UsageError, match="does not exist"):
        check_output(tmp_path / "missing" / "t.parquet", force=False)


def test_after_the_cutoff_only_completions_of_earlier_requests_count():
    p = Pairer()
    p.add(_events(_ev(5, D, sector=1), _ev(15, D, sector=2), _ev(12, C, sector=1)))
    p.add(_events(_ev(16, C, sector=2), _ev(17, D, sector=3)))
    p.cutoff = 10
    assert p.waiting_before(10) == 1
    rows = p.finish()
    assert rows["sector"].tolist() == [1] and rows["complete"].tolist() == [12]
    assert p.counts.completions_without_issue == 0 and p.counts.in_flight_at_end == 0
