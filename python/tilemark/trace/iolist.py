"""Traces compiled into the engine's replayed IO lists (crates/engine/src/replay.rs has the
file format; docs/replay.md).

Two passes over each trace, batch by batch, so memory stays bounded however long it is:
`scan` learns what every stream of the replay holds (rows, ops, extent, times, whether
completion times are known), which the layout needs before anything is written; `write_lists`
then writes each stream's records, its times divided by the speed, its offsets remapped into
the stream's region and aligned, and (afap) each record's dependency count.

A stream is a trace, or one group of a trace's rows (`--split pid|comm|device`), after
`--select`. The streams of one trace share its clock (time 0 is its first selected IO) and its
address space (they are processes of one application on one device).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tilemark.errors import UsageError
from tilemark.trace.schema import OPS, Trace, TraceError
from tilemark.trace.selection import Selection

OP_CODE = {op: i for i, op in enumerate(OPS)}  # read 0, write 1, flush 2, discard 3
READ, WRITE, FLUSH, DISCARD = (OP_CODE[o] for o in OPS)
FLAG_FUA = 1
# A write the traced kernel wrote back from the page cache (no sync flag): the engine replays
# it as an uncached page-cache write, so it too reaches the device without the flag (replay.rs).
FLAG_WRITEBACK = 2
MAGIC = b"TMIOLIST"
FORMAT_VERSION = 1
RECORD = np.dtype(
    [
        ("time_ns", "<u8"),
        ("offset", "<u8"),
        ("deps", "<u8"),
        ("len", "<u4"),
        ("op", "u1"),
        ("flags", "u1"),
        ("pad", "<u2"),
    ]
)
assert RECORD.itemsize == 32
HEADER_BYTES = 32
SPLITS = ("pid", "comm", "device")
MAX_STREAMS = 256  # streams of one replay: --split on a busy host can make thousands
MAX_IO = 1 << 31  # the engine's buffers take 32-bit lengths
BATCH_ROWS = 65536


@dataclass
class GroupScan:
    """What the first pass learned about one stream's rows."""

    key: Any  # the split value (pid, comm, device), None when not split
    rows: int = 0
    ops: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPS, 0))
    first_ns: int | None = None
    last_ns: int = 0
    max_end: int = 0  # largest offset + size of a read, write or discard
    max_size: int = 0
    preflush: int = 0  # writes that asked for a flush first (replayed as a flush, then the write)
    fua: int = 0
    completions: bool = True  # every row's completion time is known (afap needs it)
    max_inflight: int = 0  # largest number of its IOs in flight at once (with completions)

    @property
    def records(self) -> int:
        """Records of its IO list (a write with preflush is two: a flush, then the write)."""
        return self.rows + self.preflush


@dataclass
class TraceScan:
    """One trace: its rows, what was selected, and each stream's scan."""

    trace: Trace
    selected: int = 0
    first_ns: int | None = None  # the first selected issue: time 0 of its streams
    last_ns: int = 0
    groups: dict[Any, GroupScan] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return self.trace.path

    @property
    def span_ns(self) -> int:
        return 0 if self.first_ns is None else self.last_ns - self.first_ns

    @property
    def max_end(self) -> int:
        return max((g.max_end for g in self.groups.values()), default=0)

    @property
    def max_size(self) -> int:
        return max((g.max_size for g in self.groups.values()), default=0)


class DepCounter:
    """Afap dependencies of a stream's IOs, batch by batch: how many list records had
    completed (strictly) before each IO was issued. A write with preflush is two records, so
    it counts twice. Keeps only the completions still to come (the IOs in flight)."""

    def __init__(self) -> None:
        self.done = 0
        self.pending = np.empty(0, np.int64)
        self.pending_weight = np.empty(0, np.int64)
        self.max_inflight = 0
        self.issued = 0

    def deps(self, issue: np.ndarray, complete: np.ndarray, weight: np.ndarray) -> np.ndarray:
        times = np.concatenate([self.pending, complete])
        weights = np.concatenate([self.pending_weight, weight])
        order = np.argsort(times, kind="stable")
        times, weights = times[order], weights[order]
        cumulative = np.concatenate([[0], np.cumsum(weights)])
        before = np.searchsorted(times, issue, side="left")
        deps = self.done + cumulative[before]
        issued_before = self.issued + np.concatenate([[0], np.cumsum(weight)[:-1]])
        if len(issue):
            self.max_inflight = max(self.max_inflight, int((issued_before - deps).max()) + 1)
            cut = int(before[-1])
            self.done += int(cumulative[cut])
            self.pending, self.pending_weight = times[cut:], weights[cut:]
            self.issued += int(weight.sum())
        return deps


