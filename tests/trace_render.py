"""Renders trace rows in each text format `tilemark trace import` reads (tests and the import
benchmark): blkparse's default output, fio iolog v2/v3, MSR Cambridge, Alibaba and Tencent
CSV, each as its publisher documents it (docs/traces.md).

Rows are dicts of the trace schema (times in ns from the first issue). Each renderer writes
what its format can say; a row the format cannot say (a latency in a format without one, a
time finer than its resolution) is the caller's business: the round-trip tests build rows
each format can carry.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import IO, Any

SECTOR = 512
FILETIME_UNIX_EPOCH = 116_444_736_000_000_000
# Absolute start of the rendered CSV traces (2008-02-22 for MSR, 2020 for Alibaba, 2018 for
# Tencent: when the published traces were recorded).
MSR_START_FILETIME = 128_166_372_000_000_000
ALIBABA_START_US = 1_577_808_000_000_000
TENCENT_START_S = 1_538_323_200
KWORKER = (120, "kworker/0:1H")


def render(rows: Iterable[dict[str, Any]], fmt: str, out: IO[str], **options: Any) -> None:
    """Write `rows` to `out` in format `fmt` (blkparse, iolog2, iolog3, msr, alibaba,
    tencent)."""
    RENDERERS[fmt](rows, out, **options)


# -- blkparse --------------------------------------------------------------------------------
def rwbs(row: dict[str, Any]) -> str:
    """The RWBS field blkparse prints for a request (blkparse_fmt.c fill_rwbs)."""
    main = {"read": "R", "write": "W", "discard": "D", "flush": "N"}[row["op"]]
    text = "F" if row.get("preflush") or row["op"] == "flush" else ""
    text += main
    text += "F" if row.get("fua") else ""
    text += "S" if row.get("sync") else ""
    text += "M" if row.get("meta") else ""
    return text


def _blk_line(dev: str, cpu: int, seq: int, t_ns: int, pid: int, act: str, rw: str, rest: str):
    major, minor = dev.split(":")
    sec, nsec = divmod(t_ns, 1_000_000_000)
    return (
        f"{int(major):3d},{int(minor):<3d} {cpu:2d} {seq:8d} {sec:5d}.{nsec:09d} {pid:5d} "
        f"{act:>2s} {rw:>3s} {rest}\n"
    )


def render_blkparse(
    rows: Iterable[dict[str, Any]],
    out: IO[str],
    *,
    kworker_every: int = 3,
    merges_every: int = 5,
    summary: bool = True,
    skips: int = 0,
    device: str = "8:16",
) -> None:
    """blkparse text: Q, G, I, D at the issue (every `kworker_every`-th D by a kworker: the
    importer takes the Q's process), C at the completion (none when the row has none), a
    merged bio (Q and M) every `merges_every` rows, plug and unplug lines, then the summary."""
    out.write("Input file sample.blktrace.0 added\nInput file sample.blktrace.1 added\n")
    seq = 0
    completions: list[tuple[int, int, str]] = []  # (time, order, line) of the C lines
    order = 0
    now = 0  # blkparse prints events in time order

    def write(t: int, dev: str, cpu: int, pid: int, act: str, rw: str, rest: str) -> None:
        nonlocal now, seq
        while completions and completions[0][0] <= t:
            out.write(heapq.heappop(completions)[2])
        now = max(now, t)
        seq += 1
        out.write(_blk_line(dev, cpu, seq, now, pid, act, rw, rest))

    for i, row in enumerate(rows):
        t = row["issue_ns"]
        dev = row.get("device") or device
        pid = row.get("pid") or 0
        comm = row.get("comm") or "(null)"
        sector, sectors = row["offset"] // SECTOR, row["size"] // SECTOR
        rw = rwbs(row)
        where = f"{sector} + {sectors} " if sectors else ""
        cpu = i % 2
        events = [(2000, pid, "Q", f"{where}[{comm}]"), (1500, pid, "G", f"{where}[{comm}]")]
        if merges_every and i % merges_every == 1 and sectors:
            merged = f"{sector + sectors} + 8 [{comm}]"
            events += [(1400, pid, "Q", merged), (1300, pid, "M", merged)]
        events += [(1200, pid, "P", f"[{comm}]"), (1000, pid, "I", f"{where}[{comm}]")]
        d_pid, d_comm = KWORKER if kworker_every and i % kworker_every == 2 else (pid, comm)
        events += [(0, d_pid, "D", f"{where}[{d_comm}]"), (0, d_pid, "U", f"[{d_comm}] 1")]
        for before, p, act, rest in events:
            a_rw = "N" if act in ("P", "U") else rw
            write(min(t, max(now, t - before)), dev, cpu, p, act, a_rw, rest)
        if row.get("complete_ns") is not None:
            done = f"{sector} + {sectors} [0]" if sectors else f"{sector} [0]"
            order += 1
            line = _blk_line(dev, cpu, 0, row["complete_ns"], 0, "C", rw, done)
            heapq.heappush(completions, (row["complete_ns"], order, line))
    while completions:
        out.write(heapq.heappop(completions)[2])
    if summary:
        _blkparse_summary(out, device, skips)


def _blkparse_summary(out: IO[str], device: str, skips: int) -> None:
    """The statistics blkparse prints after the events (blkparse.c dump_io_stats)."""
    dev = device.replace(":", ",")
    for title in ("CPU0", "CPU1", "Total"):
        if title == "Total":
            out.write("\n")
        out.write(f"{title} ({dev}):\n")
        out.write(
            " Reads Queued:           3,       12KiB\t Writes Queued:           5,       20KiB\n"
        )
        out.write(
            " Read Dispatches:        3,       12KiB\t Write Dispatches:        5,       20KiB\n"
        )
        out.write(" Reads Requeued:         0\t\t Writes Requeued:         0\n")
        out.write(
            " Reads Completed:        3,       12KiB\t Writes Completed:        5,       20KiB\n"
        )
        out.write(
            " Read Merges:            0,        0KiB\t Write Merges:            1,        4KiB\n"
        )
        if title != "Total":
            out.write(" Read depth:             1        \t Write depth:             2\n")
        out.write(" IO unplugs:             2        \t Timer unplugs:           0\n")
    out.write("\nThroughput (R/W): 12KiB/s / 20KiB/s\n")
    out.write(f"Events ({dev}): 42 entries\n")
    out.write(f"Skips: {1 if skips else 0} forward ({skips} - {0.0:5.1f}%)\n")


# -- fio iolog -------------------------------------------------------------------------------
_IOLOG_ACTIONS = {"read": "read", "write": "write", "discard": "trim", "flush": "sync"}


def render_iolog3(rows: Iterable[dict[str, Any]], out: IO[str], *, file: str = "/dev/sdb") -> None:
    """fio version 3: `timestamp(us) file action offset length`, file actions around."""
    out.write("fio version 3 iolog\n")
    opened: list[str] = []
    last = 0
    for row in rows:
        name = row.get("device") or file
        us = row["issue_ns"] // 1000
        if name not in opened:
            out.write(f"{us} {name} add\n{us} {name} open\n")
            opened.append(name)
        out.write(f"{us} {name} {_IOLOG_ACTIONS[row['op']]} {row['offset']} {row['size']}\n")
        last = us
    for name in opened:
        out.write(f"{last} {name} close\n")


def render_iolog2(rows: Iterable[dict[str, Any]], out: IO[str], *, file: str = "/dev/sdb") -> None:
    """fio version 2: a `wait` (ms since the start) before each request whose time moved."""
    out.write("fio version 2 iolog\n")
    opened: list[str] = []
    clock = 0
    for row in rows:
        name = row.get("device") or file
        if name not in opened:
            out.write(f"{name} add\n{name} open\n")
            opened.append(name)
        ms = row["issue_ns"] // 1_000_000
        if ms > clock:
            out.write(f"{name} wait {ms} 0\n")
            clock = ms
        out.write(f"{name} {_IOLOG_ACTIONS[row['op']]} {row['offset']} {row['size']}\n")
    for name in opened:
        out.write(f"{name} close\n")


# -- the published CSV traces ------------------------------------------------------------------
def render_msr(rows: Iterable[dict[str, Any]], out: IO[str], *, header: bool = False) -> None:
    """Timestamp(filetime),Hostname,DiskNumber,Type,Offset,Size,ResponseTime(100 ns)."""
    if header:
        out.write("Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n")
    for row in rows:
        host, disk = (row.get("device") or "hm_1").rsplit("_", 1)
        ticks = MSR_START_FILETIME + row["issue_ns"] // 100
        kind = "Read" if row["op"] == "read" else "Write"
        response = (row["latency_ns"] or 0) // 100
        out.write(f"{ticks},{host},{disk},{kind},{row['offset']},{row['size']},{response}\n")


def render_alibaba(rows: Iterable[dict[str, Any]], out: IO[str], *, header: bool = False) -> None:
    """device_id,opcode(R/W),offset,length,timestamp(us since 1970)."""
    if header:
        out.write("device_id,opcode,offset,length,timestamp\n")
    for row in rows:
        op = "R" if row["op"] == "read" else "W"
        us = ALIBABA_START_US + row["issue_ns"] // 1000
        out.write(f"{row.get('device') or 0},{op},{row['offset']},{row['size']},{us}\n")


def render_tencent(rows: Iterable[dict[str, Any]], out: IO[str], *, header: bool = False) -> None:
    """Timestamp(s),Offset(sectors),Size(sectors),IOType(0 read, 1 write),VolumeID."""
    if header:
        out.write("Timestamp,Offset,Size,IOType,VolumeID\n")
    for row in rows:
        s = TENCENT_START_S + row["issue_ns"] // 1_000_000_000
        kind = 0 if row["op"] == "read" else 1
        out.write(
            f"{s},{row['offset'] // SECTOR},{row['size'] // SECTOR},{kind},"
            f"{row.get('device') or 1283}\n"
        )


RENDERERS = {
    "blkparse": render_blkparse,
    "iolog2": render_iolog2,
    "iolog3": render_iolog3,
    "msr": render_msr,
    "alibaba": render_alibaba,
    "tencent": render_tencent,
}
