"""A run's interval rows: an append-only log while the run is in progress, sealed into
intervals.parquet when it ends (docs/results-schema.md, intervals).

While a run is in progress every interval goes to intervals.arrows, an Arrow IPC stream: one
record batch per interval (intervals shorter than a second are grouped into about one second),
written whole and fsync'ed before the next. A stream is readable up to its last complete
batch however it was cut short (SIGKILL, power loss, a full disk), so a run loses at most one
interval or one second. A Parquet file is readable only once its footer is written, so
Parquet is written once, at the end, from the log: one file per run instead of one part per
few seconds.

Longer than 600 lines because the log, its sealing into Parquet and its readers share one
schema and its edge cases (a torn log, parts left by older versions, a full disk).
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tilemark.hist import LATENCY_STATS, Histogram
from tilemark.store.layout import (
    INTERVAL_LOG,
    INTERVAL_PARTS_DIR,
    INTERVALS_FILE,
    OP_KINDS,
    SCHEMA_VERSION,
    VERSION_KEY,
    atomic_file,
    fsync_dir,
)

# Row groups of the sealed file: this many intervals, or fewer when they hold many rows.
ROW_GROUP_INTERVALS = 10
ROW_GROUP_ROWS = 20_000
# Intervals shorter than this (run time) are written to the log together.
LOG_SPAN_NS = 1_000_000_000
_EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"

INTERVAL_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("interval", pa.int32()),
        ("phase", pa.string()),
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("stream", pa.int32()),
        ("stream_name", pa.string()),
        ("op", pa.string()),
        ("ops", pa.int64()),
        ("bytes", pa.int64()),
        ("errors", pa.int64()),
        ("errors_json", pa.string()),
        *[(f"service_{s}_us", pa.float64()) for s in LATENCY_STATS],
        *[(f"response_{s}_us", pa.float64()) for s in LATENCY_STATS],
        ("lag_max_ns", pa.int64()),
        ("behind_ios", pa.int64()),
        ("service_hist", pa.string()),
        ("response_hist", pa.string()),
    ],
    metadata={VERSION_KEY: str(SCHEMA_VERSION).encode()},
)


class IntervalsUnreadable(Exception):
    """No interval can be read from a run's interval file; the message says which and why."""


# ---------------------------------------------------------------------------------------------
# rows


def _latency_us(hist: dict | None, prefix: str) -> dict[str, float | None]:
    values = Histogram.from_json(hist).stats()
    return {f"{prefix}_{k}_us": (None if v is None else v / 1e3) for k, v in values.items()}


def _hist_text(hist: dict | None) -> str | None:
    return None if hist is None else json.dumps(hist, separators=(",", ":"))


def snapshot_rows(run_id: str, plan: dict, snapshot: dict) -> list[dict[str, Any]]:
    """Interval rows of one snapshot: one per stream and op kind with ops or errors.

    A stream that completed and failed nothing in the interval still gets one row with op
    null, so its lag and backlog (a stalled device) are not lost.
    """
    names = [s.get("name") for s in plan.get("streams", [])]
    rows = []
    for s in snapshot.get("streams", []):
        index = int(s["stream"])
        base = {
            "run_id": run_id,
            "interval": int(snapshot["interval"]),
            "phase": snapshot.get("phase"),
            "start_ns": int(snapshot["start_ns"]),
            "end_ns": int(snapshot["end_ns"]),
            "stream": index,
            "stream_name": names[index] if 0 <= index < len(names) else None,
            "lag_max_ns": int(s.get("lag_max_ns", 0)),
            "behind_ios": int(s.get("behind_ios", 0)),
        }
        stream_rows = []
        for kind in OP_KINDS:
            op = s.get(kind)
            if not op:
                continue
            errors = {str(k): int(v) for k, v in op.get("errors", {}).items()}
            ops = int(op.get("ops", 0))
            if ops == 0 and not any(errors.values()):
                continue
            response = op.get("response")
            stream_rows.append(
                {
                    **base,
                    "op": kind,
                    "ops": ops,
                    "bytes": int(op.get("bytes", 0)),
                    "errors": sum(errors.values()),
                    "errors_json": json.dumps(errors, sort_keys=True),
                    **_latency_us(op.get("service"), "service"),
                    # null response histogram (closed loop) -> null response columns
                    **_latency_us(response, "response"),
                    "service_hist": _hist_text(op.get("service")),
                    "response_hist": _hist_text(response),
                }
            )
        if not stream_rows:
            stream_rows.append({**base, "op": None, "ops": 0, "bytes": 0, "errors": 0})
        rows.extend(stream_rows)
    return rows