@dataclass
class Batch:
    """One batch of a trace's rows as arrays, only the rows selected."""

    issue: np.ndarray
    op: np.ndarray
    offset: np.ndarray
    size: np.ndarray
    fua: np.ndarray
    preflush: np.ndarray
    group: np.ndarray  # index into `keys`
    keys: list[Any]
    complete: np.ndarray | None  # None when a completion time is unknown in the batch
    due: np.ndarray | None = None  # when a replay issues each row: batches(queue=...)
    sync: np.ndarray | None = None  # the rows' sync flag: batches(sync=True)


def _flag(batch: pa.RecordBatch, name: str) -> np.ndarray:
    if name not in batch.schema.names:
        return np.zeros(batch.num_rows, bool)
    return batch.column(name).fill_null(False).to_numpy(zero_copy_only=False)


def _ints(batch: pa.RecordBatch, name: str, path: Path, first_row: int) -> np.ndarray:
    col = batch.column(name)
    if col.null_count:
        row = first_row + int(pc.index(pc.is_null(col), True).as_py())
        raise TraceError(f"trace {path} row {row} has no {name}.")
    return col.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _ops(batch: pa.RecordBatch, path: Path, first_row: int) -> np.ndarray:
    col = batch.column("op")
    if col.null_count:
        row = first_row + int(pc.index(pc.is_null(col), True).as_py())
        raise TraceError(f"trace {path} row {row} has no op.")
    if not pa.types.is_dictionary(col.type):
        col = col.dictionary_encode()
    names = col.dictionary.to_pylist()
    lut = np.array([OP_CODE.get(n, -1) for n in names] or [-1], np.int64)
    codes = lut[col.indices.to_numpy(zero_copy_only=False)]
    if (codes < 0).any():
        bad = names[int(col.indices[int(np.argmax(codes < 0))].as_py())]
        raise TraceError(f"trace {path} has op {bad!r}; a trace's ops are {', '.join(OPS)}.")
    return codes


def _completions(batch: pa.RecordBatch, issue: np.ndarray) -> np.ndarray | None:
    names = batch.schema.names
    complete = batch.column("complete_ns") if "complete_ns" in names else None
    latency = batch.column("latency_ns") if "latency_ns" in names else None
    if complete is not None and complete.null_count == 0:
        return complete.to_numpy(zero_copy_only=False).astype(np.int64)
    if latency is not None and latency.null_count == 0:
        return issue + latency.to_numpy(zero_copy_only=False).astype(np.int64)
    if complete is not None and latency is not None:
        filled = pc.coalesce(complete, pc.add(pa.array(issue), latency))
        if filled.null_count == 0:
            return filled.to_numpy(zero_copy_only=False).astype(np.int64)
    return None


def _due(batch: pa.RecordBatch, issue: np.ndarray) -> np.ndarray:
    """Queue time where known and not after the issue, else the issue time."""
    col = batch.column("queue_ns") if "queue_ns" in batch.schema.names else None
    if col is None or col.null_count == len(col):
        return issue
    queue = col.fill_null(np.iinfo(np.int64).max).to_numpy(zero_copy_only=False)
    return np.minimum(queue.astype(np.int64, copy=False), issue)


def _columns(
    trace: Trace, selection: Selection, split: str | None, completions: bool, sync: bool
) -> list:
    present = set(trace._file.schema_arrow.names)
    wanted = ["issue_ns", "op", "offset", "size", "fua", "preflush", "queue_ns"]
    if sync:
        wanted.append("sync")
    if selection.pids or split == "pid":
        wanted.append("pid")
    if selection.comms or split == "comm":
        wanted.append("comm")
    if split == "device":
        wanted.append("device")
    if completions:
        wanted += ["complete_ns", "latency_ns"]
    return [c for c in wanted if c in present]


