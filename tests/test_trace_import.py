"""`tilemark trace import`: each format from samples written as its publisher documents it,
round trips through every format, detection, bad rows, empty files, --device, the reorder
window and the output file's safety (docs/traces.md)."""

from __future__ import annotations

import gzip
import json
import os
import random
from pathlib import Path

import pytest

from tilemark.cli import main
from tilemark.errors import UsageError
from tilemark.trace import formats
from tilemark.trace.formats import base, csvbase
from tilemark.trace.importer import import_trace
from tilemark.trace.schema import TraceMeta, TraceWriter, open_trace
from trace_render import render

FLAGS = ("sync", "fua", "preflush", "meta")


def cli(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def rows_of(path: Path) -> list[dict]:
    return open_trace(path).table().to_pylist()


def row(**values) -> dict:
    """A trace row: unknowns null, flags false."""
    base = {
        "issue_ns": 0,
        "complete_ns": None,
        "latency_ns": None,
        "op": "read",
        "offset": 0,
        "size": 0,
        "sync": False,
        "fua": False,
        "preflush": False,
        "meta": False,
        "pid": None,
        "comm": None,
        "device": None,
        "queue_ns": None,  # no import format says when a request was queued
    }
    base.update(values)
    return base


def ev(dev: str, cpu: int, seq: int, t_ns: int, pid: int, act: str, rwbs: str, rest: str) -> str:
    """One event line as blkparse prints it (blkparse_fmt.c: "%3d,%-3d %2d %8d %5d.%09lu %5u
    %2s %3s ")."""
    major, minor = dev.split(",")
    sec, nsec = divmod(t_ns, 10**9)
    return (
        f"{int(major):3d},{int(minor):<3d} {cpu:2d} {seq:8d} {sec:5d}.{nsec:09d} {pid:5d} "
        f"{act:>2s} {rwbs:>3s} {rest}\n"
    )


# -- each format, written from its documentation ---------------------------------------------
def blkparse_sample() -> str:
    lines = [
        "Input file sdb.blktrace.0 added\n",  # 1
        "Input file sdb.blktrace.1 added\n",  # 2
        ev("8,16", 0, 1, 0, 0, "C", "W", "2000 + 8 [0]"),  # 3: issued before tracing began
        ev("8,16", 1, 2, 10_000, 4162, "Q", "R", "1000 + 8 [postgres]"),  # 4
        ev("8,16", 1, 3, 10_500, 4162, "G", "R", "1000 + 8 [postgres]"),  # 5
        ev("8,16", 1, 4, 11_000, 4162, "P", "N", "[postgres]"),  # 6
        ev("8,16", 1, 5, 11_500, 4162, "I", "R", "1000 + 8 [postgres]"),  # 7
        ev("8,16", 1, 6, 12_000, 4162, "U", "N", "[postgres] 1"),  # 8
        ev("8,16", 1, 7, 12_345, 120, "D", "R", "1000 + 8 [kworker/1:1H]"),  # 9: by a kworker
        ev("8,16", 0, 8, 20_000, 4170, "Q", "WS", "5000 + 16 [postgres]"),  # 10
        ev("8,16", 0, 9, 20_100, 4170, "Q", "WS", "5016 + 8 [postgres]"),  # 11
        ev("8,16", 0, 10, 20_200, 4170, "M", "WS", "5016 + 8 [postgres]"),  # 12: merged
        ev("8,16", 0, 11, 21_000, 4170, "D", "WS", "5000 + 24 [postgres]"),  # 13
        ev("8,16", 0, 12, 30_000, 212, "Q", "FWS", "[jbd2/sdb-8]"),  # 14: an empty preflush
        ev("8,16", 0, 13, 31_000, 120, "D", "FN", "[kworker/0:1H]"),  # 15: the flush
        ev("8,16", 1, 14, 40_000, 212, "Q", "WFSM", "6000 + 8 [jbd2/sdb-8]"),  # 16
        ev("8,16", 1, 15, 41_000, 212, "D", "WFSM", "6000 + 8 [jbd2/sdb-8]"),  # 17: FUA meta
        ev("8,16", 0, 16, 50_000, 0, "C", "WS", "5000 + 24 [0]"),  # 18
        ev("8,16", 1, 17, 60_000, 0, "C", "R", "1000 + 8 [0]"),  # 19
        ev("8,16", 0, 18, 70_000, 0, "C", "FN", "0 [0]"),  # 20
        ev("8,32", 1, 19, 80_000, 5000, "Q", "D", "0 + 2048 [fstrim]"),  # 21
        ev("8,32", 1, 20, 81_000, 5000, "D", "D", "0 + 2048 [fstrim]"),  # 22: a discard
        ev("8,32", 1, 21, 90_000, 0, "C", "D", "0 + 2048 [0]"),  # 23
        ev("8,16", 1, 22, 95_000, 0, "C", "WFSM", "6000 + 8 [-5]"),  # 24: an IO error
        ev("8,16", 0, 0, 96_000, 0, "m", "N", "cfq4170 slice expired t=0"),  # 25
        ev("8,16", 1, 23, 100_000, 4162, "D", "RA", "7000 + 256 [postgres]"),  # 26: no C
        "\n",  # 27
        "CPU0 (8,16):\n",  # 28
        " Reads Queued:           1,        4KiB\t Writes Queued:           3,       16KiB\n",
        " IO unplugs:             1        \t Timer unplugs:           0\n",
        "\n",
        "Throughput (R/W): 4KiB/s / 16KiB/s\n",
        "Events (8,16): 25 entries\n",
        "Skips: 2 forward (7 -   0.1%)\n",
    ]
    return "".join(lines)


def test_blkparse_requests_from_issue_and_completion(tmp_path, capsys):
    src = tmp_path / "sdb.txt"
    src.write_text(blkparse_sample())
    status, out, err = cli(capsys, "trace", "import", str(src), "-o", str(tmp_path / "t.pq"))
    assert status == 0, err
    t0 = 12_345
    assert rows_of(tmp_path / "t.pq") == [
        # The kworker issued it; the process is the one that queued it.
        row(
            issue_ns=0,
            complete_ns=60_000 - t0,
            latency_ns=47_655,
            op="read",
            offset=1000 * 512,
            size=4096,
            pid=4162,
            comm="postgres",
            device="8:16",
        ),
        row(
            issue_ns=21_000 - t0,
            complete_ns=50_000 - t0,
            latency_ns=29_000,
            op="write",
            offset=5000 * 512,
            size=24 * 512,
            sync=True,
            pid=4170,
            comm="postgres",
            device="8:16",
        ),
        row(
            issue_ns=31_000 - t0,
            complete_ns=70_000 - t0,
            latency_ns=39_000,
            op="flush",
            preflush=True,
            pid=212,
            comm="jbd2/sdb-8",
            device="8:16",
        ),
        row(
            issue_ns=41_000 - t0,
            complete_ns=95_000 - t0,
            latency_ns=54_000,
            op="write",
            offset=6000 * 512,
            size=4096,
            fua=True,
            sync=True,
            meta=True,
            pid=212,
            comm="jbd2/sdb-8",
            device="8:16",
        ),
        row(
            issue_ns=81_000 - t0,
            complete_ns=90_000 - t0,
            latency_ns=9_000,
            op="discard",
            offset=0,
            size=2048 * 512,
            pid=5000,
            comm="fstrim",
            device="8:32",
        ),
        # Never completed in the trace: kept, latency unknown.
        row(
            issue_ns=100_000 - t0,
            op="read",
            offset=7000 * 512,
            size=256 * 512,
            pid=4162,
            comm="postgres",
            device="8:16",
        ),
    ]
    trace = open_trace(tmp_path / "t.pq")
    assert trace.meta.source == "import:blkparse"
    assert trace.meta.events_lost == 7  # the summary's Skips line
    assert trace.meta.start_epoch_ns is None and trace.meta.device is None
    assert trace.meta.extra["device_names"] == ["8:16", "8:32"]
    assert any("1 requests completed with an error" in n for n in trace.meta.notes)
    skipped = trace.meta.extra["skipped"]
    assert skipped["completions without an issue (C without D)"] == 1
    assert skipped["issues without a completion (D without C; kept, latency unknown)"] == 1
    assert skipped["blkparse messages (action m)"] == 1
    assert "skipped 1 completions without an issue (C without D) (first at line 3)" in out
    assert "first at line 26" in out and "first at line 28" in out


def test_blkparse_device_filter(tmp_path, capsys):
    src = tmp_path / "sdb.txt"
    src.write_text(blkparse_sample())
    status, _, err = cli(  # as blkparse prints it; the trace says 8:32
        capsys, "trace", "import", str(src), "-o", str(tmp_path / "t.pq"), "--device", "8,32"
    )
    assert status == 0, err
    rows = rows_of(tmp_path / "t.pq")
    assert [(r["op"], r["device"], r["issue_ns"]) for r in rows] == [("discard", "8:32", 0)]
    assert open_trace(tmp_path / "t.pq").meta.device == "8:32"


def test_fio_iolog_v2_waits_are_ms_since_the_start(tmp_path, capsys):
    src = tmp_path / "job.log"
    src.write_text(
        "fio version 2 iolog\n"
        "/dev/sdb add\n"
        "/dev/sdb open\n"
        "/dev/sdb write 0 4096\n"
        "/dev/sdb wait 5 0\n"
        "/dev/sdb read 4096 8192\n"
        "\n"
        "/dev/sdb read 12288 4096\n"
        "/dev/sdb wait 3 0\n"  # earlier than the last wait: fio does not wait
        "/dev/sdb trim 0 1048576\n"
        "/dev/sdb wait 12 0\n"
        "/dev/sdb datasync 0 0\n"
        "/dev/sdb close\n"
    )
    status, out, err = cli(capsys, "trace", "import", str(src), "-o", str(tmp_path / "t.pq"))
    assert status == 0, err
    ms = 1_000_000
    dev = "/dev/sdb"
    assert rows_of(tmp_path / "t.pq") == [
        row(issue_ns=0, op="write", offset=0, size=4096, device=dev),
        row(issue_ns=5 * ms, op="read", offset=4096, size=8192, device=dev),
        row(issue_ns=5 * ms, op="read", offset=12288, size=4096, device=dev),
        row(issue_ns=5 * ms, op="discard", offset=0, size=1 << 20, device=dev),
        row(issue_ns=12 * ms, op="flush", device=dev),
    ]
    meta = open_trace(tmp_path / "t.pq").meta
    assert meta.extra["iolog_version"] == 2 and meta.device == dev
    assert any("v2 has no times" in n for n in meta.notes)
    assert "skipped 3 fio file actions (add, open, close) (first at line 2)" in out


def test_fio_iolog_v3_timestamps_are_microseconds(tmp_path, capsys):
    src = tmp_path / "job.log"
    src.write_text(
        "fio version 3 iolog\n"
        "0 /dev/sdb add\n"
        "0 /dev/sdc add\n"
        "12 /dev/sdb open\n"
        "12 /dev/sdc open\n"
        "1043 /dev/sdb write 4096 4096\n"
        "1040 /dev/sdb read 0 8192\n"  # logged a little late: sorted
        "2175 /dev/sdc read 0 512\n"
        "3001 /dev/sdb sync 0 0\n"
        "3500 /dev/sdb close\n"
    )
    status, _, err = cli(capsys, "trace", "import", str(src), "-o", str(tmp_path / "t.pq"))
    assert status == 0, err
    assert rows_of(tmp_path / "t.pq") == [
        row(issue_ns=0, op="read", offset=0, size=8192, device="/dev/sdb"),
        row(issue_ns=3_000, op="write", offset=4096, size=4096, device="/dev/sdb"),
        row(issue_ns=1_135_000, op="read", offset=0, size=512, device="/dev/sdc"),
        row(issue_ns=1_961_000, op="flush", device="/dev/sdb"),
    ]
    assert open_trace(tmp_path / "t.pq").meta.extra["iolog_version"] == 3


MSR_SAMPLE = (
    "128166372003061629,hm,1,Read,3154509824,24576,41286\n"
    "128166372002969077,hm,1,Write,3154722816,4096,31259\n"  # 9.3 ms earlier
    "128166372016382155,hm,0,Write,1019904,8192,2236\n"
)


def test_msr_cambridge(tmp_path, capsys):
    src = tmp_path / "hm_1.csv"
    src.write_text(MSR_SAMPLE)
    status, _, err = cli(capsys, "trace", "import", str(src), "-o", str(tmp_path / "t.pq"))
    assert status == 0, err
    assert rows_of(tmp_path / "t.pq") == [
        row(
            issue_ns=0,
            complete_ns=3_125_900,
            latency_ns=3_125_900,
            op="write",
            offset=3154722816,
            size=4096,
            device="hm_1",
        ),
        row(
            issue_ns=9_255_200,
            complete_ns=9_255_200 + 4_128_600,
            latency_ns=4_128_600,
            op="read",
            offset=3154509824,
            size=24576,
            device="hm_1",
        ),
        row(
            issue_ns=1_341_307_800,
            complete_ns=1_341_307_800 + 223_600,
            latency_ns=223_600,
            op="write",
            offset=1019904,
            size=8192,
            device="hm_0",
        ),
    ]
    meta = open_trace(tmp_path / "t.pq").meta
    # The first issue as Unix time: 2008-02-22 (filetime 128166372002969077).
    assert meta.start_epoch_ns == (128166372002969077 - 116444736000000000) * 100
    assert meta.source == "import:msr" and meta.extra["devices"] == 2


def test_alibaba_with_the_readme_header(tmp_path, capsys):
    src = tmp_path / "io_traces.csv"
    src.write_text(
        "device_id,opcode,offset,length,timestmap\n"  # as the README spells it
        "0,R,126703644672,4096,1577808000000626\n"
        "419,W,8595369984,16384,1577808000000631\n"
        "0,W,126703648768,4096,1577808000001000\n"
    )
    status, _, err = cli(capsys, "trace", "import", str(src), "-o", str(tmp_path / "t.pq"))
    assert status == 0, err
    assert rows_of(tmp_path / "t.pq") == [
        row(issue_ns=0, op="read", offset=126703644672, size=4096, device="0"),
        row(issue_ns=5_000, op="write", offset=8595369984, size=16384, device="419"),
        row(issue_ns=374_000, op="write", offset=126703648768, size=4096, device="0"),
    ]
    assert open_trace(tmp_path / "t.pq").meta.start_epoch_ns == 1577808000000626 * 1000


def test_tencent_sectors_and_seconds(tmp_path, capsys):
    src = tmp_path / "2018-10-01-01.csv"
    src.write_text(
        "1538323200,1267784,8,1,1283\n1538323200,105352008,584,0,1576\n1538323201,0,1,0,1283\n"
    )
    status, _, err = cli(capsys, "trace", "import", str(src), "-o", str(tmp_path / "t.pq"))
    assert status == 0, err
    assert rows_of(tmp_path / "t.pq") == [
        row(issue_ns=0, op="write", offset=1267784 * 512, size=4096, device="1283"),
        row(issue_ns=0, op="read", offset=105352008 * 512, size=584 * 512, device="1576"),
        row(issue_ns=10**9, op="read", offset=0, size=512, device="1283"),
    ]
    meta = open_trace(tmp_path / "t.pq").meta
    assert meta.start_epoch_ns == 1538323200 * 10**9
    assert any("1 s resolution" in n for n in meta.notes)


def test_compressed_sources_are_read_as_is(tmp_path):
    src = tmp_path / "hm_1.csv.gz"
    src.write_bytes(gzip.compress(MSR_SAMPLE.encode()))
    result = import_trace(src, None, tmp_path / "t.pq")
    assert result.format == "msr" and result.rows == 3
    assert result.bytes_read == len(MSR_SAMPLE) and result.file_bytes == src.stat().st_size


# -- round trips: a trace, rendered in a format, imported back -----------------------------------
def random_rows(fmt: str, n: int = 300, seed: int = 7) -> list[dict]:
    """Rows the format can carry: its ops, flags, time resolution, devices and sizes."""
    rng = random.Random(seed)
    step = {
        "blkparse": 1,
        "iolog3": 1000,
        "iolog2": 10**6,
        "msr": 100,
        "alibaba": 1000,
        "tencent": 10**9,
    }[fmt]
    ops = {
        "blkparse": ["read", "write", "flush", "discard"],
        "iolog3": ["read", "write", "flush", "discard"],
        "iolog2": ["read", "write", "flush", "discard"],
    }.get(fmt, ["read", "write"])
    devices = {
        "blkparse": ["8:16", "259:0"],
        "iolog3": ["/dev/sdb", "/data/file"],
        "iolog2": ["/dev/sdb"],
        "msr": ["hm_1", "src1_0"],
        "alibaba": ["0", "419"],
        "tencent": ["1283", "5583"],
    }[fmt]
    rows, t = [], 0
    flushing: dict[str, int] = {}  # device -> when its flush completes
    for i in range(n):
        t += step * rng.choice([0, 1, 1, 3, 20, 400])
        device = rng.choice(devices)
        op = rng.choice(ops)
        if op == "flush" and flushing.get(device, -1) >= t:
            # The block layer has one flush of a device in flight at a time (blk-flush.c),
            # which is what lets flushes, which have no sector, pair up first-in first-out.
            op = "write"
        size = 0 if op == "flush" else 512 * rng.choice([1, 8, 16, 64, 256, 2048])
        offset = 0 if op == "flush" else 512 * rng.randrange(1 << 24)
        r = row(issue_ns=t, op=op, offset=offset, size=size, device=device)
        if fmt in ("blkparse", "msr"):
            latency = step * rng.randrange(1, 5000)
            if fmt == "blkparse" and i == n - 1:
                latency = None  # the trace ended before it completed
            if latency is not None:
                r.update(complete_ns=t + latency, latency_ns=latency)
            if op == "flush":
                flushing[device] = t + (latency or 1 << 60)
        if fmt == "blkparse":
            r.update(pid=rng.choice([4162, 4170]), comm=rng.choice(["postgres", "fio"]))
            r.update(
                sync=rng.random() < 0.4,
                fua=op == "write" and rng.random() < 0.1,
                meta=rng.random() < 0.1,
                preflush=op == "flush" or (op == "write" and rng.random() < 0.05),
            )
        rows.append(r)
    first = rows[0]["issue_ns"]  # a trace's times are from its first issue
    for r in rows:
        r["issue_ns"] -= first
        if r["complete_ns"] is not None:
            r["complete_ns"] -= first
    return rows


@pytest.mark.parametrize("fmt", ["blkparse", "iolog2", "iolog3", "msr", "alibaba", "tencent"])
def test_every_format_round_trips_to_the_same_trace(tmp_path, fmt):
    round_trip(tmp_path, fmt)


@pytest.mark.parametrize("fmt", ["blkparse", "iolog3", "msr"])
def test_round_trips_across_many_small_blocks(tmp_path, fmt, monkeypatch):
    # Requests whose Q, D and C fall in different blocks; CSV batches of a few rows.
    monkeypatch.setattr(base, "BLOCK_BYTES", 700)
    monkeypatch.setattr(csvbase, "CSV_BLOCK_BYTES", 700)
    round_trip(tmp_path, fmt)


def round_trip(tmp_path, fmt: str) -> None:
    original = tmp_path / "original.pq"
    with TraceWriter(original, TraceMeta(source="synthetic")) as w:
        w.write({k: [r[k] for r in random_rows(fmt)] for k in row()})
    rows = rows_of(original)
    text = tmp_path / f"trace.{fmt}"
    with open(text, "w") as f:
        render(rows, fmt, f)
    result = import_trace(text, None, tmp_path / "imported.pq")  # detected
    assert result.format == fmt.rstrip("23")
    assert rows_of(tmp_path / "imported.pq") == rows


def test_a_completion_too_late_for_the_window_is_given_up_and_counted(tmp_path, monkeypatch):
    # The first request completes after ten others were issued and completed; blocks of a
    # few lines, so that the pairing carries it from block to block.
    monkeypatch.setattr(base, "BLOCK_BYTES", 400)
    rows = [
        row(
            issue_ns=0,
            complete_ns=50_000,
            latency_ns=50_000,
            op="read",
            offset=0,
            size=4096,
            pid=1,
            comm="slow",
            device="8:16",
        )
    ]
    for i in range(1, 11):
        t = i * 1000
        rows.append(
            row(
                issue_ns=t,
                complete_ns=t + 500,
                latency_ns=500,
                op="write",
                offset=i << 20,
                size=4096,
                pid=2,
                comm="fast",
                device="8:16",
            )
        )
    src = tmp_path / "t.txt"
    with open(src, "w") as f:
        render(rows, "blkparse", f)
    import_trace(src, None, tmp_path / "wide.pq")
    assert rows_of(tmp_path / "wide.pq") == rows
    # A window of 4 rows keeps at most 2 requests waiting for their completion.
    result = import_trace(src, None, tmp_path / "narrow.pq", reorder_rows=4)
    got = rows_of(tmp_path / "narrow.pq")
    assert got[0] == {**rows[0], "complete_ns": None, "latency_ns": None}
    assert got[1:] == rows[1:]
    skipped = {s.reason: s.count for s in result.skipped}
    assert skipped["issues without a completion (D without C; kept, latency unknown)"] == 1
    assert skipped["completions without an issue (C without D)"] == 1


def test_detection_of_each_format():
    assert formats.detect(blkparse_sample().splitlines()) == ["blkparse"]
    assert formats.detect(["fio version 2 iolog", "/dev/sdb add"]) == ["iolog"]
    assert formats.detect(["fio version 3 iolog", "0 /dev/sdb add"]) == ["iolog"]
    assert formats.detect(MSR_SAMPLE.splitlines()) == ["msr"]
    assert formats.detect(["0,R,126703644672,4096,1577808000000626"]) == ["alibaba"]
    assert formats.detect(["1538323200,1267784,8,1,1283"]) == ["tencent"]
    assert formats.detect(["Timestamp,Offset,Size,IOType,VolumeID", "1,2,3,0,4"]) == ["tencent"]
    assert formats.detect(["1538323200,1267784,8,7,1283"]) == []  # IOType 7: none


# -- what cannot be imported -----------------------------------------------------------------
def assert_refused(capsys, tmp_path, args, *fragments):
    """Exit 2, one sentence naming the problem, and nothing written beside the sources."""
    before = sorted(p.name for p in tmp_path.iterdir())
    status, out, err = cli(capsys, "trace", "import", *args)
    assert status == 2
    assert err.startswith("tilemark: error: ") and err.count("\n") == 1, err
    for fragment in fragments:
        assert fragment in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    return err


def test_unknown_and_ambiguous_formats_ask_for_format(tmp_path, capsys, monkeypatch):
    src = tmp_path / "notes.txt"
    src.write_text("hello, this is not a trace\n")
    out = str(tmp_path / "t.pq")
    assert_refused(
        capsys,
        tmp_path,
        [str(src), "-o", out],
        "cannot tell which trace format",
        "--format (blkparse, iolog, msr, alibaba, tencent)",
    )

    class LooksLikeAnything:
        NAME = "lookalike"

        @staticmethod
        def detect(lines):
            return True

    monkeypatch.setitem(formats.FORMATS, "lookalike", LooksLikeAnything)
    msr = tmp_path / "hm.csv"
    msr.write_text(MSR_SAMPLE)
    assert_refused(
        capsys,
        tmp_path,
        [str(msr), "-o", out],
        "could be in any of the formats msr, lookalike",
        "--format",
    )
    assert_refused(
        capsys,
        tmp_path,
        [str(msr), "-o", out, "--format", "csv"],
        "--format must be one of blkparse, iolog, msr, alibaba, tencent",
    )


@pytest.mark.parametrize(
    ("fmt", "text", "line", "why"),
    [
        (
            "msr",
            MSR_SAMPLE.replace("Write,3154722816", "Rwrite,3154722816"),
            2,
            "Type must be Read or Write, got 'Rwrite'",
        ),
        (
            "msr",
            MSR_SAMPLE + "\n128166372016382155,hm,0,Write,1019904,8192\n",
            5,
            "has 6 fields, msr rows have 7",
        ),
        (
            "alibaba",
            "0,R,126703644672,4096,1577808000000626\n0,R,12x,4096,1577808000000627\n",
            2,
            "offset (bytes) must be a whole number >= 0, got '12x'",
        ),
        (
            "tencent",
            "1538323200,1267784,8,1,1283\n1538323200,1267784,8,2,1283\n",
            2,
            "IOType must be 0 or 1, got '2'",
        ),
        (
            "tencent",
            "1538323200,1267784,8,1,1283\n99999999999,0,8,1,1\n",
            2,
            "Timestamp (Unix seconds) 99999999999 is too large",
        ),
        (
            "iolog",
            "fio version 2 iolog\n/dev/sdb add\n/dev/sdb frobnicate 0 4096\n",
            3,
            "'frobnicate' is not a fio iolog action",
        ),
        (
            "iolog",
            "fio version 3 iolog\n0 /dev/sdb add\n/dev/sdb write 0 4096\n",
            3,
            "starts with '/dev/sdb', not a timestamp",
        ),
        (
            "blkparse",
            blkparse_sample().replace("Input file sdb.blktrace.1 added", "garbage"),
            2,
            "is not a blkparse event line",
        ),
        (
            "blkparse",
            blkparse_sample().replace("  R 1000 + 8 [kworker", " QQ 1000 + 8 [kworker"),
            9,
            "'QQ' is not an RWBS field",
        ),
    ],
)
def test_a_bad_row_is_one_sentence_with_its_line(tmp_path, capsys, fmt, text, line, why):
    src = tmp_path / "trace.txt"
    src.write_text(text)
    args = [str(src), "-o", str(tmp_path / "t.pq"), "--format", fmt]
    err = assert_refused(capsys, tmp_path, args, f"{src} line {line}: {why}")
    assert not (tmp_path / "t.pq").exists()
    assert err.rstrip().endswith(".")


def test_empty_and_unreadable_sources(tmp_path, capsys):
    out = str(tmp_path / "t.pq")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert_refused(capsys, tmp_path, [str(empty), "-o", out], f"{empty} is empty")
    blank = tmp_path / "blank.csv"
    blank.write_text("\n\n  \n")
    assert_refused(capsys, tmp_path, [str(blank), "-o", out], "has only blank lines")
    header_only = tmp_path / "job.log"
    header_only.write_text("fio version 3 iolog\n0 /dev/sdb add\n")
    assert_refused(
        capsys,
        tmp_path,
        [str(header_only), "-o", out],
        "has no requests to import (only 1 fio file actions",
    )
    assert_refused(capsys, tmp_path, [str(tmp_path / "missing.csv"), "-o", out], "does not exist")
    assert_refused(capsys, tmp_path, [str(tmp_path), "-o", out], "is a directory")
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)  # read once only: refused before anything reads it
    assert_refused(capsys, tmp_path, [str(pipe), "-o", out], "is not a regular file")