# ---------------------------------------------------------------------------------------------
# writing


def _write_all(fd: int, data: bytes) -> None:
    # os.write may write less than asked (a disk filling up); pyarrow's Python-file sink
    # ignores short writes, which is why the log writes its own bytes.
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written == 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[written:]


class _Pending:
    """What the IPC stream writer produced since it was last taken: IntervalLog writes it."""

    closed = False

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> int:
        self.data += data
        return len(data)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        out = bytes(self.data)
        self.data.clear()
        return out


class IntervalLog:
    """The append-only interval log of a run in progress (intervals.arrows).

    Rows are buffered until they cover LOG_SPAN_NS of run time (one interval of a second or
    more), then written as one zstd-compressed record batch and fsync'ed. A failed write is
    rolled back to the last complete batch, so the log stays readable; the caller decides
    what to do next.
    """

    def __init__(self, path: Path, schema: pa.Schema = INTERVAL_SCHEMA):
        self.path = Path(path)
        self.schema = schema
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        self._pending = _Pending()
        self._writer = pa.ipc.new_stream(
            self._pending, schema, options=pa.ipc.IpcWriteOptions(compression="zstd")
        )
        self._schema = schema.serialize().to_pybytes()
        # pyarrow imports pandas on the first from_pylist of the process: 0.27 s of CPU that
        # fell on the first interval flush, while the engine ran (on a 2-CPU VM, a tenth of a
        # CPU for the first seconds; bench/README.md). Pay it now, before the run starts.
        pa.RecordBatch.from_pylist([], schema=schema)
        self._size = 0  # bytes of complete messages on disk
        self._rows: list[dict[str, Any]] = []
        # Record batches the engine built (engine.Frame), written after the rows before them.
        self._batches: list[pa.RecordBatch] = []
        self._span_start: int | None = None
        self._span_end: int | None = None
        # The end (run time) of the last interval on disk, for the logs that follow (`follow`).
        self.written_end_ns: int | None = None
        self.batches = 0
        self.rows_written = 0
        try:
            # The schema goes first, so that even a log without intervals reads as one.
            _write_all(self._fd, self._schema)
            os.fsync(self._fd)
            self._size = len(self._schema)
            fsync_dir(self.path.parent)
        except OSError:
            self._abandon()
            raise

    def add(self, rows: list[dict[str, Any]], start_ns: int, end_ns: int) -> None:
        """Buffer one interval's rows; write them (with earlier short ones) once they span
        LOG_SPAN_NS. Raises OSError when the write fails; the log is then rolled back."""
        self._rows.extend(rows)
        self._added(start_ns, end_ns)

    def add_batch(self, batch: pa.RecordBatch, start_ns: int, end_ns: int) -> None:
        """`add` for an interval's rows already in a record batch of this log's schema."""
        if self._rows:
            self._batches.append(pa.RecordBatch.from_pylist(self._rows, schema=self.schema))
            self._rows = []
        self._batches.append(batch)
        self._added(start_ns, end_ns)

    def _added(self, start_ns: int, end_ns: int) -> None:
        if self._span_start is None:
            self._span_start = start_ns
        self._span_end = end_ns if self._span_end is None else max(self._span_end, end_ns)
        if end_ns - self._span_start >= LOG_SPAN_NS:
            self.flush()

    def flush(self) -> None:
        """Write and fsync the buffered rows as one record batch."""
        if not self._rows and not self._batches:
            return
        if self._fd < 0:
            raise OSError(errno.EBADF, "the interval log is closed")
        batches = self._batches
        if self._rows:
            batches = [*batches, pa.RecordBatch.from_pylist(self._rows, schema=self.schema)]
        if len(batches) == 1:
            self._writer.write_batch(batches[0])
        else:
            table = pa.Table.from_batches(batches, schema=self.schema).combine_chunks()
            self._writer.write_table(table)
        data = self._pending.take()
        if self.batches == 0:
            # The stream writer starts with the schema, which is on disk already.
            assert data.startswith(self._schema)
            data = data[len(self._schema) :]
        self._append(data)
        self.batches += 1
        self.rows_written += sum(b.num_rows for b in batches)
        self._rows = []
        self._batches = []
        self._span_start = None
        if self._span_end is not None:
            self.written_end_ns = self._span_end
        self._span_end = None

    def follow(self, lead: IntervalLog) -> None:
        """Write the buffered rows now if `lead` already has their intervals on disk.

        A run's telemetry logs follow its interval log. Each log groups about a second of
        intervals before it writes, and the sampler's rows of an interval come a poll after
        the interval's own (its closing sample is taken at the boundary): written on their own
        span, a killed run's telemetry would end up to two intervals before its intervals;
        following, it lacks at most the rows not yet sampled."""
        if (
            self._span_start is not None
            and lead.written_end_ns is not None
            and self._span_start < lead.written_end_ns
        ):
            self.flush()

    def close(self) -> None:
        """Flush, mark the end of the stream and close the file."""
        if self._fd < 0:
            return
        try:
            self.flush()
            self._writer.close()
            self._append(self._pending.take() if self.batches else _EOS)
        finally:
            self._abandon()

    def discard_buffer(self) -> int:
        """Drop rows not yet written (after a failure); how many were dropped."""
        dropped = len(self._rows) + sum(b.num_rows for b in self._batches)
        self._rows = []
        self._batches = []
        self._span_start = None
        self._span_end = None
        return dropped

    def _append(self, data: bytes) -> None:
        try:
            _write_all(self._fd, data)
            os.fsync(self._fd)
        except OSError:
            # Cut a partly written message so the file ends on a complete one (and frees it).
            try:
                os.ftruncate(self._fd, self._size)
                os.lseek(self._fd, self._size, os.SEEK_SET)
            except OSError:
                pass  # readers stop at a cut-off batch anyway
            raise
        self._size += len(data)

    def abandon(self) -> None:
        """Close the file as it is (after a failure: up to its last complete batch)."""
        self._abandon()

    def _abandon(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _row_groups(
    batches: Iterator[pa.RecordBatch], schema: pa.Schema = INTERVAL_SCHEMA
) -> Iterator[pa.Table]:
    group: list[pa.RecordBatch] = []
    intervals: set[int] = set()
    rows = 0
    for batch in batches:
        group.append(batch)
        intervals.update(batch.column("interval").to_pylist())
        rows += batch.num_rows
        while len(intervals) >= ROW_GROUP_INTERVALS or rows >= ROW_GROUP_ROWS:
            table = pa.Table.from_batches(group, schema=schema)
            cut = _row_group_cut(table)
            yield table.slice(0, cut)
            rest = table.slice(cut)
            group = rest.to_batches()
            intervals = set(rest.column("interval").to_pylist())
            rows = rest.num_rows
            if not rows:
                break
    if rows:
        yield pa.Table.from_batches(group, schema=schema)


def _row_group_cut(table: pa.Table) -> int:
    """Rows of the first ROW_GROUP_INTERVALS intervals, at most ROW_GROUP_ROWS (>= 1)."""
    seen: set[int] = set()
    for i, interval in enumerate(table.column("interval").to_pylist()):
        if interval not in seen and len(seen) == ROW_GROUP_INTERVALS:
            return i
        seen.add(interval)
        if i + 1 >= ROW_GROUP_ROWS:
            return i + 1
    return table.num_rows


def seal(run_dir: Path) -> Path:
    """Turn the log (or old-style parts) into intervals.parquet and remove them.

    intervals.parquet appears whole (atomic_file) before the log is removed, so some readable
    copy of the intervals exists at every moment. On an OSError the log is kept and the error
    raised.
    """
    run_dir = Path(run_dir)
    final = run_dir / INTERVALS_FILE
    log = run_dir / INTERVAL_LOG
    parts = _parts(run_dir)
    if final.exists() and not log.exists() and not parts:
        return final
    with atomic_file(final) as f, pq.ParquetWriter(f, INTERVAL_SCHEMA, compression="zstd") as w:
        if log.exists():
            for group in _row_groups(log_batches(log)):
                w.write_table(group)
        for part in parts:  # old-style parts: one row group each
            w.write_table(pq.read_table(part, schema=INTERVAL_SCHEMA))
    log.unlink(missing_ok=True)
    for part in parts:
        part.unlink(missing_ok=True)
    if parts:
        try:
            (run_dir / INTERVAL_PARTS_DIR).rmdir()
        except OSError:
            pass
    fsync_dir(run_dir)
    return final


def seal_log(log: Path, final: Path, schema: pa.Schema) -> Path | None:
    """Turn another per-interval log of a run (telemetry) into its Parquet file and remove
    the log; None when there is no log. As seal(): the Parquet file appears whole before the
    log goes, and an OSError keeps the log."""
    if not log.exists():
        return final if final.exists() else None
    with atomic_file(final) as f, pq.ParquetWriter(f, schema, compression="zstd") as w:
        for group in _row_groups(log_batches(log), schema):
            w.write_table(group)
    log.unlink(missing_ok=True)
    fsync_dir(log.parent)
    return final


# ---------------------------------------------------------------------------------------------
# reading


def log_batches(path: Path) -> Iterator[pa.RecordBatch]:
    """The complete record batches of a log, one at a time (memory-mapped, so a long log is
    never all in memory); stops quietly at a batch cut off mid-write."""
    if Path(path).stat().st_size == 0:
        return  # killed between creating the log and writing its schema
    with pa.memory_map(str(path)) as source:
        try:
            reader = pa.ipc.open_stream(source)
        except (OSError, pa.ArrowException) as exc:
            raise IntervalsUnreadable(f"{Path(path).name} has no readable schema: {exc}") from exc
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                return
            except (OSError, pa.ArrowException):
                return  # a cut-off tail: scan_log says how much
            yield batch


@dataclass
class LogScan:
    """A log's schema version and, when its end was cut off mid-write, how many bytes."""

    version: int
    batches: int
    cut_bytes: int


def scan_log(path: Path) -> LogScan:
    """Check a log without decoding its batches (message headers only): cheap enough to do at
    every listing of a run in progress."""
    size = Path(path).stat().st_size
    if size == 0:
        return LogScan(SCHEMA_VERSION, 0, 0)
    with pa.memory_map(str(path)) as source:
        reader = pa.ipc.MessageReader.open_stream(source)
        try:
            version = _version(pa.ipc.read_schema(reader.read_next_message()))
        except (OSError, pa.ArrowException, StopIteration) as exc:
            raise IntervalsUnreadable(f"{Path(path).name} has no readable schema: {exc}") from exc
        batches = 0
        good = source.tell()
        while True:
            try:
                reader.read_next_message()
            except StopIteration:
                return LogScan(version, batches, 0)
            except (OSError, pa.ArrowException):
                return LogScan(version, batches, size - good)
            batches += 1
            good = source.tell()


def _version(schema: pa.Schema) -> int:
    try:
        return int((schema.metadata or {}).get(VERSION_KEY, b"0"))
    except ValueError:
        return 0


def _parts(run_dir: Path) -> list[Path]:
    parts_dir = Path(run_dir) / INTERVAL_PARTS_DIR
    return sorted(parts_dir.glob("part-*.parquet")) if parts_dir.is_dir() else []


@dataclass
class IntervalSource:
    """Where a run's intervals are and what of them can be read.

    kind: "sealed" (intervals.parquet), "log" (intervals.arrows of a run that did not
    finish), "parts" (Parquet parts of an older tilemark's unfinished run) or "none".
    `problem` says why nothing can be read (the run is damaged); `note` what was lost at the
    end of a log that was cut off (expected after a kill).
    """

    kind: str
    files: list[Path]
    problem: str | None = None
    note: str | None = None
    version: int = 0

    @property
    def path(self) -> Path | None:
        return self.files[0] if self.files else None


def interval_source(run_dir: Path) -> IntervalSource:
    """Which files hold a run's intervals, checked for readability (footer, schema)."""
    run_dir = Path(run_dir)
    final = run_dir / INTERVALS_FILE
    log = run_dir / INTERVAL_LOG
    if final.is_file():
        try:
            meta = pq.read_metadata(final)
        except (OSError, pa.ArrowException) as exc:
            if log.is_file():  # the seal was cut short before the rename: the log is whole
                return _log_source(log)
            return IntervalSource("sealed", [final], problem=f"{final.name} cannot be read: {exc}")
        version = _version(meta.schema.to_arrow_schema())
        return _checked(IntervalSource("sealed", [final], version=version))
    if log.is_file():
        return _log_source(log)
    parts = _parts(run_dir)
    if parts:
        try:
            version = max(_version(pq.read_schema(p)) for p in parts)
        except (OSError, pa.ArrowException) as exc:
            return IntervalSource("parts", parts, problem=f"{INTERVAL_PARTS_DIR}: {exc}")
        return _checked(IntervalSource("parts", parts, version=version))
    return IntervalSource("none", [])


def _checked(source: IntervalSource) -> IntervalSource:
    # A file from a newer tilemark is refused, never read as if it were an older version.
    if source.version > SCHEMA_VERSION:
        import tilemark

        source.problem = (
            f"{source.path.name} has schema_version {source.version}, newer than tilemark "
            f"{tilemark.__version__} reads (up to {SCHEMA_VERSION}); upgrade tilemark"
        )
    return source


def _log_source(log: Path) -> IntervalSource:
    try:
        scan = scan_log(log)
    except (OSError, IntervalsUnreadable) as exc:
        return IntervalSource("log", [log], problem=f"{log.name} cannot be read: {exc}")
    note = None
    if scan.cut_bytes:
        note = (
            f"{log.name} ends in a batch cut off mid-write ({scan.cut_bytes} bytes); "
            "the intervals before it are kept"
        )
    return _checked(IntervalSource("log", [log], note=note, version=scan.version))


def read_parquet(path: Path, columns: list[str] | None = None) -> pa.Table:
    """A Parquet file's rows (these columns, all present, or every column), read as one file.

    pq.read_table opens a dataset: it imports pyarrow.dataset (0.1 s; 0.7 s where pandas is
    installed, which that import loads), for files tilemark always reads whole and alone.
    """
    with pq.ParquetFile(path) as f:
        if columns is not None:
            missing = [c for c in columns if c not in f.schema_arrow.names]
            if missing:
                raise pa.ArrowInvalid(f"{Path(path).name} has no column {missing[0]}")
        return f.read(columns=columns)


def source_batches(source: IntervalSource, columns: list[str] | None = None) -> Iterator[pa.Table]:
    """The interval rows of a source, a piece at a time; IntervalsUnreadable when damaged."""
    if source.problem is not None:
        raise IntervalsUnreadable(source.problem)
    names = columns or INTERVAL_SCHEMA.names
    try:
        if source.kind == "log":
            for batch in log_batches(source.files[0]):
                yield pa.Table.from_batches([batch]).select(names)
        else:
            for f in source.files:
                yield read_parquet(f, names)
    except (OSError, pa.ArrowException) as exc:
        raise IntervalsUnreadable(f"{source.path.name} cannot be read: {exc}") from exc


def read_source(source: IntervalSource, columns: list[str] | None = None) -> pa.Table:
    """The interval rows of a source as one table; IntervalsUnreadable when it is damaged."""
    names = columns or INTERVAL_SCHEMA.names
    tables = list(source_batches(source, names))
    if not tables:
        return INTERVAL_SCHEMA.empty_table().select(names)
    return pa.concat_tables(tables)


def write_parquet(source: IntervalSource, dest: Path) -> None:
    """A source's rows as one Parquet file, a row group at a time (a report of a long run
    that did not finish reads that instead of holding the whole log in memory)."""
    with atomic_file(dest) as f, pq.ParquetWriter(f, INTERVAL_SCHEMA, compression="zstd") as w:
        for table in source_batches(source):
            w.write_table(table)


TOTAL_COLUMNS = ["interval", "phase", "start_ns", "end_ns", "op", "ops", "bytes", "errors"]


def totals(tables: Iterable[pa.Table]) -> dict[str, Any]:
    """What a run's kept intervals add up to, measurement phase only: intervals, duration,
    IOPS and MB/s of data IOs, failed IOs. For runs without a summary (killed)."""
    intervals: set[int] = set()
    spans: set[tuple[int, int, int]] = set()
    ops = nbytes = errors = 0
    for table in tables:
        intervals.update(table.column("interval").to_pylist())
        errors += pc.sum(table.column("errors")).as_py() or 0
        measured = table.filter(pc.equal(table.column("phase"), "measure"))
        data = measured.filter(pc.is_in(measured.column("op"), pa.array(["read", "write"])))
        spans.update(
            zip(
                measured.column("interval").to_pylist(),
                measured.column("start_ns").to_pylist(),
                measured.column("end_ns").to_pylist(),
                strict=True,
            )
        )
        ops += pc.sum(data.column("ops")).as_py() or 0
        nbytes += pc.sum(data.column("bytes")).as_py() or 0
    duration = sum(e - s for _, s, e in spans) / 1e9
    return {
        "intervals": len(intervals),
        "duration_s": duration if spans else None,
        "iops": ops / duration if duration > 0 else None,
        "mbps": nbytes / 1e6 / duration if duration > 0 else None,
        "errors": errors,
    }