def batches(
    trace: Trace,
    selection: Selection,
    split: str | None,
    *,
    completions: bool = False,
    queue: bool = False,
    sync: bool = False,
):
    """The trace's selected rows, batch by batch, each row with its group; TraceError when a
    row is damaged or the rows are not in issue order. `queue`: Batch.due from queue_ns;
    `sync`: Batch.sync."""
    columns = _columns(trace, selection, split, completions, sync)
    row = 0
    last_issue: int | None = None
    for b in trace.batches(columns, BATCH_ROWS):
        n = b.num_rows
        if n == 0:
            continue
        issue = _ints(b, "issue_ns", trace.path, row)
        if last_issue is not None:
            issue_all = np.concatenate([[last_issue], issue])
        else:
            issue_all = issue
        back = np.flatnonzero(np.diff(issue_all) < 0)
        if len(back):
            at = row + int(back[0]) - (1 if last_issue is not None else 0) + 1
            raise TraceError(
                f"trace {trace.path} is not in issue order: row {at} was issued before the row "
                "ahead of it; traces are written in issue order (sort it before replaying)."
            )
        last_issue = int(issue[-1])
        keep = np.ones(n, bool)
        op = _ops(b, trace.path, row)
        if selection.ops:
            keep &= np.isin(op, [OP_CODE[o] for o in selection.ops])
        for name, values, kind in (
            ("pid", selection.pids, pa.int32()),
            ("comm", selection.comms, pa.string()),
        ):
            if values:
                col = b.column(name) if name in b.schema.names else pa.nulls(n, kind)
                hit = pc.is_in(col, value_set=pa.array(sorted(values), kind))
                keep &= hit.fill_null(False).to_numpy(zero_copy_only=False)
        complete = _completions(b, issue) if completions else None
        due = _due(b, issue) if queue else issue
        if split is None:
            group = np.zeros(n, np.int64)
            keys: list[Any] = [None]
        else:
            col = b.column(split) if split in b.schema.names else pa.nulls(n, pa.string())
            encoded = pc.dictionary_encode(col.cast(pa.string()))
            group = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
            keys = encoded.dictionary.to_pylist()
            if (group < 0).any():
                keys.append(None)  # rows that do not say: a group of their own
                group[group < 0] = len(keys) - 1
        row += n
        if not keep.any():
            continue
        yield Batch(
            issue=issue[keep],
            op=op[keep],
            offset=_ints(b, "offset", trace.path, row - n)[keep],
            size=_ints(b, "size", trace.path, row - n)[keep],
            fua=_flag(b, "fua")[keep],
            preflush=_flag(b, "preflush")[keep] & (op[keep] == WRITE),
            group=group[keep],
            keys=keys,
            complete=None if complete is None else complete[keep],
            due=due[keep],
            sync=_flag(b, "sync")[keep] if sync else None,
        )


def _by_group(batch: Batch):
    """(key, index array) of each group in the batch, rows in order."""
    order = np.argsort(batch.group, kind="stable")
    groups, starts = np.unique(batch.group[order], return_index=True)
    bounds = list(starts[1:]) + [len(order)]
    for g, start, end in zip(groups, starts, bounds, strict=True):
        yield batch.keys[int(g)], order[start:end]


def scan(trace: Trace, selection: Selection, split: str | None, *, completions: bool) -> TraceScan:
    """First pass: every stream's rows, ops, extent and times (`completions`: also whether
    completion times are known and how many IOs were in flight at once)."""
    if trace.rows == 0:
        raise TraceError(f"trace {trace.path} is empty: it holds no IO to replay.")
    out = TraceScan(trace)
    deps: dict[Any, DepCounter] = {}
    for batch in batches(trace, selection, split, completions=completions):
        bad = (batch.op != FLUSH) & ((batch.size <= 0) | (batch.offset < 0))
        if bad.any():
            i = int(np.argmax(bad))
            raise TraceError(
                f"trace {trace.path} has a {OPS[batch.op[i]]} of {batch.size[i]} bytes at offset "
                f"{batch.offset[i]}; reads, writes and discards need a size above 0 and an "
                "offset of 0 or more."
            )
        big = batch.size >= MAX_IO
        if big.any():
            raise TraceError(
                f"trace {trace.path} has an IO of {int(batch.size[big][0])} bytes; at most "
                f"{MAX_IO - 1} bytes per IO can be replayed."
            )
        out.selected += len(batch.issue)
        out.first_ns = int(batch.issue[0]) if out.first_ns is None else out.first_ns
        out.last_ns = int(batch.issue[-1])
        for key, idx in _by_group(batch):
            g = out.groups.get(key)
            if g is None:
                if len(out.groups) >= MAX_STREAMS:
                    raise UsageError(
                        f"--split {split} makes more than {MAX_STREAMS} streams of trace "
                        f"{trace.path}; narrow it with --select pid=..,comm=.."
                    )
                g = out.groups[key] = GroupScan(key)
            op, size, offset = batch.op[idx], batch.size[idx], batch.offset[idx]
            g.rows += len(idx)
            counts = np.bincount(op, minlength=4)
            for name, code in OP_CODE.items():
                g.ops[name] += int(counts[code])
            g.first_ns = int(batch.issue[idx[0]]) if g.first_ns is None else g.first_ns
            g.last_ns = int(batch.issue[idx[-1]])
            data = op != FLUSH
            if data.any():
                g.max_end = max(g.max_end, int((offset[data] + size[data]).max()))
                g.max_size = max(g.max_size, int(size[data].max()))
            preflush = batch.preflush[idx]
            g.preflush += int(preflush.sum())
            g.fua += int((batch.fua[idx] & (op == WRITE)).sum())
            if completions:
                if batch.complete is None:
                    g.completions = False
                elif g.completions:
                    counter = deps.setdefault(key, DepCounter())
                    counter.deps(batch.issue[idx], batch.complete[idx], 1 + preflush.astype(int))
                    g.max_inflight = counter.max_inflight
    if out.selected == 0:
        what = f"--select {selection.describe()}" if selection else "the replay"
        raise TraceError(f"{what} selects no IO of trace {trace.path} ({trace.rows} rows).")
    return out


