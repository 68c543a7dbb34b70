"""`tilemark trace import`: a published or tool-written trace as a tilemark trace file.

The source is read once, in blocks (bounded memory whatever its size), by its format's reader
(formats/), and written by the TraceWriter. Rows come out sorted by issue time, with times
from the first issue. Sources are not always strictly in time order (blkparse merges CPUs,
cloud traces log when a server received a request), so rows pass through a reorder window:
the latest `reorder_rows` rows are held and sorted, and a row that would have to go before
rows already written is a bad row (one sentence with its line), not silently misplaced.

Nothing is written unless the whole import succeeds: the trace is built in a private
directory beside the output and renamed into place at the end, never through a link and never
over an existing file without `force`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tilemark.errors import UsageError
from tilemark.store.outputs import check_replaceable
from tilemark.trace import formats
from tilemark.trace.formats.base import POS, BadRow, Reader, sample_lines
from tilemark.trace.schema import COLUMNS, OPS, TRACE_SCHEMA, TraceMeta, TraceWriter

# Rows held for sorting: a row may arrive this many rows after rows with later times.
DEFAULT_REORDER_ROWS = 128 * 1024
_OPS = pa.array(OPS, pa.string())
_OP_TYPE = TRACE_SCHEMA.field("op").type


@dataclass(frozen=True)
class Skipped:
    """Lines or requests the import passed over for one reason (none of them is an error)."""

    reason: str
    count: int
    first_line: int


@dataclass(frozen=True)
class ImportResult:
    """What an import read and wrote, and how fast."""

    source: Path
    out: Path
    format: str
    rows: int
    devices: int
    duration_s: float  # first to last issue
    bytes_read: int  # text parsed (after decompression)
    file_bytes: int  # the source file's size
    seconds: float
    events_lost: int
    skipped: tuple[Skipped, ...]
    notes: tuple[str, ...]

    @property
    def mb_per_s(self) -> float:
        """Text parsed per second (10^6 bytes)."""
        return self.bytes_read / self.seconds / 1e6 if self.seconds > 0 else 0.0

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0


def import_trace(
    src: str | os.PathLike[str],
    fmt: str | None,
    out: str | os.PathLike[str],
    *,
    device: str | None = None,
    force: bool = False,
    reorder_rows: int = DEFAULT_REORDER_ROWS,
    progress: Callable[[int], None] | None = None,
) -> ImportResult:
    """Import `src` (in format `fmt`, detected when None) into the trace file `out`, only the
    requests of `device` when given. UsageError (one sentence) when the source cannot be read
    or has a bad row, the format is unclear, or `out` may not be written; then nothing is."""
    started = time.perf_counter()
    src, out = Path(src), Path(out)
    display = str(src)
    file_bytes = _check_source(src)
    name = _format_of(src, fmt)
    module = formats.FORMATS[name]
    if device is not None and name == "blkparse":
        device = device.replace(",", ":")  # blkparse prints 8,16; the trace says 8:16
    _check_output(src, out, force)
    if reorder_rows < 1:
        raise UsageError(f"--reorder-window must be at least 1 row, got {reorder_rows}.")
    reader: Reader = module.reader(src, display)
    reader.window_rows = reorder_rows
    meta = TraceMeta(source=f"import:{name}", device=device, source_file=str(src.resolve()))
    with _private_dir(out) as work:
        written = _write(reader, work / "trace.parquet", meta, device, reorder_rows, progress)
        if written.rows == 0:
            raise UsageError(_no_requests(display, device, written.devices, reader))
        check_replaceable(out, force=force, ours=lambda _p, _s: False, what="-o")
        os.replace(work / "trace.parquet", out)
    report = reader.report
    return ImportResult(
        source=src,
        out=out,
        format=name,
        rows=written.rows,
        devices=len(written.kept_devices),
        duration_s=written.duration_ns / 1e9,
        bytes_read=reader.bytes_read,
        file_bytes=file_bytes,
        seconds=time.perf_counter() - started,
        events_lost=report.events_lost,
        skipped=_skipped(reader),
        notes=tuple(meta.notes),
    )


# -- checks before anything is read or written ----------------------------------------------
def _check_source(src: Path) -> int:
    try:
        st = os.stat(src)
    except FileNotFoundError:
        raise UsageError(f"{src} does not exist.") from None
    except OSError as e:
        raise UsageError(f"{src} cannot be read: {e.strerror}.") from None
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{src} is a directory; name the trace file in it.")
    if not stat.S_ISREG(st.st_mode):
        # A pipe could be read only once, and detection reads the first lines before parsing.
        raise UsageError(
            f"{src} is not a regular file (a pipe?); save the trace to a file first (.gz, "
            ".bz2, .zst and .lz4 files are read as they are)."
        )
    if not os.access(src, os.R_OK):
        raise UsageError(f"{src} cannot be read: permission denied.")
    if stat.S_ISREG(st.st_mode) and st.st_size == 0:
        raise UsageError(f"{src} is empty: there is no trace to import.")
    return st.st_size


def _format_of(src: Path, fmt: str | None) -> str:
    known = ", ".join(formats.names())
    if fmt is not None:
        if fmt not in formats.FORMATS:
            raise UsageError(f"--format must be one of {known}, got {fmt!r}.")
        return fmt
    try:
        lines = sample_lines(src)
    except OSError as e:
        raise UsageError(f"{src} cannot be read: {e.strerror or e}.") from None
    except pa.ArrowInvalid as e:  # a damaged compressed file
        raise UsageError(f"{src} cannot be read: {e}.") from None
    if not lines:
        raise UsageError(f"{src} has only blank lines: there is no trace to import.")
    found = formats.detect(lines)
    if len(found) == 1:
        return found[0]
    if not found:
        first = lines[0] if len(lines[0]) <= 80 else lines[0][:77] + "..."
        raise UsageError(
            f"cannot tell which trace format {src} is in (its first line is {first!r}); "
            f"name it with --format ({known})."
        )
    raise UsageError(
        f"{src} could be in any of the formats {', '.join(found)}; name it with --format."
    )


def _check_output(src: Path, out: Path, force: bool) -> None:
    if not out.parent.is_dir():
        raise UsageError(f"-o {out}: the directory {out.parent} does not exist.")
    with contextlib.suppress(OSError):
        if out.exists() and os.path.samefile(src, out):
            raise UsageError(f"-o {out} is the file being imported; choose another name.")
    if out.is_dir() and not out.is_symlink():
        raise UsageError(f"-o {out} is a directory; name the trace file to write.")
    if os.path.lexists(out) and not force and not out.is_symlink():
        raise UsageError(f"-o {out} exists; pass --force to replace it.")
    check_replaceable(out, force=force, ours=lambda _p, _s: False, what="-o")


@contextlib.contextmanager
def _private_dir(out: Path) -> Iterator[Path]:
    """A directory beside `out` that only this process may write in (its temporary files
    cannot be links planted in advance); removed at the end whatever happens."""
    try:
        work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".import", dir=out.parent))
    except OSError as e:
        raise UsageError(f"-o {out} cannot be written: {e.strerror}.") from None
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- the stream of rows -------------------------------------------------------------------
@dataclass
class _Written:
    rows: int = 0
    duration_ns: int = 0
    devices: set[str] | None = None  # every device seen (before --device)
    kept_devices: set[str] | None = None


def _write(
    reader: Reader,
    path: Path,
    meta: TraceMeta,
    device: str | None,
    reorder_rows: int,
    progress: Callable[[int], None] | None,
) -> _Written:
    written = _Written(devices=set(), kept_devices=set())
    reorder = _Reorder(reader, reorder_rows)
    with TraceWriter(path, meta) as writer, _Behind(writer) as behind:
        try:
            for raw in reader.batches():
                written.devices.update(pc.unique(raw.column("device")).to_pylist())
                if device is not None:
                    raw = raw.filter(pc.equal(raw.column("device"), device))
                for ordered in reorder.push(raw):
                    _write_rows(behind, ordered, reorder.t0, written)
                if progress is not None:
                    progress(reader.bytes_read)
            for ordered in reorder.finish():
                _write_rows(behind, ordered, reorder.t0, written)
            behind.wait()
        except OSError as e:
            raise UsageError(f"{reader.display} cannot be read: {e.strerror or e}.") from None
        if written.rows == 0:
            return written  # raising here removes the partial file; the caller explains
        _fill_meta(meta, reader, reorder.t0, device, written)
    return written


class _Behind:
    """Writes batches on a thread while the next ones are parsed (Parquet encoding and
    compression release the GIL); one batch in flight at a time, so memory stays bounded."""

    def __init__(self, writer: TraceWriter):
        self.writer = writer
        self.pending: Future[None] | None = None

    def __enter__(self) -> _Behind:
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trace-writer")
        return self

    def write(self, b: pa.RecordBatch) -> None:
        self.wait()
        self.pending = self.pool.submit(self.writer.write, b)

    def wait(self) -> None:
        if self.pending is not None:
            pending, self.pending = self.pending, None
            pending.result()

    def __exit__(self, *exc: object) -> None:
        try:
            self.wait()
        finally:
            self.pool.shutdown(wait=True)


def _write_rows(writer: _Behind, b: pa.RecordBatch, t0: int | None, written: _Written) -> None:
    """Write rows with times from the first issue (t0)."""
    issue = pc.subtract(b.column("issue_ns"), t0)
    complete = pc.subtract(b.column("complete_ns"), t0)
    op = b.column("op")
    if op.type != _OP_TYPE:
        op = pa.DictionaryArray.from_arrays(
            pc.cast(pc.index_in(op.cast(pa.string()), _OPS), pa.int8()), _OPS
        )
    queue = pc.subtract(b.column("queue_ns"), t0)
    columns = {"issue_ns": issue, "complete_ns": complete, "op": op, "queue_ns": queue}
    arrays = [columns.get(name, b.column(name)) for name in COLUMNS]
    writer.write(pa.RecordBatch.from_arrays(arrays, schema=TRACE_SCHEMA))
    written.rows += b.num_rows
    written.kept_devices.update(pc.unique(b.column("device")).to_pylist())
    written.duration_ns = issue[-1].as_py()


class _Reorder:
    """Holds the latest rows and releases them sorted by (issue time, position); a row
    earlier than rows already released is an error naming its line."""

    def __init__(self, reader: Reader, window: int):
        self.reader = reader
        self.window = window
        self.held: list[pa.RecordBatch] = []
        self.held_rows = 0
        self.watermark: int | None = None  # the last issue time released
        self.t0: int | None = None

    def push(self, b: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        if b.num_rows == 0:
            return
        if self.watermark is not None:
            issue = b.column("issue_ns")
            if pc.min(issue).as_py() < self.watermark:
                self._late(b, pc.index(pc.less(issue, self.watermark), True).as_py())
        self.held.append(b)
        self.held_rows += b.num_rows
        if self.held_rows >= 2 * self.window:
            yield from self._release(self.held_rows - self.window)

    def finish(self) -> Iterator[pa.RecordBatch]:
        if self.held_rows:
            yield from self._release(self.held_rows)

    def _release(self, rows: int) -> Iterator[pa.RecordBatch]:
        table = pa.Table.from_batches(self.held)
        if not _in_order(table):
            table = table.combine_chunks()
            order = pc.sort_indices(
                table, sort_keys=[("issue_ns", "ascending"), (POS, "ascending")]
            )
            table = table.take(order)
        out, rest = table.slice(0, rows), table.slice(rows)
        self.held = rest.to_batches()
        self.held_rows = rest.num_rows
        self.watermark = out.column("issue_ns")[-1].as_py()
        if self.t0 is None:
            self.t0 = out.column("issue_ns")[0].as_py()
        yield from out.to_batches()

    def _late(self, b: pa.RecordBatch, row: int) -> None:
        line = self.reader.line_of(b.column(POS)[row].as_py())
        t = (b.column("issue_ns")[row].as_py() - (self.t0 or 0)) / 1e9
        wm = (self.watermark - (self.t0 or 0)) / 1e9
        raise BadRow(
            self.reader.display,
            line,
            f"its request at {t:.6f} s comes after requests up to {wm:.6f} s were written, "
            f"more than the reorder window ({self.window:,} rows) out of time order; sort the "
            "file by time or pass a larger --reorder-window",
        )


def _in_order(table: pa.Table) -> bool:
    """Rows already sorted by (issue time, position): most sources are, and need no copy."""
    issue = table.column("issue_ns").to_numpy()
    pos = table.column(POS).to_numpy()
    step, pos_step = np.diff(issue), np.diff(pos)
    return bool(np.all((step > 0) | ((step == 0) & (pos_step >= 0))))


# -- what the trace says about itself --------------------------------------------------------
def _fill_meta(
    meta: TraceMeta, reader: Reader, t0: int | None, device: str | None, written: _Written
) -> None:
    module = formats.FORMATS[meta.source.split(":", 1)[1]]
    report = reader.report
    if module.ABSOLUTE_TIME:
        meta.start_epoch_ns = t0
    kept = sorted(written.kept_devices)
    if device is None and len(kept) == 1:
        meta.device = kept[0]
    meta.events_lost = report.events_lost
    notes = list(getattr(module, "NOTES", ()))
    notes += report.notes
    for s in _skipped(reader):
        notes.append(f"skipped {s.count:,} {s.reason} (first at line {s.first_line}).")
    meta.notes = notes
    meta.extra = {
        "format": module.NAME,
        "format_title": module.TITLE,
        "devices": len(kept),
        "devices_in_source": len(written.devices),
        "skipped": {s.reason: s.count for s in _skipped(reader)},
        **report.extra,
    }
    if device is not None:
        meta.extra["device_filter"] = device
    if len(kept) <= 64:
        meta.extra["device_names"] = kept


def _skipped(reader: Reader) -> tuple[Skipped, ...]:
    return tuple(
        Skipped(reason=reason, count=count, first_line=first)
        for reason, (count, first) in reader.report.skipped.items()
    )


def _no_requests(display: str, device: str | None, devices: set[str] | None, reader: Reader) -> str:
    if device is not None and devices:
        shown = sorted(devices)[:10]
        more = f" and {len(devices) - 10} more" if len(devices) > 10 else ""
        return (
            f"{display} has no requests of --device {device} (its devices: "
            f"{', '.join(shown)}{more})."
        )
    skipped = _skipped(reader)
    if skipped:
        what = "; ".join(f"{s.count:,} {s.reason}" for s in skipped)
        return f"{display} has no requests to import (only {what})."
    return f"{display} has no requests to import."