def test_device_filter_names_the_devices_when_none_match(tmp_path, capsys):
    src = tmp_path / "hm.csv"
    src.write_text(MSR_SAMPLE)
    out = tmp_path / "t.pq"
    status, _, err = cli(capsys, "trace", "import", str(src), "-o", str(out), "--device", "hm_0")
    assert status == 0, err
    assert [r["device"] for r in rows_of(out)] == ["hm_0"]
    out.unlink()
    assert_refused(
        capsys,
        tmp_path,
        [str(src), "-o", str(out), "--device", "web_2"],
        "has no requests of --device web_2 (its devices: hm_0, hm_1)",
    )


def test_rows_out_of_order_beyond_the_window_name_their_line(tmp_path, monkeypatch):
    # One row per CSV block, so rows reach the reorder window one at a time.
    monkeypatch.setattr(csvbase, "CSV_BLOCK_BYTES", 40)
    src = tmp_path / "t.csv"
    src.write_text(
        "1538323210,0,8,0,1\n"
        "1538323220,8,8,0,1\n"
        "1538323230,16,8,0,1\n"
        "1538323240,24,8,0,1\n"
        "1538323205,32,8,0,1\n"  # 35 s earlier than the row before it
    )
    result = import_trace(src, None, tmp_path / "sorted.pq", reorder_rows=4)
    assert [r["issue_ns"] // 10**9 for r in rows_of(tmp_path / "sorted.pq")] == [0, 5, 15, 25, 35]
    assert result.rows == 5
    with pytest.raises(
        UsageError,
        match=rf"{src} line 5: its request at .* more than the reorder "
        r"window \(1 rows\) out of time order",
    ):
        import_trace(src, None, tmp_path / "late.pq", reorder_rows=1)
    assert not (tmp_path / "late.pq").exists()


def test_the_output_is_never_overwritten_or_written_through_a_link(tmp_path, capsys):
    src = tmp_path / "hm.csv"
    src.write_text(MSR_SAMPLE)
    out = tmp_path / "t.pq"
    out.write_text("someone's file")
    assert_refused(capsys, tmp_path, [str(src), "-o", str(out)], "exists; pass --force")
    assert out.read_text() == "someone's file"
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    link = tmp_path / "link.pq"
    link.symlink_to(target)
    assert_refused(capsys, tmp_path, [str(src), "-o", str(link)], "is a symbolic link")
    status, _, err = cli(capsys, "trace", "import", str(src), "-o", str(link), "--force")
    assert status == 0, err
    assert target.read_text() == "keep me" and not link.is_symlink()
    assert open_trace(link).rows == 3
    status, _, err = cli(capsys, "trace", "import", str(src), "-o", str(out), "--force")
    assert status == 0 and open_trace(out).rows == 3
    assert_refused(
        capsys, tmp_path, [str(src), "-o", str(src), "--force"], "is the file being imported"
    )
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_json_result(tmp_path, capsys):
    src = tmp_path / "hm.csv"
    src.write_text(MSR_SAMPLE)
    status, out, _ = cli(
        capsys, "trace", "import", str(src), "-o", str(tmp_path / "t.pq"), "--json"
    )
    assert status == 0
    doc = json.loads(out)
    assert doc["rows"] == 3 and doc["format"] == "msr" and doc["devices"] == 2
    assert doc["bytes_read"] == len(MSR_SAMPLE) and doc["out"] == str(tmp_path / "t.pq")
    assert doc["duration_s"] == pytest.approx(1.3413078)


def test_unreadable_sources(tmp_path, capsys):
    out = str(tmp_path / "t.pq")
    damaged = tmp_path / "hm.csv.gz"
    damaged.write_bytes(b"\x1f\x8b\x08\x00 this is not deflate data at all")
    assert_refused(capsys, tmp_path, [str(damaged), "-o", out], f"{damaged} cannot be read")
    binary = tmp_path / "disk.img"
    binary.write_bytes(bytes(range(256)) * 64)
    assert_refused(capsys, tmp_path, [str(binary), "-o", out], "cannot tell which trace format")
    assert_refused(
        capsys, tmp_path, [str(binary), "-o", out, "--format", "msr"], f"{binary} line 1:"
    )
    endless = tmp_path / "endless.log"
    endless.write_bytes(b"fio version 3 iolog\n" + b"x" * (3 << 20))  # a line without an end
    assert_refused(
        capsys, tmp_path, [str(endless), "-o", out], f"{endless} line 2: is longer than 1 MiB"
    )