@dataclass(frozen=True)
class Remap:
    """How a stream's offsets land in its region: `modulo` wraps them, `scale` shrinks or
    stretches the traced device's `extent` onto the region, `off` keeps them as they are."""

    kind: str  # "modulo" | "scale" | "off"
    region: int  # bytes, a multiple of `align`
    align: int  # IO offsets and sizes are rounded out to multiples of it
    extent: int = 0  # scale: the traced device's size (or the trace's extent)

    def apply(self, offset: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """(offset, size, how many were rounded) of reads, writes and discards in the region."""
        a = self.align
        start = offset - offset % a
        end = -(-(offset + size) // a) * a
        length = end - start
        rounded = int(((start != offset) | (length != size)).sum())
        if self.kind == "modulo":
            start = start % self.region
        elif self.kind == "scale":
            scaled = np.floor(start.astype(np.float64) * (self.region / self.extent))
            start = scaled.astype(np.int64) // a * a
        over = start + length > self.region
        start = np.where(over, self.region - length, start)
        if (start < 0).any() or (self.kind == "off" and over.any()):
            raise AssertionError("the layout let an IO outside its region")
        return start, length, rounded


@dataclass
class StreamList:
    """One stream's IO list as written, and what it holds."""

    path: Path
    records: int = 0
    ops: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPS, 0))
    bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPS, 0))
    sizes: dict[int, int] = field(default_factory=dict)  # read/write size -> count
    rounded: int = 0
    last_ns: int = 0  # the last record's time
    before_cut: int = 0  # records due before `cut_ns` (loops: in the last, partial pass)
    max_len: int = 0
    writeback: int = 0  # writes replayed as page-cache writeback (FLAG_WRITEBACK)


@dataclass(frozen=True)
class ListPlan:
    """What to write for one stream: its rows (group `key` of its trace), where they go."""

    key: Any
    path: Path
    remap: Remap
    afap: bool
    cut_ns: int | None = None  # drop records due at or after it (timed, no loop)
    count_before_ns: int | None = None  # count records due before it (loops)
    # Writes without the sync flag go as page-cache writeback (FLAG_WRITEBACK), as traced.
    writeback: bool = False


def _write_header(f: Any, count: int) -> None:
    header = MAGIC + np.array([FORMAT_VERSION, RECORD.itemsize], "<u4").tobytes()
    f.write(header + np.array([count, 0], "<u8").tobytes())


def write_lists(
    scan_: TraceScan,
    selection: Selection,
    split: str | None,
    speed: float,
    plans: list[ListPlan],
    *,
    by_queue: bool = False,
) -> list[StreamList]:
    """Second pass: write the IO list of every stream of one trace (records as replay.rs reads
    them); the files are new (an existing file is an error). `by_queue`: due at queue times."""
    origin = scan_.first_ns or 0
    by_key = {p.key: p for p in plans}
    outs = {p.key: StreamList(p.path) for p in plans}
    deps = {p.key: DepCounter() for p in plans if p.afap}
    files = {}
    try:
        for p in plans:
            files[p.key] = open(p.path, "xb")  # noqa: SIM115 (closed below, together)
            _write_header(files[p.key], 0)
        chunks = batches(
            scan_.trace,
            selection,
            split,
            completions=bool(deps),
            queue=by_queue,
            sync=any(p.writeback for p in plans),
        )
        for batch in chunks:
            for key, idx in _by_group(batch):
                plan, out = by_key[key], outs[key]
                records = _records(batch, idx, plan, origin, speed, deps.get(key), out)
                if len(records):
                    files[key].write(records.tobytes())
        for key, f in files.items():
            f.seek(0)
            _write_header(f, outs[key].records)
    finally:
        for f in files.values():
            f.close()
    return [outs[p.key] for p in plans]


def _records(
    batch: Batch,
    idx: np.ndarray,
    plan: ListPlan,
    origin: int,
    speed: float,
    deps: DepCounter | None,
    out: StreamList,
) -> np.ndarray:
    """One group's records of a batch, with a flush before every write that asked for one."""
    op, offset, size = batch.op[idx], batch.offset[idx], batch.size[idx]
    due = batch.issue if batch.due is None else batch.due
    elapsed = due[idx] - origin
    times = elapsed if speed == 1.0 else np.floor(elapsed / speed).astype(np.int64)
    if due is not batch.issue:
        # Rows stay in issue order (a row queued before one issued ahead of it goes with it:
        # a timed list never goes back in time); one queued before the first issue, at 0.
        times = np.maximum.accumulate(np.maximum(times, out.last_ns))
    preflush = batch.preflush[idx]
    fua = batch.fua[idx] & (op == WRITE)
    flags = np.where(fua, FLAG_FUA, 0).astype(np.uint8)
    if plan.writeback:
        assert batch.sync is not None, "batches(sync=True) for a writeback replay"
        flags[(op == WRITE) & ~fua & ~batch.sync[idx]] = FLAG_WRITEBACK
    dep = np.zeros(len(idx), np.int64)
    if deps is not None:
        dep = deps.deps(batch.issue[idx], batch.complete[idx], 1 + preflush.astype(np.int64))
    if plan.cut_ns is not None:
        keep = times < plan.cut_ns
        op, offset, size, times, preflush, flags, dep = (
            a[keep] for a in (op, offset, size, times, preflush, flags, dep)
        )
    data = op != FLUSH
    start = np.zeros(len(op), np.int64)
    length = np.zeros(len(op), np.int64)
    if data.any():
        s, n, rounded = plan.remap.apply(offset[data], size[data])
        start[data], length[data] = s, n
        out.rounded += rounded
    repeat = 1 + preflush.astype(np.int64)
    rec = np.zeros(int(repeat.sum()), RECORD)
    at = np.cumsum(repeat) - 1  # each row's own record; a preflush's flush goes just before
    rec["time_ns"][at], rec["offset"][at], rec["len"][at] = times, start, length
    rec["op"][at], rec["deps"][at] = op, dep
    rec["flags"][at] = flags
    flush_at = at[preflush] - 1
    rec["time_ns"][flush_at] = times[preflush]
    rec["op"][flush_at] = FLUSH
    rec["deps"][flush_at] = dep[preflush]
    _account(rec, out, plan)
    return rec


def _account(rec: np.ndarray, out: StreamList, plan: ListPlan) -> None:
    if not len(rec):
        return
    out.records += len(rec)
    ops = np.bincount(rec["op"], minlength=4)
    nbytes = np.bincount(rec["op"], weights=rec["len"], minlength=4)
    for name, code in OP_CODE.items():
        out.ops[name] += int(ops[code])
        out.bytes[name] += int(nbytes[code])
    data = rec["op"] <= WRITE
    if data.any():
        sizes, counts = np.unique(rec["len"][data], return_counts=True)
        for s, c in zip(sizes.tolist(), counts.tolist(), strict=True):
            out.sizes[s] = out.sizes.get(s, 0) + c
        out.max_len = max(out.max_len, int(rec["len"][data].max()))
    out.writeback += int(np.count_nonzero(rec["flags"] & FLAG_WRITEBACK))
    out.last_ns = int(rec["time_ns"][-1])
    if plan.count_before_ns is not None:
        out.before_cut += int(np.searchsorted(rec["time_ns"], plan.count_before_ns, "left"))


def read_list(path: Path) -> np.ndarray:
    """A list's records (tests and `trace show` of a replay)."""
    with open(path, "rb") as f:
        header = f.read(HEADER_BYTES)
        if header[:8] != MAGIC:
            raise TraceError(f"{path} is not a tilemark IO list.")
        count = int(np.frombuffer(header[16:24], "<u8")[0])
        records = np.fromfile(f, RECORD, count)
    return records


def size_mix(sizes: dict[int, int], most: int = 16) -> list[list[float]]:
    """The plan's `sizes` of a list: its most frequent sizes, weighted by count."""
    top = sorted(sizes.items(), key=lambda kv: -kv[1])[:most]
    return [[float(s), float(c)] for s, c in sorted(top)] or [[4096.0, 1.0]]


def remove_quietly(path: Path) -> None:
    """Remove a file if it is there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
